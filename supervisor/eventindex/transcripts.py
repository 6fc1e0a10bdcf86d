"""Reading a growing clean transcript into events, a bounded step at a time.

A transcript's state in the index is two byte offsets: ``pos``, where its
*open* part starts (every part before it is final), and ``turn_start``, where
the turn holding ``pos`` started.  One :func:`step` reads from ``pos``, at most
``limit`` bytes, and returns the events of that region:

* the region ends at the file's end (the last line may be torn: no newline
  yet, or half a character) or, when ``limit`` stops it earlier, after its
  last newline, so only whole lines and whole characters are split;
* the region is cut into turns at prompt lines, and each turn into what is
  indexed of it (:func:`.shaping.shape`: its head and its tail, or every part
  with ``full``); what belongs to the region's last turn from its *open* start
  on (the tail of a long turn, else its first part) is indexed as it is now
  and read again by the next step (the index first deletes every event at or
  after the old ``pos``), so a line torn now and finished later is indexed
  once, whole, a transcript growing while it is read is never indexed twice,
  and the middle of a long turn is read once and never indexed
  (``agentd logs --at`` still shows any spot);
* a file that shrank or was replaced (another inode) is read again from 0.

Times come from the file's timeline (:class:`.turns.Timeline`); a step that
finalises parts past the last mark first appends a mark ``(pos, mtime)`` to
``SESSION.marks.jsonl`` (:class:`Marks`), so the times of final parts depend
only on files.
"""

from __future__ import annotations

import bisect
import fcntl
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from ..durable import JsonlTail
from .sources import EventKind, Row
from .shaping import Piece, shape
from .turns import Marker, Timeline, session_start

#: The least a bounded step may read (so that it always finalises something).
MIN_LIMIT = 64 * 1024
_SURROGATE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True)
class Position:
    """A transcript's state in the index (``ino`` None: never read)."""

    ino: int | None = None
    size: int = 0
    mtime_ns: int = 0
    pos: int = 0
    turn_start: int = 0


@dataclass
class Step:
    """What one step read: delete events at or after ``drop_from`` (all when ``reset``), add ``rows``."""

    position: Position
    drop_from: int
    reset: bool
    rows: list[Row] = field(default_factory=list)
    consumed: int = 0
    more: bool = False  # the file has bytes past this step
    open_tail: bool = False  # the region ends in the tail of a long turn (indexed, unless deferred)
    deferred: bool = False  # that tail was left out for now (``defer_tail``)


def marks_path(text_path: Path) -> Path:
    return text_path.with_name(text_path.stem + ".marks.jsonl")


class Marks:
    """The marks of each transcript (``SESSION.marks.jsonl``), read incrementally and appended to.

    A marks file is read again only when it grew beyond what was read or written here (another
    writer, such as ``recall --reindex``, may have appended to it): one ``stat`` per look.  The
    :data:`KEPT` transcripts used last keep their reader (a crash-looping unit makes a new transcript
    per restart: one reader each, never dropped, grew the daemon without bound); one used again after
    that is read again from its start.
    """

    KEPT = 256

    def __init__(self) -> None:
        self._known: OrderedDict[str, tuple[str, JsonlTail, list[tuple[int, float]]]] = OrderedDict()

    def _entry(self, text_path: Path) -> tuple[str, JsonlTail, list[tuple[int, float]]]:
        key = str(text_path)
        entry = self._known.get(key)
        if entry is None:
            path = marks_path(text_path)
            entry = self._known[key] = (str(path), JsonlTail(path), [])
            while len(self._known) > self.KEPT:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        return entry

    def get(self, text_path: Path) -> list[tuple[int, float]]:
        path, tail, marks = self._entry(text_path)
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0
        if size > tail.offset:
            for line in tail.lines():
                try:
                    item = json.loads(line)
                    marks.append((int(item["offset"]), float(item["time"])))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn or foreign line
        return marks

    def forget(self, text_path: Path) -> None:
        """Drop what is kept of a transcript that is gone."""
        self._known.pop(str(text_path), None)

    def add(self, text_path: Path, offset: int, when: float) -> None:
        """One whole line appended under the file's lock, not fsynced: marks are a cache of times (a mark
        lost with a power cut makes that stretch's times coarser), and an fsync per step was most of
        the indexer's system time."""
        self.get(text_path)  # whatever another writer appended first
        path, tail, marks = self._entry(text_path)
        line = (json.dumps({"offset": offset, "time": when}, separators=(",", ":")) + "\n").encode()
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # never glued to a torn line
            os.write(fd, line)
            if size == tail.offset:  # nobody else wrote in between: ours is known without reading it
                tail.offset = size + len(line)
                marks.append((offset, when))
        finally:
            os.close(fd)
        self.get(text_path)


def _utf8_cut(data: bytes) -> int:
    """The largest length <= len(data) that does not cut a UTF-8 character."""
    end = len(data)
    back = 0
    while back < 3 and end - back - 1 >= 0 and (data[end - back - 1] & 0xC0) == 0x80:
        back += 1
    if end - back - 1 >= 0 and data[end - back - 1] >= 0xC0:
        lead = data[end - back - 1]
        need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if back + 1 < need:
            return end - back - 1
    return end


def _clean(text: str) -> str:
    """Text fit for SQLite: bytes that were not UTF-8 become U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class ByteMap:
    """Byte offsets of character offsets of a decoded region (``base``: the region's first byte)."""

    def __init__(self, text: str, base: int, ascii_only: bool) -> None:
        self.text, self.base, self.ascii = text, base, ascii_only
        self._chars: list[int] = [0]
        self._bytes: list[int] = [0]

    def __call__(self, char: int) -> int:
        if self.ascii:
            return self.base + char
        i = bisect.bisect_right(self._chars, char) - 1
        c0, b0 = self._chars[i], self._bytes[i]
        offset = b0 + len(self.text[c0:char].encode("utf-8", "surrogateescape"))
        if c0 != char:
            self._chars.insert(i + 1, char)
            self._bytes.insert(i + 1, offset)
        return self.base + offset


def step(path: Path, session: str, was: Position, marker: Marker, marks: Marks,
         limit: int | None, *, full: bool = False, defer_tail: bool = False) -> Step | None:
    """Read the next region of ``path`` (see the module); None when nothing changed or the file is gone.

    ``defer_tail``: leave out the open tail of a long turn (it is read again next time: the file is
    stored as unread, size -1), so that a turn that keeps growing is not indexed again at every step.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if (was.ino, was.size, was.mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns):
        return None
    reset = was.ino is not None and (was.ino != st.st_ino or st.st_size < was.pos)
    pos, turn_start = (0, 0) if reset or was.ino is None else (was.pos, was.turn_start)
    want = st.st_size - pos if limit is None else min(max(limit, MIN_LIMIT), st.st_size - pos)
    with open(path, "rb") as fh:
        fh.seek(pos)
        data = fh.read(want)
    at_end = pos + len(data) >= st.st_size
    if not at_end:
        newline = data.rfind(b"\n")
        data = data[:newline + 1] if newline >= 0 else (data[:_utf8_cut(data)] or data)
    if not data:
        return Step(Position(st.st_ino, st.st_size, st.st_mtime_ns, pos, turn_start), pos, reset)
    text = data.decode("utf-8", "surrogateescape")
    byte_at = ByteMap(text, pos, data.isascii())
    starts = marker.line_starts(text)
    bounds = ([] if starts and starts[0] == 0 else [0]) + starts + [len(text)]
    fresh_first = (starts and starts[0] == 0) or pos == turn_start
    pieces: list[Piece] = []
    open_from = 0
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        fresh = i > 0 or fresh_first
        if fresh:
            turn_start = byte_at(a)
        got, open_from = shape(text, a, b, fresh=fresh, full=full, byte_at=byte_at, turn_byte=turn_start)
        pieces += got
    new_pos = byte_at(open_from)
    if not at_end and new_pos == pos:  # the bounded region holds nothing final: take it all as final
        new_pos = pos + len(data)
    open_tail = not full and new_pos > turn_start and new_pos < pos + len(data)
    deferred = open_tail and defer_tail
    if deferred:
        pieces = [p for p in pieces if p.start < open_from]
    known = marks.get(path)
    if new_pos > pos and new_pos > (known[-1][0] if known else 0):
        marks.add(path, new_pos, st.st_mtime)
        known = marks.get(path)
    rows: list[Row] = []
    timeline: Timeline | None = None
    for piece in pieces:
        body = _clean(piece.body)
        if body.strip():
            timeline = timeline or Timeline.build(session_start(session), known, st.st_size, st.st_mtime)
            rows.append(Row(EventKind.TURN, byte_at(piece.start), timeline.at(byte_at(piece.end)), body))
    # size -1: the file has more to read, so the next step never takes it as unchanged
    position = Position(st.st_ino, st.st_size if at_end and not deferred else -1, st.st_mtime_ns, new_pos, turn_start)
    return Step(position, pos, reset, rows, len(data), not at_end, open_tail, deferred)
