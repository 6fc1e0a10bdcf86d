"""Clean text from a terminal byte stream: escape sequences and controls removed, CRs folded.

One parse of the bytes serves two readers.  :func:`split_text` removes every
escape sequence, every control but TAB, LF and CR, and the characters a
terminal draws as nothing (zero-width space and joiners, word joiner, BOM),
and says where cursor movements to another line were:

* the secret redactor matches on that text as is (:func:`project`): a key
  drawn in two pieces with a cursor move between them is one word on the
  screen, and so is one with a zero-width character inside; :func:`text_runs` says which raw bytes each piece of the text came
  from, so a secret found in the text can be cut out of the raw bytes;
* the clean view puts a newline where each line move was
  (:func:`with_newlines`), then folds carriage returns and decodes UTF-8
  (:class:`LineFolder`).

:class:`CleanTextFilter` is the clean view of a stream on its own: it carries
an unfinished escape sequence (an OSC/DCS string included, up to
:data:`MAX_UNFINISHED` bytes), a pending ``\\r`` and the incremental UTF-8
decoder between chunks, so a chunk boundary never changes the result.
"""

from __future__ import annotations

import codecs
import re

# Cursor movements to another line (CUP, HVP, CUU, CUD, CNL, CPL, VPA) become a newline.
_CSI_MOVE = re.compile(rb"\x1b\[[0-?]*[ -/]*[HfABEFd]")
# Everything else (the final-byte class of CSI is [@-~] without HfABEFd): CSI, OSC (BEL/ST terminated, or cut short by the next ESC),
# DCS/SOS/PM/APC strings, charset designations and other ESC sequences.
_ESC_SEQ = re.compile(
    rb"\x1b(?:"
    rb"\[[0-?]*[ -/]*[@CDGI-ceg-~]"
    rb"|\][^\x07\x1b]*(?:\x07|\x1b\\|(?=\x1b))"
    rb"|[PX^_][^\x1b]*(?:\x1b\\|(?=\x1b))"
    rb"|(?![\[\]PX^_])[ -/]*[0-~]"
    rb")"
)
_CR = re.compile(rb"\r+\n?")
#: A carriage return that is not (with the ones right after it) the first half of a ``\r\n``.
_LONE_CR = re.compile(rb"\r[^\r\n]")
# C0 controls except TAB, LF, CR; plus DEL.  Deleted with bytes.translate.
_CTRL_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D)) + b"\x7f"

# -- matching text (for the redactor) --------------------------------------------
#: Every complete escape sequence, cursor movements included (same grammar as above).
_ANY_ESC = re.compile(
    rb"\x1b(?:"
    rb"\[[0-?]*[ -/]*[@-~]"
    rb"|\][^\x07\x1b]*(?:\x07|\x1b\\|(?=\x1b))"
    rb"|[PX^_][^\x1b]*(?:\x1b\\|(?=\x1b))"
    rb"|(?![\[\]PX^_])[ -/]*[0-~]"
    rb")"
)
#: Every sequence, line moves captured (what :func:`split_text` splits on).
_SPLIT = re.compile(rb"(\x1b\[[0-?]*[ -/]*[HfABEFd])|" + _ESC_SEQ.pattern)
#: Invisible characters a terminal draws as nothing (zero-width space, non-joiner, joiner, word joiner, BOM):
#: taken out of the text like a control, so one inside a key does not split it.
_ZERO_WIDTH = re.compile(rb"\xe2\x80[\x8b-\x8d]|\xe2\x81\xa0|\xef\xbb\xbf")
#: A sequence or a deleted control byte: what :func:`text_runs` steps over (and invisible characters, when any).
_ESC_OR_CTRL = re.compile(_ANY_ESC.pattern + rb"|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]+|\x1b")
_ESC_CTRL_OR_INVISIBLE = re.compile(_ESC_OR_CTRL.pattern + rb"|" + _ZERO_WIDTH.pattern)
#: An escape sequence that is not finished at the end of the data (OSC/DCS strings included).
_UNFINISHED = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[PX^_][^\x1b]*|[ -/]*)\Z")
#: An unfinished sequence longer than this is given up on (its bytes count as finished).
MAX_UNFINISHED = 65536


def unfinished_escape(data: bytes) -> int:
    """Index where an escape sequence that ``data`` does not finish begins (``len(data)`` if none)."""
    last = data.rfind(b"\x1b")
    if last == -1 or len(data) - last > MAX_UNFINISHED:
        return len(data)
    if _ANY_ESC.match(data, last) is not None or _UNFINISHED.match(data, last) is None:
        return len(data)
    # An OSC/DCS string just before it is only finished by this ESC (ST split, or cut short): keep them together.
    prev = data.rfind(b"\x1b", 0, last)
    if prev != -1 and _ANY_ESC.match(data, prev, last) is None and _UNFINISHED.match(data, prev, last) is not None:
        return prev
    return last


def sequence_end(data: bytes, i: int) -> int:
    """End of the escape sequence at ``data[i]`` (an ESC); ``i + 1`` when none completes there."""
    m = _ANY_ESC.match(data, i)
    return m.end() if m is not None else i + 1


def split_text(data: bytes) -> tuple[bytes, list[int]]:
    """The text of ``data`` (complete sequences only, see :func:`unfinished_escape`) and its line moves.

    Each line move is given as the index in the text before which it was.
    """
    if b"\x1b" not in data:
        return _visible(data.translate(None, _CTRL_BYTES)), []
    stripped = _ESC_SEQ.sub(b"", data)  # everything but line moves (a sequence never holds another)
    if b"\x1b[" not in stripped:
        return _visible(stripped.translate(None, _CTRL_BYTES)), []
    parts = _SPLIT.split(data)  # text, move-or-None, text, ...
    texts = [_visible(part.translate(None, _CTRL_BYTES)) for part in parts[0::2]]
    moves: list[int] = []
    at = 0
    for text, move in zip(texts, parts[1::2]):
        at += len(text)
        if move is not None:
            moves.append(at)
    return b"".join(texts), moves


def _visible(text: bytes) -> bytes:
    """``text`` without invisible characters (cheap when there are none: ASCII text is checked at once)."""
    if text.isascii() or _ZERO_WIDTH.search(text) is None:
        return text
    return _ZERO_WIDTH.sub(b"", text)


def project(data: bytes) -> bytes:
    """The matching text of ``data``: :func:`split_text` without the line moves."""
    return split_text(data)[0]


def with_newlines(text: bytes, moves: list[int]) -> bytes:
    """``text`` with a newline where each line move was."""
    if not moves:
        return text
    out = bytearray()
    prev = 0
    for at in moves:
        out += text[prev:at]
        out += b"\n"
        prev = at
    out += text[prev:]
    return bytes(out)


def text_runs(data: bytes) -> list[tuple[int, int, int]]:
    """``(text_start, raw_start, length)`` of each piece of :func:`project`'s text, in order."""
    runs: list[tuple[int, int, int]] = []
    text = raw = 0
    steps = _ESC_OR_CTRL if data.isascii() or _ZERO_WIDTH.search(data) is None else _ESC_CTRL_OR_INVISIBLE
    for m in steps.finditer(data):
        if m.start() > raw:
            runs.append((text, raw, m.start() - raw))
            text += m.start() - raw
        raw = m.end()
    if raw < len(data):
        runs.append((text, raw, len(data) - raw))
    return runs


class LineFolder:
    """The last stage of the clean view: ``\\r\\n`` and lone ``\\r`` become ``\\n``, UTF-8 decoded.

    Carries a pending ``\\r`` (it may be half of ``\\r\\n``) and the incremental
    decoder (``errors="replace"``) between chunks.
    """

    def __init__(self) -> None:
        self._cr_pending = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(self._fold(data))

    def feed_utf8(self, data: bytes) -> bytes:
        """Like :meth:`feed` but returns valid UTF-8 bytes (skips decoding pure ASCII)."""
        folded = self._fold(data)
        pending = self._decoder.getstate()[0]
        if folded.isascii() and not pending:
            return folded
        text = self._decoder.decode(folded)
        if "\ufffd" in text:
            return text.encode("utf-8")
        # Valid UTF-8: the output is the input minus the bytes the decoder now holds.
        held = len(self._decoder.getstate()[0])
        whole = pending + folded
        return whole[: len(whole) - held] if held else whole

    def finish(self) -> str:
        """End of stream: release the pending newline and undecodable bytes."""
        tail = b"\n" if self._cr_pending else b""
        self._cr_pending = False
        return self._decoder.decode(tail, final=True)

    def _fold(self, data: bytes) -> bytes:
        if self._cr_pending:
            data = b"\r" + data
            self._cr_pending = False
        if b"\r" in data:
            if data.endswith(b"\r"):
                data = data.rstrip(b"\r")
                self._cr_pending = True
            # A terminal's output ends its lines with \r\n: when every \r is one (or a run of them before a
            # \n), deleting them is the fold, and one pass of bytes.translate (replace() works match by
            # match: a match every line made it the largest cost of a flood's clean view).
            if _LONE_CR.search(data) is None:
                return data.translate(None, b"\r")
            data = _CR.sub(b"\n", data)
        return data


class CleanTextFilter:
    """Streaming bytes → clean text converter (escape sequences split across chunks)."""

    def __init__(self) -> None:
        self._carry = b""  # an unfinished escape sequence
        self._fold = LineFolder()

    def feed(self, data: bytes) -> str:
        """Clean the next chunk; returns the text that is final so far."""
        return self._fold.feed(self._clean_bytes(data))

    def feed_utf8(self, data: bytes) -> bytes:
        """Like :meth:`feed` but returns valid UTF-8 bytes."""
        return self._fold.feed_utf8(self._clean_bytes(data))

    def finish(self) -> str:
        """End of stream: release the pending newline and undecodable bytes."""
        self._carry = b""
        return self._fold.finish()

    def _clean_bytes(self, data: bytes) -> bytes:
        if self._carry:
            data = self._carry + data
        cut = unfinished_escape(data)
        self._carry = data[cut:]
        return with_newlines(*split_text(data[:cut]))
