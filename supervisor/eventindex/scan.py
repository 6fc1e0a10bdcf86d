"""Which transcripts a pass of the index looks at: the open ones, without listing every transcript each pass.

A crash-looping unit leaves a transcript per restart (thousands a day), and a
pass that listed and ``stat``-ed each of them held every one's path and stat
in memory, so the daemon grew with the transcripts on disk (issue 31 §3).
:class:`TranscriptScan` keeps, per unit directory of ``<state>/transcripts``:

* the directory's ``mtime``: the directory is listed again only when it changed
  (a session began or was pruned, a record was linked) or when its change was
  too recent to trust (a file system's clock is coarse: :data:`RACY` seconds);
* the sessions in it, and which of them are *open*: a transcript is looked at
  (``stat``) at each pass until it is *settled*: not one of the unit's
  :data:`NEWEST` sessions, unchanged for :data:`SETTLE` seconds and indexed
  to its end (the caller says so with :meth:`settled`).  Only one session of a
  unit runs at a time, so a settled transcript never grows again.

Sessions that left a directory since the last pass are handed back once, so
the index drops their events.  Every :data:`FULL_EVERY` seconds the next pass
lists and looks at everything again (what these rules cannot see: a file
changed behind the index's back), as does the first pass of a new scan.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..trail.records import SUFFIX as RECORD_SUFFIX
from .sources import Source, SourceKind, dir_entries

#: Seconds after a directory's last change during which its listing is not trusted (listed again).
RACY = 2.0
#: The newest sessions of each unit are looked at at every pass (the running one, and the one before it).
NEWEST = 2
#: Seconds a transcript must stay unchanged, fully indexed, before it is no longer looked at.
SETTLE = 60.0
#: Seconds between two passes that list and look at every transcript.
FULL_EVERY = 600.0


@dataclass
class _Dir:
    mtime_ns: int = -1
    listed_at: float = float("-inf")  # wall clock of the last listing
    sessions: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)  # sessions with a SESSION.record
    open: set[str] = field(default_factory=set)  # sessions still looked at each pass
    newest: set[str] = field(default_factory=set)  # the NEWEST sessions (ids sort by start)


class TranscriptScan:
    """The transcripts to look at in a pass (see the module); one per :class:`~.index.EventIndex`."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._dirs: dict[str, _Dir] = {}
        self._gone: list[tuple[str, str]] = []  # (unit, session) left since they were last handed back
        self._full_at = float("-inf")
        self.full = True  # the last pass listed everything (its transcripts are every one on disk)

    def transcripts(self, state_dir: Path) -> list[Source]:
        """The transcripts to look at now, newest first (by mtime)."""
        now = self.clock()
        self.full = now - self._full_at >= FULL_EVERY
        if self.full:
            self._full_at = now
        root = Path(state_dir) / "transcripts"
        present: set[str] = set()
        out: list[Source] = []
        for entry in dir_entries(root):
            try:
                if not entry.is_dir():
                    continue
                st = entry.stat()
            except OSError:
                continue
            present.add(entry.name)
            d = self._dirs.setdefault(entry.name, _Dir())
            if self.full or st.st_mtime_ns != d.mtime_ns or st.st_mtime_ns / 1e9 > d.listed_at - RACY:
                self._list(entry.name, entry.path, d, st.st_mtime_ns, now)
            look = d.sessions if self.full else d.open | d.newest
            for session in look:
                path = os.path.join(entry.path, session + ".txt")
                link = os.path.join(entry.path, session + RECORD_SUFFIX) if session in d.links else None
                with contextlib.suppress(OSError):
                    out.append(Source(path, SourceKind.TRANSCRIPT, unit=entry.name, session=session,
                                      stat=os.stat(path), link=link))
        for name in [n for n in self._dirs if n not in present]:
            self._gone += [(name, s) for s in self._dirs.pop(name).sessions]
        return sorted(out, key=lambda s: s.stat.st_mtime if s.stat else 0.0, reverse=True)

    def _list(self, unit: str, path: str, d: _Dir, mtime_ns: int, now: float) -> None:
        entries = [e.name for e in dir_entries(path)]
        sessions = {n[:-4] for n in entries if n.endswith(".txt")}
        self._gone += [(unit, s) for s in d.sessions - sessions]
        d.open = (d.open & sessions) | (sessions - d.sessions)
        d.sessions = sessions
        d.newest = set(sorted(sessions)[-NEWEST:])
        d.links = {n[:-len(RECORD_SUFFIX)] for n in entries if n.endswith(RECORD_SUFFIX)}
        d.mtime_ns, d.listed_at = mtime_ns, now

    def settled(self, source: Source) -> None:
        """``source`` (a transcript looked at in this pass) is indexed to its end: stop looking at it once it
        is old enough and not one of its unit's newest sessions."""
        d = self._dirs.get(source.unit or "")
        if d is None or source.session not in d.open or source.stat is None:
            return
        if self.clock() - source.stat.st_mtime < SETTLE or source.session in d.newest:
            return
        d.open.discard(source.session)

    def gone(self) -> list[tuple[str, str]]:
        """The (unit, session) whose transcripts left since the last call (each handed back once)."""
        gone, self._gone = self._gone, []
        return gone

    def keep_gone(self, gone: list[tuple[str, str]]) -> None:
        """Hand ``gone`` back again at the next :meth:`gone` (the pass could not drop them yet)."""
        self._gone = gone + self._gone

    def looked_at(self) -> int:
        """How many transcripts a pass that lists nothing again looks at (for tests and the bench)."""
        return sum(len(d.open | d.newest) for d in self._dirs.values())
