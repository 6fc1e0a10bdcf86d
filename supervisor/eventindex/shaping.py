"""What of a turn the index keeps (pure): what the agent did and said, not every byte it printed.

A turn (:mod:`.turns`) of a generic agent's clean transcript is indexed as

* its **head**: the first part, from the prompt line, at most
  :data:`~.turns.MAX_CHARS` characters cut at a line end (what was asked and
  how the agent began);
* its **tail**: the last :data:`TAIL_CHARS` characters, from a line start
  (how it ended: the result, the failing check, the agent's answer);

and the middle of a long turn (a build log, a file dumped to the screen) is
left out: ``agentd logs --at`` still shows any byte of it.  A turn no longer
than the head and the tail together is indexed whole.  In the text indexed,
a run of the same line repeated (a progress bar, a spinner, a retry loop)
is kept once, marked ``[×N]``.

**agentd's wakeup is not the agent's.**  A briefing typed at the prompt
(its first line ``# Wakeup briefing``) is echoed on the screen; the index
keeps that first line and skips the echo, which only repeats decisions,
facts and notes already indexed from their own files (issue 26: each
session's wakeup was a hit of its own).  The echo ends at the first blank
line that is not followed by another ``## `` section of the briefing.

A unit with ``[agent] index = "full"`` keeps every part of every turn, up to
:data:`TURN_CAP` bytes of a turn and its last part (the wakeup's echo is
skipped there too).

The cuts depend only on the turn's own text, so a transcript indexed a step
at a time gives the same events as one read at once: the incremental reader
(:mod:`.transcripts`) keeps the tail of the open turn *open* (read again at
the next step) and never reads its middle twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .turns import MAX_CHARS

#: Characters of a long turn's end that are indexed.
TAIL_CHARS = 4000
#: Full text: bytes of one turn indexed before the rest of it is skipped (its last part is kept).
TURN_CAP = 256 * 1024
#: The first line agentd's wakeup briefing starts with (continuity/wakeup.py).
WAKEUP_MARK = "# Wakeup briefing"
#: How the texts agentd types itself start (continuity/keeper.py's AGENTD_PREFIXES; a test holds them
#: equal): not the agent's asks, and not indexed again from its record.
AGENTD_TEXT = ("# Wakeup briefing", "CHECKPOINT requested by agentd", "agentd started this session from a briefing",
               "agentd: ", "global decision recorded: ")


@dataclass(frozen=True)
class Piece:
    """A span ``[start, end)`` of the region (characters) to index, with the text indexed for it."""

    start: int
    end: int
    body: str


def first_cut(text: str, a: int, b: int, max_chars: int = MAX_CHARS) -> int:
    """Where the part that starts at ``a`` ends (at a line end within ``max_chars``; ``b`` at most)."""
    if b - a <= max_chars:
        return b
    cut = text.rfind("\n", a, a + max_chars)
    return cut + 1 if cut >= a else a + max_chars


def tail_start(text: str, x: int, a: int, b: int) -> int:
    """The start of the tail: the first line start at or after ``x`` (``x`` itself when none is before ``b``).

    ``a`` is where the span starts (a line start or an earlier tail start): never before it.
    """
    if x <= a:
        return a
    nl = text.find("\n", x - 1, b)
    return nl + 1 if nl != -1 and nl + 1 < b else x


def wakeup_echo_end(text: str, a: int, b: int) -> int | None:
    """Where the echo of a wakeup typed at the prompt line starting at ``a`` ends; None if it is not one.

    ``b`` (the span's end) when the echo has not ended yet.
    """
    eol = text.find("\n", a, b)
    first = text[a:eol if eol != -1 else b]
    if WAKEUP_MARK not in first:
        return None
    if eol == -1:
        return b
    at = eol + 1
    after_blank = False
    while at < b:
        nl = text.find("\n", at, b)
        end = nl + 1 if nl != -1 else b
        line = text[at:end]
        if not line.strip():
            after_blank = True
        elif after_blank and not line.startswith("## "):
            return at
        else:
            after_blank = False
        at = end
    return b


def collapse(body: str) -> str:
    """``body`` with each run of the same line kept once, marked ``[×N]`` (N >= 2)."""
    lines = body.split("\n")
    if len(lines) < 3 or len(set(lines)) == len(lines):
        return body
    out: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        j = i + 1
        while j < n and lines[j] == lines[i]:
            j += 1
        run = j - i
        if run > 1 and lines[i].strip():
            out.append(f"{lines[i]} [×{run}]")
        else:
            out.extend(lines[i:j])
        i = j
    return "\n".join(out)


def shape(text: str, a: int, b: int, *, fresh: bool, full: bool,
          byte_at: Callable[[int], int], turn_byte: int) -> tuple[list[Piece], int]:
    """What to index of the span ``[a, b)`` of one turn, and where its open end starts.

    ``fresh``: the span starts the turn (its prompt line, or the file's start);
    else it continues a turn that began at byte ``turn_byte``, earlier than the
    region, from a point this module chose before (a tail start).  Returns the
    pieces (in order) and ``open_from``: if the span is the last of what was
    read, every piece from there on must be read again at the next step.
    """
    c = a
    header = ""
    if fresh:
        echo = wakeup_echo_end(text, a, b)
        if echo is not None:
            eol = text.find("\n", a, b)
            header = text[a:eol + 1] if eol != -1 else text[a:b]
            c = echo
    if full:
        return _full(text, a, b, c, header, byte_at=byte_at, turn_byte=byte_at(a) if fresh else turn_byte)
    if not fresh:
        ts = tail_start(text, max(a, b - TAIL_CHARS), a, b)
        return ([Piece(ts, b, collapse(text[ts:b]))] if ts < b else []), ts
    if c >= b:  # a wakeup still being typed: its first line for now
        return [Piece(a, b, header)], a
    fpe = first_cut(text, c, b)
    head = Piece(a, fpe, collapse(header + text[c:fpe]))
    if fpe >= b:
        return [head], a
    ts = tail_start(text, max(fpe, b - TAIL_CHARS), fpe, b)
    return [head, Piece(ts, b, collapse(text[ts:b]))], ts


def _full(text: str, a: int, b: int, c: int, header: str, *, byte_at: Callable[[int], int],
          turn_byte: int) -> tuple[list[Piece], int]:
    """Every part of ``[c, b)`` (the first one from ``a``, with the wakeup's first line), up to the cap."""
    parts: list[tuple[int, int]] = []
    at = c
    while at < b:
        end = first_cut(text, at, b)
        parts.append((at, end))
        at = end
    if not parts:
        return [Piece(a, b, header)], a
    pieces = []
    for i, (start, end) in enumerate(parts):
        last = i == len(parts) - 1
        if not last and byte_at(start) - turn_byte >= TURN_CAP:
            continue
        if i == 0:
            pieces.append(Piece(a, end, header + text[start:end]))
        else:
            pieces.append(Piece(start, end, text[start:end]))
    return pieces, (a if len(parts) == 1 else parts[-1][0])
