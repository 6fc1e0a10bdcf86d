"""Turns of a clean transcript, the short-word grams, and a turn's time (pure functions).

**A turn** of a clean transcript (``<state>/transcripts/UNIT/SESSION.txt``)
starts at a *prompt line*: a line where the agent's input prompt shows, with
what was typed after it.  Which lines those are depends on the unit:

* ``generic``: a line in which the unit's ``[agent] prompt`` regex (the one
  the daemon looks for on the idle screen's cursor line) matches, with a
  final ``$`` anchor dropped, because in the transcript the typed text
  follows the prompt on that line (``fake> $`` finds ``fake> run the
  tests``; a leading ``^`` keeps its meaning: at the line's start);
* ``codex``: a line starting with ``›`` (its composer); ``claude``: ``❯``;
* a unit with no prompt (or no unit file): either of those two marks.

A turn longer than :data:`MAX_CHARS` characters is cut into *parts* at line
ends (a single longer line at the limit), so a search hit points at a spot
worth opening, not at the start of a long output.  The first part of a turn
is the one that starts at its prompt line.

**Grams.**  FTS5's trigram tokenizer cannot match a query shorter than three
characters, and most Chinese words have two.  :func:`grams` gives, for each
text, what a second, ``unicode61`` index holds: every two characters in a row
of CJK text (a lone CJK character on its own) and every two-letter ASCII
word, so ``适配`` and ``db`` are found by an index too.  (A one-character
query is matched by scanning the text.)

**Time.**  A transcript has no clock in it.  The indexer records *marks*
(``SESSION.marks.jsonl``: the first ``offset`` bytes existed at ``time``, the
file's mtime when they were read); a byte offset's time is the linear
interpolation between the known points: the session's start (from its id),
the marks, and the file's current size and mtime.  The same files give the
same times, so a rebuilt index ranks as the incremental one did.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..config.kinds import ANY_MARKS, KINDS

#: The longest part of a turn that is one event (characters).
MAX_CHARS = 4000

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TWO_LETTER = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{2}(?![A-Za-z0-9])")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
_SESSION_TIME = re.compile(r"(\d{8}T\d{6})(\.\d+)?")


@dataclass(frozen=True)
class Marker:
    """What makes a line a prompt line: one of ``patterns`` matches in it.

    The patterns are searched anywhere in the text, never with a line anchor
    (a literal start lets the regex engine skip ahead: about 0.5 ms per MB
    of output, against 25 ms for a multi-line ``^`` and 60 for a lazy
    prefix); ``line_start`` then keeps only matches that begin their line,
    after blanks when ``blanks`` is set.
    """

    patterns: tuple[re.Pattern[str], ...]
    line_start: bool = False
    blanks: bool = False

    def line_starts(self, text: str) -> list[int]:
        """Offsets of the prompt lines of ``text``, increasing."""
        found: set[int] = set()
        for pattern in self.patterns:
            for m in pattern.finditer(text):
                start = text.rfind("\n", 0, m.start()) + 1
                lead = text[start:m.start()]
                if self.line_start and lead and not (self.blanks and not lead.strip(" \t")):
                    continue
                found.add(start)
        return sorted(found)


def marker_for(kind: str, prompt: str | None) -> Marker:
    """The prompt lines of a unit's transcripts (see the module)."""
    if kind == "generic" and prompt:
        anchored = prompt.startswith("^")
        pattern = prompt[1:] if anchored else prompt
        if pattern.endswith("$") and not _escaped_end(pattern):
            pattern = pattern[:-1]
        return Marker((re.compile(pattern),), line_start=anchored)
    known = KINDS.get(kind)
    marks = known.marks if known is not None and known.marks else ANY_MARKS  # config/kinds.py
    return Marker(tuple(re.compile(re.escape(m)) for m in marks), line_start=True, blanks=True)


def _escaped_end(pattern: str) -> bool:
    """Whether the final ``$`` of ``pattern`` is escaped (an odd number of backslashes before it)."""
    run = len(pattern) - 1 - len(pattern[:-1].rstrip("\\"))
    return run % 2 == 1


@dataclass(frozen=True)
class Part:
    """A piece of text ``[start, end)`` (character offsets); ``turn`` when it starts at a prompt line."""

    start: int
    end: int
    turn: bool


def split(text: str, marker: Marker, max_chars: int = MAX_CHARS) -> list[Part]:
    """``text`` cut at prompt lines, then each turn into parts of at most ``max_chars`` at line ends."""
    starts = marker.line_starts(text)
    lead = [] if starts and starts[0] == 0 else [0]  # text before the first prompt line
    bounds = lead + starts + [len(text)]
    out: list[Part] = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        turn = not (lead and i == 0)
        while a < b:
            end = b
            if b - a > max_chars:
                cut = text.rfind("\n", a, a + max_chars)
                end = cut + 1 if cut >= a else a + max_chars
            out.append(Part(a, end, turn))
            turn = False
            a = end
    return out


def grams(text: str) -> str:
    """What the short-word index holds for ``text`` (space-separated tokens; see the module)."""
    out: list[str] = []
    if not text.isascii():  # most output is ASCII: skip the CJK scan (about half of the time here)
        for m in _CJK_RUN.finditer(text):
            run = m.group()
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i:i + 2] for i in range(len(run) - 1))
    # the runs of letters and digits, kept when two long: as _TWO_LETTER.findall, without its
    # look-behind at every position (93 -> 66 us per 4,000 characters of build output)
    out.extend(w for w in _ALNUM_RUN.findall(text) if len(w) == 2)
    return " ".join(out)


def is_cjk(word: str) -> bool:
    return _CJK_RUN.fullmatch(word) is not None


def two_letter(word: str) -> bool:
    return _TWO_LETTER.fullmatch(word) is not None


@functools.lru_cache(maxsize=1024)
def session_start(session: str) -> float | None:
    """Unix time a session started, from its id (``20261130T143200-1a2b3c``, UTC), else None."""
    m = _SESSION_TIME.match(session)
    if not m:
        return None
    try:
        whole = calendar.timegm(time.strptime(m.group(1), "%Y%m%dT%H%M%S"))
    except ValueError:
        return None
    return whole + (float(m.group(2)) if m.group(2) else 0.0)


@dataclass(frozen=True)
class Timeline:
    """Known (offset, time) points of one transcript, offsets increasing; :meth:`at` interpolates."""

    offsets: tuple[int, ...]
    times: tuple[float, ...]

    @classmethod
    def build(cls, start: float | None, marks: Sequence[tuple[int, float]], size: int, mtime: float) -> Timeline:
        points: list[tuple[int, float]] = [(0, start if start is not None and start <= mtime else mtime)]
        for offset, when in marks:
            if points[-1][0] < offset <= size and when >= points[-1][1]:
                points.append((offset, when))
        if size > points[-1][0]:
            points.append((size, max(mtime, points[-1][1])))
        return cls(tuple(p[0] for p in points), tuple(p[1] for p in points))

    def at(self, offset: int) -> float:
        """The time the byte at ``offset`` existed by (interpolated; clamped to the known range)."""
        i = bisect.bisect_left(self.offsets, offset)
        if i >= len(self.offsets):
            return self.times[-1]
        if self.offsets[i] == offset or i == 0:
            return self.times[i]
        o0, o1 = self.offsets[i - 1], self.offsets[i]
        t0, t1 = self.times[i - 1], self.times[i]
        return t0 + (t1 - t0) * (offset - o0) / (o1 - o0)
