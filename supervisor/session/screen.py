"""An agent's rendered screen, read cheaply: a raw tail plus pyte on demand.

Finding an agent's prompt means reading what a person would see, not what
bytes went by: TUIs move the cursor, recolour, clear and redraw.  pyte (a
real VT100/xterm emulator) renders the screen; regexes over raw ANSI never
do.

pyte is pure Python and costs roughly 3 µs per byte, far too much to run on
every byte of 50 agents printing 20 KB/s each.  So :class:`Screen` does not
emulate continuously:

* :meth:`Screen.feed` appends the chunk to a bounded ring buffer of the
  latest raw output (:data:`DEFAULT_TAIL` bytes).  This is a ``bytearray``
  append plus an occasional trim (amortised O(len(data)), no parsing).
* :meth:`Screen.render` (and :meth:`lines`, :meth:`cursor_line`) builds a
  fresh pyte screen of the session's size from that tail, once, and caches it
  until more output arrives.  Callers render only when they need to look
  (e.g. when output has been quiet for a moment), so a flood costs nothing
  but the appends.

The approximation: the screen is rebuilt from the tail alone, as if the
terminal had been blank before it.  The render starts at the last full-screen
reset in the tail (``ESC c``, ``ESC[2J``, ``ESC[?1049h``/``ESC[?47h``) when
there is one (nothing before it can be visible), else at the first line start
after the cut, so a tail that begins mid-escape-sequence does not leak half a
sequence as text.  Content that was drawn before the tail and never redrawn
since is missing; the latest redraws, which is where a prompt is, render
correctly in practice (32 KiB is several full redraws of a 40x120 screen even
with colours).  Cursor-relative moves before the first absolute positioning in
the tail may land a few lines off; the line under the cursor at the end is
what prompt detection uses, and it is drawn last.  pyte does not keep a
separate alternate screen buffer: entering it just shows what is drawn next,
and leaving it shows whatever was last drawn (not the restored main screen).
"""

from __future__ import annotations

import re

import pyte

__all__ = ["DEFAULT_TAIL", "Screen"]

#: Bytes of raw output kept for rendering.
DEFAULT_TAIL = 32 * 1024

# Anything that can move the cursor to another line but a newline: every escape sequence except a
# colour (SGR) or a title (OSC), and the controls pyte takes as a line feed.  A tail without them is
# plain text.
_MOVES = re.compile(rb"\x1b(?!\[[0-9;]*m|\][^\x07\x1b]*(?:\x07|\x1b\\))|[\x0b\x0c]")

# Sequences after which nothing earlier can be visible (full reset, erase
# display, enter the alternate screen).  Searched only in the kept tail.
_FULL_CLEAR = re.compile(rb"\x1bc|\x1b\[[0-9;]*2J|\x1b\[\?(?:1049|1047|47)h")


class Screen:
    """The latest raw output of one terminal, rendered by pyte on demand."""

    def __init__(self, rows: int, cols: int, tail: int = DEFAULT_TAIL) -> None:
        if rows < 1 or cols < 1:
            raise ValueError("a screen needs at least one row and one column")
        if tail < 1:
            raise ValueError("the tail must hold at least one byte")
        self.rows = rows
        self.cols = cols
        self.tail = tail
        self._buf = bytearray()
        self._trimmed = False  # bytes were dropped from the front at least once
        self._cache: pyte.Screen | None = None
        self._lines: tuple[pyte.Screen | None, list[str]] = (None, [])  # lines() of that render (pyte's display costs ms)
        #: Statistics for tests and status: how often pyte ran and how many bytes it parsed.
        self.renders = 0
        self.rendered_bytes = 0
        self.fed_bytes = 0

    # -- input ------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Remember ``data`` (no parsing); invalidates the cached render."""
        if not data:
            return
        self.fed_bytes += len(data)
        self._cache = None
        if len(data) >= self.tail:
            self._buf = bytearray(data[-self.tail:])
            self._trimmed = True
            return
        self._buf += data
        # Trim only when twice the size: amortised O(1) per byte.
        if len(self._buf) > 2 * self.tail:
            del self._buf[: len(self._buf) - self.tail]
            self._trimmed = True

    def resize(self, rows: int, cols: int) -> None:
        """The terminal changed size (the next render uses it)."""
        if (rows, cols) != (self.rows, self.cols):
            self.rows, self.cols = rows, cols
            self._cache = None

    def clear(self) -> None:
        """Forget all output (e.g. a new session in the same terminal)."""
        self._buf = bytearray()
        self._trimmed = False
        self._cache = None

    # -- rendering --------------------------------------------------------------
    def raw_tail(self) -> bytes:
        """The bytes a render starts from (see the module docstring)."""
        data = bytes(self._buf[-self.tail:])
        cut = len(self._buf) > self.tail or self._trimmed
        last_clear = None
        for match in _FULL_CLEAR.finditer(data):
            last_clear = match.start()
        if last_clear is not None:
            return data[last_clear:]
        if cut:
            newline = data.find(b"\n")
            if newline >= 0:
                data = data[newline + 1:]
        return self._visible_lines(data)

    def plain_tail(self) -> bytes | None:
        """:meth:`raw_tail` when it is plain text (no cursor moves but newlines, :data:`_MOVES`: every
        character it shows is drawn in order, on blank), else None."""
        data = self.raw_tail()
        return None if _MOVES.search(data) is not None else data

    def _visible_lines(self, data: bytes) -> bytes:
        """Of plain text (no cursor moves but newlines, :data:`_MOVES`), only its last ``rows`` lines: the
        cursor never goes back up, so each row is drawn on blank and nothing before those lines can be on
        the screen (the same screen, cursor included); pyte's cost is per byte (a streaming agent's
        32 KiB tail rendered once its output pauses was most of the daemon's CPU after it)."""
        if _MOVES.search(data) is not None:  # the cursor may go back up: anything may still show
            return data
        cut, lines = len(data), 0
        while lines < self.rows or data[cut - 1:cut] != b"\r":  # and the cut at column 0: after a \r\n
            cut = data.rfind(b"\n", 0, cut)
            if cut < 0:
                return data
            lines += 1
        return data[cut + 1:]

    def render(self) -> pyte.Screen:
        """A pyte screen of the current size built from the tail (cached until new output)."""
        if self._cache is None:
            screen = pyte.Screen(self.cols, self.rows)
            # LNM off: a bare \n moves down only, as on a real tty whose
            # driver already turned \n into \r\n.
            stream = pyte.ByteStream(screen)
            data = self.raw_tail()
            stream.feed(data)
            self.renders += 1
            self.rendered_bytes += len(data)
            self._cache = screen
        return self._cache

    def lines(self) -> list[str]:
        """The visible rows as text, trailing blanks removed (computed once per render: the watch asks every second)."""
        screen = self.render()
        if self._lines[0] is not screen:
            self._lines = (screen, [line.rstrip() for line in screen.display])
        return list(self._lines[1])

    def text(self) -> str:
        """The visible screen as one string (rows joined by newlines, trailing blank rows dropped)."""
        return "\n".join(self.lines()).rstrip("\n")

    def cursor(self) -> tuple[int, int]:
        """(row, column) of the cursor, both from 0."""
        screen = self.render()
        return screen.cursor.y, screen.cursor.x

    def cursor_line(self) -> str:
        """The row the cursor is on, trailing blanks removed, but never cut before the cursor.

        So a prompt such as ``"fake> "`` with the cursor after its space reads
        as ``"fake> "`` (the space is kept), while a row with text right of
        the cursor (a TUI's input box border) keeps that text.
        """
        screen = self.render()
        row = screen.display[screen.cursor.y]
        text = row.rstrip()
        if len(text) < screen.cursor.x:
            text = row[: screen.cursor.x]
        return text
