"""A small index of the newest decisions of each log, kept beside ``state.json``, for the wakeup's backtrack.

The backtrack (``continuity/wakeup.py``) scores the newest
:data:`~supervisor.continuity.wakeup.BACKTRACK_WINDOW` decisions of the global
log and of the module's against the task's paths and words.  Parsing 1,000
lines at every wakeup was most of a briefing's time; this index keeps, per
log file, what the scoring needs of each line (time, snapshot, offset, the
lower-cased text it searches, the files) in ``.agent/local/decision-index.json``,
so a build parses only the lines that changed since the last one.

**Never wrong.**  :func:`window` gives exactly what
:func:`~supervisor.memory.decisions.latest` gives (the same decisions, in the
same order): it walks the same files (the live log, then the epochs newest
first, as far as needed; the newest epoch found the same way) and replays the
same reading of each (the tail of :data:`~supervisor.memory.decisions.MERGE_SLACK`
extra lines, repeated lines once, a torn last line left out).  A file is taken
from the index only while its inode, size, modification and change times are
those recorded *before* it was read (the change time cannot be set by hand:
any write, a union merge, an editor's rename, a ``touch``, changes it); any
other file's tail is read again, and each of its lines is parsed again unless
the same text was at the same offset before (an append parses only the new
lines).  A missing, unreadable or older index is built again.

**Durable.**  The index is a cache (``local/`` is this clone's, never
synced): it is replaced atomically, only when something changed, and a
process that may not write it (an agent's tools inside the fence) still gets
the right answer, just without keeping it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from . import lineformat
from .decisions import MERGE_SLACK, Entry, _latest_epoch
from ..durable import atomic_write
from .store import AgentPaths
from .tail import RawLine, tail_lines

VERSION = 1
FILE_NAME = "decision-index.json"


class Indexed(NamedTuple):
    """One decision as the backtrack sees it (see :meth:`entry` for the parsed line)."""

    time: str
    snapshot: str
    snapshot_key: str
    path: Path
    offset: int
    module: str | None
    hay: str  # decision, why and alternatives, lower-cased: what the task's words are looked for in
    files: tuple[str, ...]

    def sort_key(self) -> tuple[str, str, int]:
        """The order of :meth:`supervisor.memory.decisions.Entry.sort_key`."""
        return (self.time, self.snapshot_key, self.offset)

    def entry(self) -> Entry | None:
        """The line parsed (read again at its offset), or None when it is no longer there."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                text = fh.readline().rstrip(b"\n").decode("utf-8", errors="replace").rstrip("\r")
            return Entry(lineformat.parse(text), self.module, self.path, self.offset)
        except (OSError, lineformat.LineError):
            return None


def index_path(paths: AgentPaths) -> Path:
    return paths.local / FILE_NAME


def window(paths: AgentPaths, module: str | None, count: int) -> list[Indexed]:
    """The newest ``count`` decisions of one log, oldest first: :func:`~.decisions.latest`'s, from the index."""
    with Session(paths) as index:
        return index.window(module, count)


class Session:
    """The index read once, used for several logs, written back (atomically) when something changed."""

    def __init__(self, paths: AgentPaths) -> None:
        self.paths = paths
        self.files: dict[str, dict[str, Any]] = _load(index_path(paths))
        self.changed = False
        self.used: set[str] = set()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.save()

    def window(self, module: str | None, count: int) -> list[Indexed]:
        """The newest ``count`` decisions of ``module``'s log, oldest first (see the module)."""
        try:
            return self._window(module, count)
        except (TypeError, IndexError, ValueError, KeyError, AttributeError):  # an index written wrong: build it again
            self.files.clear()
            return self._window(module, count)

    def _window(self, module: str | None, count: int) -> list[Indexed]:
        if count <= 0:
            return []
        want = count + MERGE_SLACK
        entries: list[Indexed] = []
        seen: set[str] = set()
        path = self.paths.decisions(module)
        base, stem = path.parent, self.paths.log_stem(module)
        epoch = _latest_epoch(self.paths, module)
        while True:
            for item in self._items(path, want):
                if item[1] in seen:
                    continue
                seen.add(item[1])
                if item[0] == "e":
                    entries.append(Indexed(item[3], item[4], item[5], path, item[2], module, item[6], tuple(item[7])))
            if len(entries) >= count or epoch <= 0:
                break
            path = base / f"{stem}-epoch-{epoch}.log"  # paths.epoch(module, epoch)
            epoch -= 1
        entries.sort(key=Indexed.sort_key)
        return entries[-count:]

    def _items(self, path: Path, want: int) -> list[list[Any]]:
        """The items of ``path``'s tail: ``["e", key, offset, time, snapshot, snapshot_key, hay, files]`` for a
        decision, ``["b", key, offset, complete]`` for a line that is not one (torn, malformed); ``key``: a digest
        of the text (lines are told apart by their text, as :func:`~.decisions.latest` does)."""
        name = path.name
        self.used.add(name)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if name in self.files:
                del self.files[name]
                self.changed = True
            return []
        sig = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        have = self.files.get(name)
        if have is not None and have.get("sig") == sig and have.get("want") == want:
            return have["items"]
        known = {(i[2], i[1], i[0] == "e" or i[3]): i for i in have["items"]} if have is not None else {}
        items = [known.get((raw.offset, _key(raw), raw.complete)) or _item(raw) for raw in tail_lines(path, want)]
        self.files[name] = {"sig": sig, "want": want, "items": items}
        self.changed = True
        return items

    def save(self) -> None:
        if not self.changed or not self.paths.dir.is_dir():
            return
        for name in set(self.files) - self.used:  # files of logs not read this time: forget those that are gone
            if not (self.paths.dir / name).exists():
                del self.files[name]
        data = json.dumps({"version": VERSION, "files": self.files}, ensure_ascii=False, separators=(",", ":"))
        try:
            atomic_write(index_path(self.paths), data)
        except OSError:  # may not write here (a read-only store, an agent's fence): just not kept
            return
        self.changed = False


def _key(raw: RawLine) -> str:
    """A digest of a line's text."""
    return hashlib.blake2b(raw.text.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()


def _item(raw: RawLine) -> list[Any]:
    key = _key(raw)
    if not raw.complete:  # a torn last line, even if it parses (decisions._parse_raw)
        return ["b", key, raw.offset, False]
    try:
        d = lineformat.parse(raw.text)
    except lineformat.LineError:
        return ["b", key, raw.offset, True]
    return ["e", key, raw.offset, d.time, d.snapshot, d.snapshot_key, f"{d.decision} {d.why} {d.alternatives}".lower(),
            list(d.files)]


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("files"), dict):
        return {}
    return {k: v for k, v in data["files"].items() if _valid(v)}


def _valid(entry: Any) -> bool:
    """The shape of a file's entry (its items are checked as they are used: :meth:`Session.window`)."""
    return (isinstance(entry, dict) and isinstance(entry.get("sig"), list) and isinstance(entry.get("want"), int)
            and isinstance(entry.get("items"), list))

