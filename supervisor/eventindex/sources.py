"""What the event index reads: the files, and the events of the memory files.

Sources, found afresh at every update (the files are the truth; the index
forgets a file that is gone):

* ``<state>/transcripts/UNIT/SESSION.txt``: clean transcripts, split into
  turns (:mod:`.transcripts`);
* every decision log and epoch (``.agent/decisions*.log``), one event per
  decision line;
* ``.agent/engram.md`` and ``engram-archive.md``, one event per note;
* ``.agent/facts/*.md``, one event per fact;
* ``<state>/history/UNIT.jsonl``: a cycle record's "where you stopped"
  (its ``where_you_stopped`` or ``trail`` field, when the record has one).

A memory file's events are its lines as written (a decision's line is its
event text, Chinese labels included); torn and malformed lines are left out
(``agentd doctor`` reports them).  Times: a decision's, note's or fact's own
minute (local time, as written), a cycle record's start.
"""

from __future__ import annotations

import calendar
import contextlib
import enum
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..durable import parse_jsonl
from ..memory import decisions, engram, facts, lineformat
from ..memory.store import AgentPaths
from .turns import Marker, marker_for

#: History fields that hold a cycle's "where you stopped" (issue 15 writes them).
STOPPED_FIELDS = ("where_you_stopped", "trail")


class EventKind(str, enum.Enum):
    """What an event is."""

    TURN = "turn"
    DECISION = "decision"
    ENGRAM = "engram"
    FACT = "fact"
    STOPPED = "stopped"  # a cycle's "where you stopped"


class SourceKind(str, enum.Enum):
    TRANSCRIPT = "transcript"
    DECISIONS = "decisions"
    ENGRAM = "engram"
    FACTS = "facts"
    HISTORY = "history"


@dataclass(frozen=True)
class Source:
    """One file the index reads (its path as text: the key in the index), with its ``stat`` when it was found."""

    path: str
    kind: SourceKind
    unit: str | None = None
    session: str | None = None
    module: str | None = None
    stat: os.stat_result | None = None

    @property
    def signature(self) -> tuple[int, int, int] | None:
        """(inode, size, mtime in ns): the file has not changed while these stay the same."""
        st = self.stat
        return None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Row:
    """One event to index: ``at`` is a byte offset (transcripts) or a 1-based line number."""

    kind: EventKind
    at: int
    time: float
    body: str
    module: str | None = None  # an engram note's own module (other files: the file's)


def discover(root: Path, state_dir: Path) -> list[Source]:
    """Every source file present now, with its stat: memory files first, then transcripts newest first."""
    paths = AgentPaths(root)
    found: list[Source] = []
    if paths.dir.is_dir():
        for module in decisions.log_modules(paths):
            for path in decisions.files_of(paths, module):
                found.append(Source(str(path), SourceKind.DECISIONS, module=module))
        for path in (paths.engram_archive, paths.engram):
            found.append(Source(str(path), SourceKind.ENGRAM))
        for module in facts.modules(paths):
            found.append(Source(str(paths.facts(module)), SourceKind.FACTS, module=module))
    for entry in _entries(state_dir / "history"):
        if entry.name.endswith(".jsonl") and not entry.name.endswith(".sessions.jsonl"):
            found.append(Source(entry.path, SourceKind.HISTORY, unit=entry.name[:-len(".jsonl")]))
    out = [s for s in (_with_stat(s) for s in found) if s.stat is not None]
    transcripts = []  # plain strings and scandir's stat here: a pass looks at every transcript
    for unit_dir in _entries(state_dir / "transcripts"):
        if unit_dir.is_dir():
            for entry in _entries(unit_dir.path):
                if entry.name.endswith(".txt"):
                    with contextlib.suppress(OSError):
                        transcripts.append(Source(entry.path, SourceKind.TRANSCRIPT, unit=unit_dir.name,
                                                  session=entry.name[:-4], stat=entry.stat()))
    return out + sorted(transcripts, key=lambda s: s.stat.st_mtime if s.stat else 0.0, reverse=True)


def _entries(directory: Path | str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _with_stat(source: Source) -> Source:
    try:
        return replace(source, stat=os.stat(source.path))
    except OSError:
        return source


def _local_minute(text: str, fallback: float) -> float:
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%d %H:%M"))
    except (ValueError, OverflowError):
        return fallback


def memory_rows(source: Source, root: Path) -> list[Row]:
    """The events of a memory or history file (empty when it is gone)."""
    path = Path(source.path)
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return []
    if source.kind is SourceKind.DECISIONS:
        return list(_decision_rows(path, mtime))
    if source.kind is SourceKind.ENGRAM:
        return [Row(EventKind.ENGRAM, n.line, _local_minute(n.time, mtime), n.render(), n.module)
                for n in engram.all_notes(path)]
    if source.kind is SourceKind.FACTS:
        return [Row(EventKind.FACT, f.line, _local_minute(f.added, mtime), f.render())
                for f in facts.load(AgentPaths(root), source.module)]
    if source.kind is SourceKind.HISTORY:
        return list(_stopped_rows(path))
    raise ValueError(f"{source.path}: not a memory file ({source.kind.value})")


def _decision_rows(path: Path, mtime: float) -> Iterator[Row]:
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        lines.pop()  # a torn last line (no newline): not a decision yet
    seen: set[str] = set()
    for number, raw in enumerate(lines, start=1):
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if not text.strip() or text in seen:
            continue
        seen.add(text)
        try:
            d = lineformat.parse(text)
        except lineformat.LineError:
            continue
        yield Row(EventKind.DECISION, number, _local_minute(d.time, mtime), text)


def _stopped_rows(path: Path) -> Iterator[Row]:
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        record = next(parse_jsonl(raw), None)
        if record is None:
            continue
        text = "\n".join(_flatten(record[f]) for f in STOPPED_FIELDS if record.get(f))
        if text.strip():
            yield Row(EventKind.STOPPED, number, _iso_time(record.get("started")), text)


def _flatten(value: Any, label: str = "") -> str:
    """A record field as text: strings as they are, lists line by line, mappings as ``key: value``."""
    if isinstance(value, str):
        return f"{label}{value}"
    if isinstance(value, dict):
        return "\n".join(_flatten(v, f"{k}: ") for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, list):
        return "\n".join(_flatten(v, label) for v in value)
    return f"{label}{json.dumps(value, ensure_ascii=False)}"


def _iso_time(value: Any) -> float:
    if isinstance(value, str):
        try:
            return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            pass
    return 0.0


@dataclass(frozen=True)
class Reading:
    """How one unit's transcripts are read: its prompt lines, and whether every byte is indexed.

    ``full``: the unit's ``[agent] index = "full"`` (else what the agent did and said, see :mod:`.shaping`).
    """

    marker: Marker
    full: bool = False
    kind: str = "generic"


def reading_of(value: Reading | Marker) -> Reading:
    """A :class:`Reading` (a bare :class:`~.turns.Marker` is read the default way)."""
    return value if isinstance(value, Reading) else Reading(value)


class UnitReadings:
    """Each unit's :class:`Reading` (its prompt-line regex, :func:`.turns.marker_for`, and its ``index``), from
    its unit file.

    Read again when the unit file changes; a unit without a (loadable) file
    gets the default mark and the default reading.  Used from one thread at a time.
    """

    def __init__(self, units_dir: Path | None, load: Callable[[Path, str], Any] | None = None) -> None:
        self.units_dir = units_dir
        self._load = load
        self._cache: dict[str, tuple[float, Reading]] = {}

    def __call__(self, unit: str) -> Reading:
        path = self.units_dir / f"{unit}.toml" if self.units_dir is not None else None
        try:
            stamp = os.stat(path).st_mtime if path is not None else -1.0
        except OSError:
            stamp = -1.0
        have = self._cache.get(unit)
        if have is not None and have[0] == stamp:
            return have[1]
        kind, prompt, full = "generic", None, False
        if stamp >= 0 and self.units_dir is not None:
            try:
                spec = self._loader()(self.units_dir, unit)
                kind, prompt, full = spec.agent.kind, spec.agent.prompt, spec.agent.index == "full"
            except Exception:  # noqa: BLE001 - a broken unit file: the default mark
                pass
        reading = Reading(marker_for(kind, prompt), full, kind)
        self._cache[unit] = (stamp, reading)
        return reading

    def _loader(self) -> Callable[[Path, str], Any]:
        if self._load is None:
            from ..config.units import load_unit

            self._load = load_unit
        return self._load
