"""Colours and widths for the CLI's tables: colour only on a terminal, never with NO_COLOR.

``colour_on(stream)``: the stream is a terminal, ``NO_COLOR`` is unset or
empty (https://no-color.org), and ``TERM`` is not ``dumb``.  ``fit(...)``
makes a table no wider than the terminal: it drops the least useful columns
first, then cuts the last (free-text) column with an ellipsis.  Piped output
is never cut: scripts get every column (or ``--json``).

Standard library only (the fast ``agentd status`` of :mod:`.fast` renders
through it): colours are written as click writes them, tables by
:func:`.table.simple_table` where it covers the cells, else by tabulate.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .table import simple_table

#: click colour per unit state (the dashboard's tones).
STATE_COLOURS = {
    "running": "green", "starting": "cyan", "checkpointing": "magenta", "respawning": "magenta",
    "stopping": "cyan", "waiting": "yellow", "backoff": "yellow", "failed": "red", "inactive": "bright_black",
    "error": "red",
}
LEVEL_COLOURS = {"debug": "bright_black", "info": "green", "warning": "yellow", "error": "red", "critical": "red"}
#: Colours for unit name prefixes (`agentd logs --all`), as honcho and pm2 do.
PREFIX_COLOURS = ("cyan", "yellow", "green", "magenta", "blue", "bright_cyan", "bright_yellow", "bright_green",
                  "bright_magenta", "bright_blue")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: The SGR foreground codes of click's colour names (what ``click.style(text, fg=...)`` writes).
_FG = {name: 30 + i for i, name in enumerate(("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"))}
_FG |= {f"bright_{name}": code + 60 for name, code in list(_FG.items())}


def colour_on(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def paint(text: str, colour: str | None, on: bool, bold: bool = False) -> str:
    """``text`` in ``colour`` (a click colour name), exactly as ``click.style(text, fg=colour, bold=bold)``."""
    if not (on and colour):
        return text
    return f"\x1b[{_FG[colour]}m\x1b[{1 if bold else 22}m{text}\x1b[0m"


def state(text: str, on: bool, name: str | None = None) -> str:
    """``text`` (a state, or a label such as ``running (frozen: ...)``) in the colour of the state ``name``."""
    name = name or text
    return paint(text, STATE_COLOURS.get(name), on, bold=name == "failed")


def width(stream: TextIO | None = None) -> int | None:
    """The terminal's width, or None when the output is not a terminal (nothing is cut then)."""
    stream = stream or sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return _columns(100)


def _columns(fallback: int) -> int:
    """``shutil.get_terminal_size(...).columns`` without importing shutil (bz2, lzma: ~6 ms of ``agentd status``)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


def visible_len(text: str) -> int:
    return len(_ANSI.sub("", text))


def tabulate(rows: list[list[Any]], headers: list[str], **tabulate_args: Any) -> str:
    """``tabulate.tabulate``, without importing it when :func:`.table.simple_table` covers the table."""
    text = None if tabulate_args else simple_table(rows, headers)
    if text is None:
        from tabulate import tabulate as full

        text = full(rows, headers=headers, **tabulate_args)
    return text


def fit(headers: Sequence[str], rows: list[list[Any]], limit: int | None, drop: Sequence[str] = (),
        min_last: int = 24, **tabulate_args: Any) -> str:
    """``tabulate`` the rows; with a ``limit``: cut the last column (not below ``min_last``), then drop the
    ``drop`` columns in order (cutting again) until the table fits."""
    headers, rows = list(headers), [list(r) for r in rows]
    text = tabulate(rows, headers=headers, **tabulate_args)
    if limit is None:
        return text
    pending = list(drop)
    while True:
        widest = max(map(visible_len, text.splitlines()), default=0)
        if widest <= limit or not headers:
            return text
        over = widest - limit
        last = ["" if r[-1] is None else str(r[-1]) for r in rows]
        longest = max((visible_len(v) for v in last), default=0)
        room = max(min_last, longest - over)
        cut = [list(r[:-1]) + [v if visible_len(v) <= room else _ANSI.sub("", v)[:room - 1] + "…"]
               for r, v in zip(rows, last)]
        text = tabulate(cut, headers=headers, **tabulate_args)
        if max(map(visible_len, text.splitlines()), default=0) <= limit or not pending:
            return text
        name = pending.pop(0)
        if name in headers:
            i = headers.index(name)
            headers.pop(i)
            for r in rows:
                r.pop(i)
        text = tabulate(rows, headers=headers, **tabulate_args)


def wrap(text: str, limit: int | None, first: str = "", indent: int = 2) -> list[str]:
    """``text`` after ``first``, wrapped to ``limit`` columns (continuation lines indented); one line when
    ``limit`` is None (piped output is never cut or wrapped)."""
    if limit is None or len(first) + len(text) <= limit:
        return [first + text]
    import textwrap

    return textwrap.wrap(text, width=max(20, limit), initial_indent=first, subsequent_indent=" " * indent,
                         break_on_hyphens=False) or [first]
