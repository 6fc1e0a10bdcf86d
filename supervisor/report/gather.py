"""The report's reads of the project: blob hashes, the probes of a respawn, and the per-unit baseline.

Blocking (files, git objects are not needed: blob ids are computed from the
bytes); the keeper calls these in its thread.

Where the baseline is kept: ``.agent/local/report/<unit>.json``, atomically,
beside the record of where the agent stopped (per host, git-ignored): the cold
session's figures and what the last two sessions left (:class:`~.figures.Baseline`),
so a session kept twice (a scope revert, then its checkpoint) is still
compared with the session before it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..durable import write_json
from ..memory.gitfiles import blob_hash
from ..memory.store import AgentPaths
from ..trail.model import Trail
from . import figures as fig

REPORT_DIR = "report"


#: Files larger than this are not read to be hashed: their size and modification time stand for them.
HASH_LIMIT = 32 * 1024 * 1024


def blob_of(root: Path, path: str) -> str | None:
    """The git blob id of ``path`` (relative to ``root``, or absolute) now; None when it is not a file.

    The bytes as they are (no filter), and a symlink as its target's text, as git and the snapshots store
    it: never followed, so a link an agent made is not read through.
    """
    full = Path(path) if path.startswith("/") else Path(root) / path
    try:
        info = full.lstat()
        if stat.S_ISLNK(info.st_mode):
            return blob_hash(os.fsencode(os.readlink(full)))
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > HASH_LIMIT:
            return f"large:{info.st_size}:{info.st_mtime_ns}"
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # swapped for a FIFO: no wait
        with os.fdopen(fd, "rb") as fh:
            return blob_hash(fh.read()) if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) else None
    except OSError:
        return None


def store_path(root: Path, unit: str) -> Path:
    return AgentPaths(Path(root)).local / REPORT_DIR / f"{unit}.json"


def load_state(root: Path, unit: str) -> dict[str, Any]:
    try:
        data = json.loads(store_path(root, unit).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def after_session(root: Path, unit: str, session: str | None, trail: Trail | None, *, scope: Sequence[str] = (),
                  forbid: Sequence[str] = (), generic: bool = False, module: str | None = None) -> fig.Figures | None:
    """At a session's end: its figures against the session before it (None without a trail), and
    the baseline for the next one saved."""
    state = load_state(root, unit)
    last = fig.Baseline.from_dict(state["last"]) if isinstance(state.get("last"), dict) else None
    prev = fig.Baseline.from_dict(state["prev"]) if isinstance(state.get("prev"), dict) else None
    if last is not None and last.session == session:  # kept again (a revert, then the checkpoint)
        last = prev
    cold = state.get("cold") if isinstance(state.get("cold"), dict) else None
    result = None
    if trail is not None:
        now = {p: blob_of(root, p) for p in fig.files_to_hash(trail, last)}
        cold_edit = cold.get("actions_to_edit") if cold else None
        result = fig.resumed(trail, session, last, now, scope=scope, forbid=forbid, cold=cold_edit, generic=generic,
                             settled=settled_decisions(root, module) if last is not None else ())
        if cold is None or cold.get("session") == session:
            if last is None:
                state["cold"] = {"session": session, "actions_to_edit": result.actions_to_edit}
                result.cold_actions_to_edit = result.actions_to_edit
    here = fig.baseline(trail, session, lambda p: blob_of(root, p), lambda p: blob_of(root, p) is not None)
    state["prev"] = last.as_dict() if last is not None else None
    state["last"] = here.as_dict()
    write_json(store_path(root, unit), state, mode=0o600)
    return result


#: How many of the newest decision snapshots are checked for undone files.
SETTLED_SNAPSHOTS = 20


def settled_decisions(root: Path, module: str | None) -> list[fig.Settled]:
    """The newest decisions of ``module`` (and the global log) with the files each changed, from their
    snapshots (the blobs of the snapshot before and of the decision's own)."""
    from ..memory import snapshots
    from ..memory.gitfiles import matches

    paths = AgentPaths(Path(root))
    wanted = {None, "global", module}
    out: list[fig.Settled] = []
    for ident in reversed(snapshots.list_ids(paths)[-SETTLED_SNAPSHOTS * 10:]):
        if len(out) >= SETTLED_SNAPSHOTS:
            break
        data = snapshots.load(paths, ident)
        if not data or data.get("module") not in wanted or not data.get("named_files") or not data.get("previous"):
            continue
        before = (snapshots.load(paths, data["previous"]) or {}).get("files") or {}
        after = data.get("files") or {}
        named = [str(n) for n in data["named_files"]]
        files = {p: (before.get(p), after.get(p)) for p in set(before) | set(after)
                 if matches(p, named) and before.get(p) != after.get(p)}
        if files:
            out.append(fig.Settled(str(data.get("decision") or "?"), files))
    return out
