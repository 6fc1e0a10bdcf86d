"""What the supervisor's checkpoint cycle needs from the store.

* :func:`memory_fingerprint` — a cheap digest of the files an agent writes
  when asked to checkpoint (engram, its decision logs, current-task); compare
  the value before and after to see whether the agent wrote anything.
* :func:`write_auto_checkpoint` — when the agent did not confirm, record that
  fact in the engram (an ``[auto]`` line) and write ``recent-summary.md`` from
  the transcript tail, atomically.  Both are redacted
  (:func:`~supervisor.session.redact.redact_text`): ``.agent/`` is committed
  and typed into the next session, so no secret may reach it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from ..session.redact import redact_text
from .clock import Clock, moment, system_clock
from .engram import append_note
from .store import AgentPaths, atomic_write, format_time, validate_module

TAIL_BYTES = 4096
SUMMARY_MAX_CHARS = 4000


def _file_digest(path: Path) -> bytes:
    """size, mtime_ns and a hash of the last TAIL_BYTES of ``path`` (appends change the tail)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path.name}:missing".encode()
    with path.open("rb") as fh:
        fh.seek(max(0, st.st_size - TAIL_BYTES))
        tail = fh.read()
    return f"{path.name}:{st.st_size}:{st.st_mtime_ns}:".encode() + hashlib.sha256(tail).digest()


def memory_fingerprint(root: Path, module: str | None) -> str:
    """Digest of engram.md, current-task.md, decisions.log and the module's task and log (and its newest epoch)."""
    paths = AgentPaths(Path(root))
    module = validate_module(module)
    files = [paths.engram, paths.current_task, paths.decisions(None)]
    if module is not None:
        files += [paths.decisions(module), paths.task(module)]
    h = hashlib.sha256()
    for path in files:
        h.update(_file_digest(path))
        h.update(b"\0")
    # a roll rewrites the live log without its oldest block; the state counters change with every decision
    h.update(_file_digest(paths.state))
    return h.hexdigest()


def write_auto_checkpoint(
    root: Path,
    module: str | None,
    reason: str,
    transcript_tail: str,
    *,
    now: datetime | None = None,
    env: Mapping[str, str] | None = None,
    clock: Clock = system_clock,
) -> Path:
    """Note in the engram that the agent did not confirm, and write recent-summary.md.

    ``env`` (the unit's environment) adds its secret values to what is redacted.
    """
    paths = AgentPaths(Path(root))
    module = validate_module(module)
    now = moment(now, clock)
    reason = redact_text(" ".join(reason.split()), env) or "no reason given"
    append_note(
        paths.root,
        f"agent did not confirm the checkpoint ({reason}); module {module or 'global'}; "
        "recent-summary.md was written from the transcript tail",
        "auto",
        module=module,
        now=now,
    )
    # Redact before cutting: a cut through a secret would leave a piece no pattern knows.
    tail = redact_text(transcript_tail, env)[-SUMMARY_MAX_CHARS:].strip("\n")
    text = (
        "# Recent summary\n\n"
        f"Written automatically at {format_time(now)} for module {module or 'global'}: "
        f"the agent did not confirm the checkpoint ({reason}).\n\n"
        "Last transcript lines:\n\n```\n" + tail.replace("```", "``\u200b`") + "\n```\n"
    )
    atomic_write(paths.recent_summary, text)
    return paths.recent_summary
