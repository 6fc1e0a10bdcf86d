"""Read the end of a file without reading the whole file.

The wakeup needs the last few decisions of logs that may hold 100,000 lines;
:func:`tail_lines` seeks from the end in blocks, so its cost depends on how
many lines are wanted, not on the size of the file.  Line numbers are only
computed (by counting newlines before an offset) when someone asks, e.g. to
report a malformed line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BLOCK = 8192


@dataclass(frozen=True)
class RawLine:
    """One line of a file: its text (no newline), byte offset, and whether it ended with a newline."""

    text: str
    offset: int
    complete: bool


def tail_lines(path: Path, count: int) -> list[RawLine]:
    """The last ``count`` lines of ``path`` (oldest first); ``[]`` if missing.

    Blank lines are skipped.  The final line is returned even when it lacks
    its newline (``complete=False``), so a torn write can be reported.
    """
    if count <= 0:
        return []
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return []
    with fh:
        end = fh.seek(0, os.SEEK_END)
        pos = end
        buf = b""
        while pos > 0:
            step = min(BLOCK, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            # the first (possibly partial) line of the buffer is not trusted
            if buf.count(b"\n") > count and _nonblank_after_first(buf) >= count:
                break
    lines = list(_split(buf, pos, end))
    if pos > 0:
        lines = lines[1:]  # starts mid-line
    lines = [ln for ln in lines if ln.text.strip()]
    return lines[-count:]


def _nonblank_after_first(buf: bytes) -> int:
    return sum(1 for part in buf.split(b"\n")[1:] if part.strip())


def _split(buf: bytes, base: int, end: int) -> Iterator[RawLine]:
    start = 0
    while start < len(buf):
        nl = buf.find(b"\n", start)
        if nl == -1:
            yield RawLine(_decode(buf[start:]), base + start, False)
            return
        yield RawLine(_decode(buf[start:nl]), base + start, True)
        start = nl + 1


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").rstrip("\r")


def all_lines(path: Path) -> list[RawLine]:
    """Every non-blank line of ``path`` with offsets (for recall and doctor)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [ln for ln in _split(data, 0, len(data)) if ln.text.strip()]


def line_number(path: Path, offset: int) -> int:
    """1-based line number of the line starting at byte ``offset`` (counts newlines before it)."""
    count = 0
    with path.open("rb") as fh:
        remaining = offset
        while remaining > 0:
            chunk = fh.read(min(1 << 20, remaining))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count + 1
