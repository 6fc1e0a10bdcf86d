"""Where the ``.agent/`` files live, and the two ways they are written durably.

Every write to the memory store is one of:

* :func:`append_line` — a whole line appended while holding the store lock
  (:func:`supervisor.durable.append_line`: one ``write``, ``fsync``, a torn
  last line never glued to);
* :func:`atomic_write` / :func:`write_json` — :mod:`supervisor.durable`'s
  temp-fsync-rename; readers see the old or the new file, never a mix.

:func:`store_lock` is one ``fcntl.flock`` on ``.agent/local/lock``; every read-modify-
write of the store (decide, fact changes, promote, the merge of `agentd sync`)
runs inside it, so eight processes deciding at once are serialised and nothing
interleaves.

``.agent/local/`` holds what belongs to this clone only (the lock, the
``state.json`` cache, the sync record); it is git-ignored and never synced.
Everything else in ``.agent/`` is shared, so nothing in it may depend on a
counter: ids come from :mod:`.ids`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import durable
from ..durable import atomic_write, write_json
from .ids import IdError, numbered_snapshot_id
from .ids import parse_snapshot_id as _parse_snapshot_id

__all__ = ["atomic_write", "write_json"]  # re-exported: the store's writes are durable's

AGENT_DIR = ".agent"
LOCAL_DIR = "local"
GLOBAL = "global"
_MODULE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_EPOCH_RE = re.compile(r"epoch|.*-epoch-\d+$")
TIME_FORMAT = "%Y-%m-%d %H:%M"


class StoreError(Exception):
    """A user-facing problem with the memory store; the message says what to do."""


def validate_module(module: str | None) -> str | None:
    """Return ``module`` if it is a usable module name (or None for the global log)."""
    if module is None or module == GLOBAL:
        return None
    if not _MODULE_RE.fullmatch(module) or _EPOCH_RE.match(module):
        raise StoreError(
            f"module name {module!r} is not usable: use letters, digits, '_', '.', '-' "
            "(at most 64 characters, not starting with 'epoch' nor ending in '-epoch-N'); 'global' means the global log"
        )
    return module


def format_time(when: datetime) -> str:
    """The minute-resolution timestamp used in every memory line."""
    return when.strftime(TIME_FORMAT)


@dataclass(frozen=True)
class AgentPaths:
    """Every path of the store, derived from the project root."""

    root: Path

    @property
    def dir(self) -> Path:
        return self.root / AGENT_DIR

    @property
    def constraints(self) -> Path:
        return self.dir / "constraints.md"

    @property
    def current_task(self) -> Path:
        """The global task (the only task file before per-module tasks)."""
        return self.dir / "current-task.md"

    @property
    def tasks_dir(self) -> Path:
        return self.dir / "tasks"

    def task(self, module: str | None) -> Path:
        """``tasks/<module>.md`` for a module, ``current-task.md`` for the global task."""
        return self.current_task if module is None else self.tasks_dir / f"{module}.md"

    @property
    def engram(self) -> Path:
        return self.dir / "engram.md"

    @property
    def engram_archive(self) -> Path:
        return self.dir / "engram-archive.md"

    @property
    def snapshots(self) -> Path:
        return self.dir / "snapshots"

    @property
    def facts_dir(self) -> Path:
        return self.dir / "facts"

    @property
    def recent_summary(self) -> Path:
        return self.dir / "recent-summary.md"

    @property
    def local(self) -> Path:
        """This clone's own state: git-ignored, never synced."""
        return self.dir / LOCAL_DIR

    @property
    def state(self) -> Path:
        return self.local / "state.json"

    @property
    def lock(self) -> Path:
        return self.local / "lock"

    @property
    def sync_state(self) -> Path:
        return self.local / "sync.json"

    @property
    def sync_lock(self) -> Path:
        return self.local / "sync.lock"

    def log_stem(self, module: str | None) -> str:
        """``decisions`` for the global log, ``decisions-<module>`` for a module."""
        return "decisions" if module is None else f"decisions-{module}"

    def decisions(self, module: str | None) -> Path:
        """The live decision log of ``module`` (None: the global log)."""
        return self.dir / f"{self.log_stem(module)}.log"

    def epoch(self, module: str | None, number: int) -> Path:
        """Archived epoch ``number`` (1-based) of ``module``'s log."""
        return self.dir / f"{self.log_stem(module)}-epoch-{number}.log"

    def facts(self, module: str | None) -> Path:
        return self.facts_dir / f"{module or GLOBAL}.md"

    def snapshot(self, ident: int | str) -> Path:
        """The file of snapshot ``ident`` (an id, or an old sequence number)."""
        return self.snapshots / f"{parse_snapshot_id(str(ident))}.json"

    def rel(self, path: Path) -> str:
        """``path`` relative to the project root, for messages."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def snapshot_id(seq: int) -> str:
    """The old numbered form ``snapshot-014`` (still read everywhere; new ids are ULIDs)."""
    return numbered_snapshot_id(seq)


def parse_snapshot_id(text: str) -> str:
    """Canonical id of ``snapshot-<ULID>``, ``snapshot-014``, ``014`` or ``14``; a :class:`StoreError` otherwise."""
    try:
        return _parse_snapshot_id(text)
    except IdError as exc:
        raise StoreError(str(exc)) from None


def require_store(paths: AgentPaths) -> None:
    """Raise a clear error when ``.agent/`` has not been scaffolded."""
    if not paths.dir.is_dir():
        raise StoreError(f"{paths.dir} does not exist: run `agentd init` in the project root first")


@contextlib.contextmanager
def store_lock(paths: AgentPaths) -> Iterator[None]:
    """Exclusive lock over the whole store (blocking ``flock`` on ``.agent/local/lock``)."""
    with file_lock(paths.lock):
        yield


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive, blocking ``flock`` on ``path`` (created if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def append_line(path: Path, line: str) -> int:
    """Append one whole line (the caller holds :func:`store_lock`); return its byte offset."""
    return durable.append_line(path, line, lock=False)


def write_if_missing(path: Path, text: str) -> bool:
    """Create ``path`` with ``text`` unless it exists; return True if created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def read_text(path: Path) -> str:
    """File text, or ``""`` when the file does not exist."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


# state.json ------------------------------------------------------------------------

def read_state(paths: AgentPaths) -> dict[str, Any]:
    """This clone's cache (``local/state.json``); missing or unreadable gives the empty state.

    Nothing in it is needed for correctness: ``last_snapshot`` keeps the ids
    of one store increasing, ``thinned_upto`` spares re-reading thinned
    snapshots.  Losing it (a fresh clone) costs nothing but a little time.
    """
    try:
        data = json.loads(paths.state.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    data["version"] = 2
    data.setdefault("last_snapshot", None)
    data.setdefault("thinned_upto", "")
    if not isinstance(data["thinned_upto"], str):  # version 1 kept a sequence number
        data["thinned_upto"] = ""
    return data


def write_state(paths: AgentPaths, state: dict[str, Any]) -> None:
    write_json(paths.state, state)
