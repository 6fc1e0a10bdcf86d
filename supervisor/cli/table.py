"""tabulate's ``simple`` table without importing tabulate (standard library only).

Importing tabulate costs about 0.1 s (it imports ``importlib.metadata`` and
``wcwidth``), most of a short command such as ``agentd status``.
:func:`simple_table` produces exactly what ``tabulate(rows, headers=headers)``
produces for the cells the CLI's tables hold: ``int`` cells (a numeric column,
right-aligned) and one-line text of printable ASCII, a few one-column
punctuation marks and colour codes (a text column, left-aligned).  For
anything else (a cell that looks like a number, a wide or zero-width
character, ``None``, a float, no rows) it returns ``None`` and the caller
uses tabulate itself, so the output never depends on which one ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: tabulate's minimum padding between a header and its column's width (MIN_PADDING).
MIN_PADDING = 2
#: The colour codes tabulate ignores when it measures a cell (a subset of its own pattern).
_SGR = re.compile(r"\x1b\[\d+(?:;\d+)*m")
#: Non-ASCII characters one column wide for wcwidth and never number-like.
_NARROW = frozenset("…—–→←×·°")


def _plain_text(text: str) -> bool:
    """One line whose visible characters are each one column wide, and that no parser takes for a number."""
    seen = _SGR.sub("", text) if "\x1b" in text else text
    if not (seen.isascii() and seen.isprintable()):
        if not all(c in _NARROW or (" " <= c <= "~") for c in seen):
            return False
    try:
        float(text)
    except ValueError:
        return True
    return False  # "12", "1e3", "nan", "inf", "1_0": tabulate would parse it


def simple_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str | None:
    """``tabulate(rows, headers=headers)`` (format ``simple``), or None when a cell is outside the covered kinds."""
    if not rows or not headers or any(len(r) != len(headers) for r in rows):
        return None
    if not all(isinstance(h, str) and _plain_text(h) for h in headers):
        return None
    columns = []
    for i in range(len(headers)):
        cells = [r[i] for r in rows]
        typed = [c for c in cells if c != ""]  # tabulate takes "" for a missing value: it has no type
        if not all(type(c) is int or (isinstance(c, str) and _plain_text(c)) for c in typed):
            return None
        numeric = bool(typed) and all(type(c) is int for c in typed)
        columns.append((numeric, [str(c) if numeric else str(c).strip() for c in cells]))
    for numeric, cells in columns:
        if numeric and "" in cells:
            return None
    def bare(text: str) -> str:  # without colour codes (most cells have none: no regex for them)
        return _SGR.sub("", text) if "\x1b" in text else text

    widths = []
    for header, (_, cells) in zip(headers, columns):
        widths.append(max(len(bare(header)) + MIN_PADDING, *(len(bare(c)) for c in cells)))

    def pad(text: str, width: int, right: bool) -> str:
        if "\x1b" in text:
            width += len(text) - len(_SGR.sub("", text))
        return text.rjust(width) if right else text.ljust(width)

    lines = ["  ".join(pad(h, w, numeric) for h, w, (numeric, _) in zip(headers, widths, columns)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for j in range(len(rows)):
        lines.append("  ".join(pad(cells[j], w, numeric) for w, (numeric, cells) in zip(widths, columns)).rstrip())
    return "\n".join(lines)
