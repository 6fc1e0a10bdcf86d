"""A secret as written, before a TUI wrapped it at the terminal's width or drew it inside a box.

A TUI draws a long key over several rows: ``│ sk-proj-AbC…xYz │`` then
``│ 123…`` on the next row; a PEM block inside a ``│ `` gutter has the gutter
at the start of every line.  The matching text (:mod:`.cleantext`) keeps
what was drawn, so the key would end at the border and its continuation,
or the PEM block from its second line on, would not be recognised.

:func:`local_view` gives the matcher, for the text after one keyword, the
same text with that decoration taken out:

* a right border and a left gutter around a row's end (``" │" [line break]
  "│ "``, the line break absent when the rows were drawn by cursor moves)
  are removed with the line break: the two rows are one line again (a row
  that was not full keeps its padding, so its words stay apart);
* a left gutter after a line break (``"│ "``, indentation before it
  included) is removed, and a right border before one; the line break stays;
* with the terminal's width known, a line break after a *full* line (as
  wide as the terminal, less one column) is removed, with the next line's
  indentation: the TUI wrapped there.

Only the matcher's view changes: the bytes of the stream, the clean view and
every offset stay those of the text, and the view maps each of its pieces
back (:meth:`View.spans`), so a secret found across a row's end is cut out
in pieces, the decoration between them kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_V = rb"(?:\xe2\x94\x82|\xe2\x94\x83|\xe2\x95\x91)"  # the vertical box lines │ ┃ ║
_BREAK = rb"(?:\r*\n|\r+)"
#: A box row's end (right border, line break or none, left gutter), or a line break with what decorates it.
_DECOR = re.compile(
    rb"(?P<box> ?" + _V + rb"[ \t]*(?:" + _BREAK + rb")?[ \t]*" + _V + rb" ?)"
    rb"|(?P<border> ?" + _V + rb"[ \t]*)?(?P<brk>" + _BREAK + rb")(?P<gutter>[ \t]*" + _V + rb" ?)?"
)
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 continuation bytes: a character's width is its lead byte
_INDENT = re.compile(rb"[ \t]*")
_OPEN_BORDER = re.compile(rb" ?" + _V + rb"[ \t]*\Z")
_PARTIAL_V = re.compile(rb"(?<=[\r\n])[ \t]*\xe2[\x94\x95]?\Z")  # a gutter whose character is not all here yet


@dataclass(frozen=True)
class View:
    """The decoration-free text from ``segments[0][1]`` on: ``text`` and where each piece came from."""

    text: bytes
    segments: tuple[tuple[int, int, int], ...]  # (view start, text start, length)
    open_end: bool  # the view ends where the text ends, inside decoration that a continuation may follow
    to_end: bool  # the view runs to the end of the text (decoration removed there or not)

    def at(self, v: int) -> int:
        """The text offset of view offset ``v`` (the end of the text for ``v == len(text)``)."""
        for vs, ts, length in self.segments:
            if v < vs + length:
                return ts + max(0, v - vs)
        vs, ts, length = self.segments[-1]
        return ts + length

    def offset(self, t: int) -> int:
        """The view offset of text offset ``t`` (a byte the view kept)."""
        for vs, ts, length in self.segments:
            if ts <= t < ts + length:
                return vs + t - ts
        return len(self.text)

    def spans(self, start: int, end: int) -> list[tuple[int, int]]:
        """The text spans of view span ``[start, end)``, one per piece it covers."""
        out = []
        for vs, ts, length in self.segments:
            s, e = max(start, vs), min(end, vs + length)
            if s < e:
                out.append((ts + s - vs, ts + e - vs))
        return out


_TOKEN = re.compile(rb"[^\s'\"`;\xe2]*")  # a token's bytes, up to a blank, a quote, ``;`` or a box line's first byte
_AFTER = re.compile(rb"(?P<border> ?" + _V + rb"|\xe2[\x94\x95]?\Z)|" + _BREAK)


def wraps_after(text: bytes, at: int, cols: int | None) -> bool:
    """Whether the token from ``at`` runs into decoration: a box line, or a line break after a full line.

    Cheap (two anchored matches): what the matcher asks at every keyword of a
    one-line secret before it builds a :func:`local_view`.
    """
    end = _TOKEN.match(text, at).end()  # type: ignore[union-attr]
    m = _AFTER.match(text, end)
    if m is None:
        return False
    return m.group("border") is not None or bool(cols) and _width(text, end) >= cols - 1  # type: ignore[operator]


def needs_view(text: bytes, lo: int, limit: int, cols: int | None) -> bool:
    """Whether ``text[lo:limit]`` holds decoration (box lines, or a line break with a width): for multi-line secrets."""
    if text.find(b"\xe2\x94", lo, limit) != -1 or text.find(b"\xe2\x95", lo, limit) != -1:
        return True
    if limit == len(text) and text.find(b"\xe2", limit - 2, limit) != -1:
        return True  # maybe a gutter's first bytes
    return bool(cols) and (text.find(b"\n", lo, limit) != -1 or text.find(b"\r", lo, limit) != -1)


def local_view(text: bytes, lo: int, limit: int, cols: int | None = None) -> View | None:
    """``text[lo:limit]`` without wrap and box decoration; None when there is none to take out."""
    n = len(text)
    segments: list[tuple[int, int, int]] = []
    parts: list[bytes] = []
    cur, v = lo, 0
    open_end = False
    for m in _DECOR.finditer(text, lo, limit):
        keep: tuple[int, int] | None = None  # what of the decoration stays (a line break)
        resume = m.end()
        if m.group("box") is None:
            border, gutter = m.group("border") is not None, m.group("gutter") is not None
            if cols and _width(text, m.start()) >= cols - 1:
                resume = _INDENT.match(text, m.end()).end()  # a full line: the TUI wrapped here
            elif border and not gutter and m.end() == n:
                pass  # a box row's end, its next row not here yet: as if joined (held: open_end)
            elif border or gutter:
                keep = m.span("brk")
            else:
                continue  # a plain line break
        v = _add(segments, parts, text, cur, m.start(), v)
        if keep is not None:
            v = _add(segments, parts, text, keep[0], keep[1], v)
        elif resume >= n:
            open_end = True
        cur = resume
    tail = (_OPEN_BORDER.search(text, cur, limit) or _PARTIAL_V.search(text, cur, limit)) if limit == n else None
    if tail is not None:  # a right border or a gutter's first bytes at the very end: what follows may continue it
        v = _add(segments, parts, text, cur, tail.start(), v)
        cur, open_end = limit, True
    if not segments and cur == lo:
        return None
    _add(segments, parts, text, cur, limit, v)
    return View(b"".join(parts), tuple(segments), open_end, limit == n)


def _add(segments: list[tuple[int, int, int]], parts: list[bytes], text: bytes, start: int, end: int, v: int) -> int:
    """Append ``text[start:end]`` to the view at view offset ``v``; returns the view's new end."""
    if end > start:
        segments.append((v, start, end - start))
        parts.append(text[start:end])
    return v + max(0, end - start)


def _width(text: bytes, end: int) -> int:
    """Columns of the line that ends at ``end`` (its characters; the line may have begun before ``text``)."""
    start = max(text.rfind(b"\n", 0, end), text.rfind(b"\r", 0, end)) + 1
    line = text[start:end]
    return len(line.translate(None, _CONTINUATION))


__all__ = ["View", "local_view", "needs_view", "wraps_after"]
