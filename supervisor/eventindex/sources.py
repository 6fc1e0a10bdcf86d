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
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..durable import parse_jsonl
from ..memory import decisions, engram, facts, lineformat
from ..memory.store import AgentPaths
from ..trail.records import SUFFIX as RECORD_SUFFIX
from ..trail.records import read_link
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
    TRAIL = "trail"  # what a Codex or Claude Code agent asked, said and did, from its own record


class SourceKind(str, enum.Enum):
    TRANSCRIPT = "transcript"
    DECISIONS = "decisions"
    ENGRAM = "engram"
    FACTS = "facts"
    HISTORY = "history"
    RECORD = "record"  # a Codex or Claude Code session's own record, linked beside its transcript


@dataclass(frozen=True)
class Source:
    """One file the index reads (its path as text: the key in the index), with its ``stat`` when it was found."""

    path: str
    kind: SourceKind
    unit: str | None = None
    session: str | None = None
    module: str | None = None
    stat: os.stat_result | None = None
    link: str | None = None  # a transcript's SESSION.record (supervisor.trail.records), when there is one
    agent: str | None = None  # a record's agent kind (codex, claude)

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
    """Every source file present now, with its stat: memory files first, then transcripts newest first
    (the daemon's passes look only at the transcripts that may have changed: :mod:`.scan`)."""
    return memory_sources(root, state_dir) + transcript_sources(state_dir)


def memory_sources(root: Path, state_dir: Path) -> list[Source]:
    """The memory files and the history files present now, with their stat."""
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
    for entry in dir_entries(state_dir / "history"):
        if entry.name.endswith(".jsonl") and not entry.name.endswith(".sessions.jsonl"):
            found.append(Source(entry.path, SourceKind.HISTORY, unit=entry.name[:-len(".jsonl")]))
    return [s for s in (_with_stat(s) for s in found) if s.stat is not None]


def transcript_sources(state_dir: Path) -> list[Source]:
    """Every transcript present now, with its stat, newest first."""
    transcripts = []  # plain strings and scandir's stat here: a listing looks at every transcript
    for unit_dir in dir_entries(state_dir / "transcripts"):
        if unit_dir.is_dir():
            entries = dir_entries(unit_dir.path)
            links = {e.name[:-len(RECORD_SUFFIX)] for e in entries if e.name.endswith(RECORD_SUFFIX)}
            for entry in entries:
                if entry.name.endswith(".txt"):
                    session = entry.name[:-4]
                    link = os.path.join(unit_dir.path, session + RECORD_SUFFIX) if session in links else None
                    with contextlib.suppress(OSError):
                        transcripts.append(Source(entry.path, SourceKind.TRANSCRIPT, unit=unit_dir.name,
                                                  session=session, stat=entry.stat(), link=link))
    return sorted(transcripts, key=lambda s: s.stat.st_mtime if s.stat else 0.0, reverse=True)


class Links:
    """The record a transcript's link names (:mod:`supervisor.trail.records`), read again when the link changes."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, tuple[str, Path] | None]] = {}

    def forget(self, link: str) -> None:
        """Drop what is kept of a link that is gone (its session's transcript was pruned)."""
        self._cache.pop(link, None)

    def record(self, transcript: Source) -> Source | None:
        """The source to read instead of ``transcript``: the agent's record, when linked and present."""
        if transcript.link is None:
            return None
        try:
            stamp = os.stat(transcript.link).st_mtime_ns
        except OSError:
            return None
        have = self._cache.get(transcript.link)
        if have is None or have[0] != stamp:
            have = self._cache[transcript.link] = (stamp, read_link(Path(transcript.link)))
        if have[1] is None:
            return None
        kind, path = have[1]
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None  # a record is a regular file, never a link to another
        return Source(str(path), SourceKind.RECORD, unit=transcript.unit, session=transcript.session, stat=st,
                      agent=kind)


def dir_entries(directory: Path | str) -> list[os.DirEntry[str]]:
    """The entries of ``directory``; none when it is gone or not a directory (the scan and the listing share it)."""
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
    env: tuple[tuple[str, str], ...] = ()  # the unit's [agent] env: its secret values are redacted from records


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
        kind, prompt, full, env = "generic", None, False, ()
        if stamp >= 0 and self.units_dir is not None:
            try:
                spec = self._loader()(self.units_dir, unit)
                kind, prompt, full = spec.agent.kind, spec.agent.prompt, spec.agent.index == "full"
                env = tuple(sorted(spec.agent.env.items()))
            except Exception:  # noqa: BLE001 - a broken unit file: the default mark
                pass
        reading = Reading(marker_for(kind, prompt), full, kind, env)
        self._cache[unit] = (stamp, reading)
        return reading

    def _loader(self) -> Callable[[Path, str], Any]:
        if self._load is None:
            from ..config.units import load_unit

            self._load = load_unit
        return self._load
