"""Where an agent's own record of a session is: a link beside the session's clean transcript.

Codex keeps a rollout, Claude Code a session transcript; only the adapter
learns which file belongs to which agentd session (by the thread id its
notify or hooks report).  The daemon writes what it learnt into
``<state>/transcripts/UNIT/SESSION.record`` (one JSON object: the agent's kind
and the absolute path of its record), so that readers without the daemon's
memory (the event index, ``agentd recall --reindex``) read the agent's own
trail of that session.  Replaced atomically when the record changes (Claude
Code's ``/clear`` starts a new file).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..durable import atomic_write

SUFFIX = ".record"


def link_path(text_path: Path) -> Path:
    """``SESSION.record`` beside ``SESSION.txt``."""
    return text_path.with_name(text_path.name.removesuffix(".txt") + SUFFIX)


def write_link(text_path: Path, kind: str, record: Path) -> None:
    atomic_write(link_path(text_path), json.dumps({"kind": kind, "path": str(record)}) + "\n", mode=0o600)


def read_link(link: Path) -> tuple[str, Path] | None:
    """(kind, record path) of a link file, None when it is missing or not one."""
    try:
        data = json.loads(link.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or not isinstance(data.get("path"), str):
        return None
    path = Path(data["path"])
    return (data["kind"], path) if path.is_absolute() else None
