"""What a viewer sees first of a session: its recent lines, or its current screen repainted.

A viewer (``agentd attach``, the dashboard's live terminal) joins a session
that has been writing for a while.  Two kinds of agent need two openings:

* a **line-oriented** agent (a REPL, the fake agent) prints line after line:
  the last ~4 KiB of its redacted transcript (``.log``), cut at a line start,
  replays its recent lines (:func:`recent_context`);
* a **full-screen** agent (Codex's or Claude Code's TUI) draws with cursor
  moves, and may sit on one screen for hours (a login screen, an error):
  its last 4 KiB hold no line start, or half a redraw, and the viewer saw a
  blank terminal.  Its current screen is rendered instead (pyte, through
  :class:`~supervisor.session.screen.Screen`, from the ``.log``'s last
  32 KiB) and sent as a repaint: clear, each row with its colours, the cursor
  (:func:`repaint`).

The opening is built from the ``.log``, which is redacted: a viewer sees no
more than the live stream would show.  Every character of a repaint comes
from pyte's cells, control characters replaced, and every attribute is
re-encoded from a fixed table: an agent cannot smuggle a sequence through it.

:class:`Opening` joins the opening to the live output without a gap and
without a repeat: it starts listening and notes the ``.log``'s size in the
same step on the loop (the transcript appends before it calls listeners, and
both happen on the loop), builds the opening from the bytes before that size
in a thread (pyte costs about 3 µs a byte: never on the loop), then hands on
the opening and the output it held meanwhile, in order.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..session.screen import DEFAULT_TAIL, Screen

#: Bytes of a line-oriented agent's recent output a viewer gets first.
CONTEXT_BYTES = 4096

#: Sequences that move the cursor to another line (or clear, scroll, save/restore it, or switch screens): output
#: with none of them is a stream of lines, and the last lines replay it; with one, only a render shows the screen.
_DRAWS = re.compile(rb"\x1b\[[0-9;?]*[ABEFHJLMSTdfr]|\x1b[78DEMc]|\x1b\[\?(?:1049|1047|47)[hl]")
_ALT = re.compile(rb"\x1b\[\?(?:1049|1047|47)([hl])")
_MODES = re.compile(rb"\x1b\[\?([0-9;]+)([hl])")
#: Private modes a repaint sets again as the agent last set them: cursor keys, the cursor shown, bracketed paste
#: (a render starts at the last full clear: a mode set before it is read from the whole tail).
_KEPT_MODES = (1, 25, 2004)

_COLOURS = {"black": 0, "red": 1, "green": 2, "brown": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}
_HEX = re.compile(r"[0-9a-fA-F]{6}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def draws_screen(data: bytes) -> bool:
    """Whether ``data`` (raw terminal output) moves the cursor between lines: a full-screen program."""
    return _DRAWS.search(data) is not None


def log_tail(path: Path, upto: int | None = None, size: int = DEFAULT_TAIL) -> tuple[bytes, bool]:
    """The last ``size`` bytes of a ``.log`` before offset ``upto`` (None: its end), and whether it was cut."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, os.SEEK_END) if upto is None else upto
            start = max(0, end - size)
            fh.seek(start)
            return fh.read(end - start), start > 0
    except OSError:
        return b"", False


def recent_context(log_path: Path, size: int = CONTEXT_BYTES, upto: int | None = None) -> bytes:
    """The last ``size`` bytes of a raw transcript, starting at a line start when cut."""
    data, cut = log_tail(log_path, upto, size)
    return _from_line_start(data) if cut else data


def _from_line_start(data: bytes) -> bytes:
    newline = data.find(b"\n")
    return data[newline + 1:] if newline >= 0 else b""


def render(data: bytes, rows: int, cols: int) -> Any:
    """A pyte screen of ``data``, the last :data:`DEFAULT_TAIL` bytes at most of a session's output (a
    :class:`Screen` starts it at the last full clear, or at a line start when it begins mid-stream)."""
    screen = Screen(rows, cols)
    screen.feed(data)
    return screen.render()


def screen_text(log_path: Path, rows: int, cols: int, upto: int | None = None) -> list[str] | None:
    """The rows of a full-screen agent's current screen (trailing blank rows dropped), or None when its
    latest output is plain lines (then its clean transcript reads well)."""
    data, _cut = log_tail(log_path, upto)
    if not draws_screen(data):
        return None
    lines = [line.rstrip() for line in render(data, rows, cols).display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def opening(log_path: Path, rows: int, cols: int, upto: int | None = None) -> bytes:
    """What a viewer gets first: the recent lines, or a repaint of a full-screen agent's screen (blocking)."""
    data, cut = log_tail(log_path, upto)
    if not draws_screen(data):
        recent = data[-CONTEXT_BYTES:]
        return _from_line_start(recent) if cut or len(data) > CONTEXT_BYTES else recent
    return repaint(render(data, rows, cols), _alternate(data), _modes(data))


def _alternate(data: bytes) -> bool:
    switches = _ALT.findall(data)
    return bool(switches) and switches[-1] == b"h"


def _modes(data: bytes) -> dict[int, bool]:
    """The :data:`_KEPT_MODES` the agent set (True) or reset (False) last in ``data``."""
    last: dict[int, bool] = {}
    for numbers, flag in _MODES.findall(data):
        for number in numbers.split(b";"):
            if number.isdigit() and int(number) in _KEPT_MODES:
                last[int(number)] = flag == b"h"
    return last


def _colour(value: str, base: int) -> list[str]:
    """SGR parameters of a pyte colour (a name, ``bright`` + a name, or six hex digits); [] for the default."""
    if value in _COLOURS:
        return [str(base + _COLOURS[value])]
    if value.startswith("bright") and value[6:] in _COLOURS:
        return [str(base + 60 + _COLOURS[value[6:]])]
    if _HEX.fullmatch(value):
        return [str(base + 8), "2", *(str(int(value[i:i + 2], 16)) for i in (0, 2, 4))]
    return []


def _sgr(char: Any) -> str:
    params = ["0"]
    for flag, code in (("bold", "1"), ("italics", "3"), ("underscore", "4"), ("blink", "5"), ("reverse", "7"),
                       ("strikethrough", "9")):
        if getattr(char, flag):
            params.append(code)
    params += _colour(char.fg, 30) + _colour(char.bg, 40)
    return "\x1b[" + ";".join(params) + "m"


def _blank(char: Any) -> bool:
    return char.data in (" ", "") and char.bg == "default" and not char.reverse and not char.underscore


def repaint(screen: Any, alternate: bool = False, modes: dict[int, bool] | None = None) -> bytes:
    """Bytes that draw pyte ``screen`` on a terminal of its size: clear, every row, then the cursor and the
    ``modes`` (private mode -> set; the cursor's visibility is pyte's unless ``modes`` has 25)."""
    modes = {25: not screen.cursor.hidden, **(modes or {})}
    out = ["\x1b[?1049h" if alternate else "", "\x1b[0m\x1b[H\x1b[2J"]
    for y in range(screen.lines):
        row = screen.buffer[y]
        last = max((x for x in range(screen.columns) if not _blank(row[x])), default=-1)
        if last < 0:
            continue
        out.append(f"\x1b[{y + 1};1H")
        current = None
        for x in range(last + 1):
            char = row[x]
            sgr = _sgr(char)
            if sgr != current:
                out.append(sgr)
                current = sgr
            out.append(_CONTROL.sub(" ", char.data))  # "" is a wide character's second cell
    out.append(f"\x1b[0m\x1b[{screen.cursor.y + 1};{screen.cursor.x + 1}H")
    out.append("".join(f"\x1b[?{mode}{'h' if on else 'l'}" for mode, on in sorted(modes.items())))
    return "".join(out).encode("utf-8", errors="replace")


class Opening:
    """A viewer's first view of a session, then the session's output, in order (see the module docstring).

    Use as the session's listener (it is callable): ``deliver`` gets the opening once :meth:`run` has
    built it, then every chunk, the held ones first.
    """

    def __init__(self, log_path: Path, rows: int, cols: int, deliver: Callable[[bytes], None]) -> None:
        self.log_path, self.rows, self.cols, self.deliver = log_path, rows, cols, deliver
        try:
            self.upto: int | None = os.stat(log_path).st_size  # what the opening shows; the listener gets the rest
        except OSError:
            self.upto = None
        self.held: list[bytes] | None = []

    def __call__(self, data: bytes) -> None:
        if self.held is None:
            self.deliver(data)
        else:
            self.held.append(data)

    async def run(self) -> None:
        first = b""
        if self.upto is not None:
            try:
                first = await asyncio.to_thread(opening, self.log_path, self.rows, self.cols, self.upto)
            except Exception:  # noqa: BLE001 - a screen that does not render: the viewer gets the live output
                first = b""
        held, self.held = self.held or [], None
        for data in [first, *held]:
            if data:
                self.deliver(data)
