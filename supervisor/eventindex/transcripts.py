"""Reading a growing clean transcript into events, a bounded step at a time.

A transcript's state in the index is two byte offsets: ``pos``, where its
*open* part starts (every part before it is final), and ``turn_start``, where
the turn holding ``pos`` started.  One :func:`step` reads from ``pos``, at most
``limit`` bytes, and returns the events of that region:

* the region ends at the file's end (the last line may be torn: no newline
  yet, or half a character) or, when ``limit`` stops it earlier, after its
  last newline, so only whole lines and whole characters are split;
* the region is cut into parts (:func:`.turns.split`); every part but the last
  is final; the last is the *open* part, indexed as it is now and read again
  by the next step (the index first deletes every event at or after the old
  ``pos``), so a line torn now and finished later is indexed once, whole,
  and a transcript growing while it is read is never indexed twice;
* of a turn longer than :data:`TURN_CAP` bytes (a flood of output) the parts
  in its first :data:`TURN_CAP` bytes and its last part are indexed, the rest
  is skipped (``agentd logs --at`` still shows any spot);
* a file that shrank or was replaced (another inode) is read again from 0.

Times come from the file's timeline (:class:`.turns.Timeline`); a step that
finalises parts past the last mark first appends a mark ``(pos, mtime)`` to
``SESSION.marks.jsonl`` (:class:`Marks`), so the times of final parts depend
only on files.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from ..durable import JsonlTail, append_jsonl
from .sources import EventKind, Row
from .turns import Marker, Timeline, session_start, split

#: Bytes of one turn indexed before the rest of it is skipped (its last part is kept).
TURN_CAP = 256 * 1024
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


def marks_path(text_path: Path) -> Path:
    return text_path.with_name(text_path.stem + ".marks.jsonl")


class Marks:
    """The marks of each transcript (``SESSION.marks.jsonl``), read incrementally and appended to.

    The :data:`KEPT` transcripts used last keep their reader (a crash-looping unit makes a new
    transcript per restart: one reader each, never dropped, grew the daemon without bound); one
    used again after that is read again from its start."""

    KEPT = 256

    def __init__(self) -> None:
        self._tails: OrderedDict[Path, tuple[JsonlTail, list[tuple[int, float]]]] = OrderedDict()

    def get(self, text_path: Path) -> list[tuple[int, float]]:
        path = marks_path(text_path)
        tail, marks = self._tails.setdefault(path, (JsonlTail(path), []))
        self._tails.move_to_end(path)
        while len(self._tails) > self.KEPT:
            self._tails.popitem(last=False)
        for line in tail.lines():
            try:
                item = json.loads(line)
                marks.append((int(item["offset"]), float(item["time"])))
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line
        return marks

    def add(self, text_path: Path, offset: int, when: float) -> None:
        append_jsonl(marks_path(text_path), {"offset": offset, "time": when})
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


def step(path: Path, session: str, was: Position, marker: Marker, marks: Marks,
         limit: int | None) -> Step | None:
    """Read the next region of ``path`` (see the module); None when nothing changed or the file is gone."""
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
    parts = split(text, marker)
    spans: list[tuple[int, int]] = []
    offset = pos
    for part in parts:
        size = len(text[part.start:part.end].encode("utf-8", "surrogateescape"))
        spans.append((offset, offset + size))
        offset += size
    final = len(parts) - 1 if (at_end or len(parts) > 1) else len(parts)
    new_pos = spans[final][0] if final < len(parts) else pos + len(data)
    known = marks.get(path)
    if final and new_pos > (known[-1][0] if known else 0):
        marks.add(path, new_pos, st.st_mtime)
        known = marks.get(path)
    timeline = Timeline.build(session_start(session), known, st.st_size, st.st_mtime)
    rows: list[Row] = []
    for i, (part, (start, end)) in enumerate(zip(parts, spans)):
        if part.turn:
            turn_start = start
        if i < final:
            last_of_turn = i + 1 < len(parts) and parts[i + 1].turn
            if start - turn_start >= TURN_CAP and not last_of_turn:
                continue
        body = _clean(text[part.start:part.end])
        if body.strip():
            rows.append(Row(EventKind.TURN, start, timeline.at(end), body))
    # size -1: the file has more to read, so the next step never takes it as unchanged
    position = Position(st.st_ino, st.st_size if at_end else -1, st.st_mtime_ns, new_pos, turn_start)
    return Step(position, pos, reset, rows, len(data), not at_end)
