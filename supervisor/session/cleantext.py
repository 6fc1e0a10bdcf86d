"""Clean text from a terminal byte stream: escape sequences and controls removed, CRs folded.

:class:`CleanTextFilter` carries an unfinished escape sequence, an open
OSC/DCS string, a pending ``\\r`` and the incremental UTF-8 decoder between
chunks, so a chunk boundary never changes the result.

:func:`project` and :func:`text_runs` give the *matching text* the secret
redactor searches: every escape sequence removed, cursor movements included
(a key drawn in two pieces with a cursor move between them is one word on the
screen), and every control but TAB, LF and CR deleted.  :func:`text_runs`
also says which raw bytes each piece of that text came from, so a secret found
in the text can be cut out of the raw bytes.
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
# An escape sequence at the end of a chunk that is not finished yet.
_ESC_INCOMPLETE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|[ -/]*)\Z")
_STRING_START = re.compile(rb"\x1b[\]PX^_]")
_CR = re.compile(rb"\r+\n?")
# C0 controls except TAB, LF, CR; plus DEL.  Deleted with bytes.translate.
_CTRL_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D)) + b"\x7f"
_MAX_ESC_CARRY = 64

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
#: A sequence or a deleted control byte: what :func:`text_runs` steps over.
_ESC_OR_CTRL = re.compile(_ANY_ESC.pattern + rb"|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]+|\x1b")
#: An escape sequence that is not finished at the end of the data (OSC/DCS strings included).
_UNFINISHED = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[PX^_][^\x1b]*|[ -/]*)\Z")
#: An unfinished sequence longer than this is given up on (its bytes count as finished).
MAX_UNFINISHED = 65536


def unfinished_escape(data: bytes) -> int:
    """Index where an escape sequence that ``data`` does not finish begins (``len(data)`` if none)."""
    last = data.rfind(b"\x1b")
    if last == -1 or len(data) - last > MAX_UNFINISHED:
        return len(data)
    if _ANY_ESC.match(data, last) is None and _UNFINISHED.match(data, last) is not None:
        return last
    return len(data)


def sequence_end(data: bytes, i: int) -> int:
    """End of the escape sequence at ``data[i]`` (an ESC); ``i + 1`` when none completes there."""
    m = _ANY_ESC.match(data, i)
    return m.end() if m is not None else i + 1


def project(data: bytes) -> bytes:
    """The matching text of ``data`` (complete sequences only; see :func:`unfinished_escape`)."""
    if b"\x1b" in data:
        data = _ANY_ESC.sub(b"", data)
    return data.translate(None, _CTRL_BYTES)


def text_runs(data: bytes) -> list[tuple[int, int, int]]:
    """``(text_start, raw_start, length)`` of each piece of :func:`project`'s text, in order."""
    runs: list[tuple[int, int, int]] = []
    text = raw = 0
    for m in _ESC_OR_CTRL.finditer(data):
        if m.start() > raw:
            runs.append((text, raw, m.start() - raw))
            text += m.start() - raw
        raw = m.end()
    if raw < len(data):
        runs.append((text, raw, len(data) - raw))
    return runs


class CleanTextFilter:
    """Streaming bytes → clean text converter (escape sequences split across chunks).

    State carried between chunks: an unfinished escape sequence (at most a few
    bytes), whether we are inside an OSC/DCS string whose terminator has not
    arrived yet, a pending ``\\r`` (it may be half of ``\\r\\n``) and the
    incremental UTF-8 decoder.
    """

    def __init__(self) -> None:
        self._carry = b""
        self._in_string = False  # inside OSC/DCS/SOS/PM/APC payload
        self._string_bel = False  # BEL terminates the current string (OSC)
        self._cr_pending = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        """Clean the next chunk; returns the text that is final so far."""
        return self._decoder.decode(self._clean_bytes(data))

    def feed_utf8(self, data: bytes) -> bytes:
        """Like :meth:`feed` but returns valid UTF-8 bytes (skips decoding pure ASCII)."""
        cleaned = self._clean_bytes(data)
        pending = self._decoder.getstate()[0]
        if cleaned.isascii() and not pending:
            return cleaned
        text = self._decoder.decode(cleaned)
        if "\ufffd" in text:
            return text.encode("utf-8")
        # Valid UTF-8: the output is the input minus the bytes the decoder now holds.
        held = len(self._decoder.getstate()[0])
        whole = pending + cleaned
        return whole[: len(whole) - held] if held else whole

    def finish(self) -> str:
        """End of stream: release the pending newline and undecodable bytes."""
        tail = b"\n" if self._cr_pending else b""
        self._cr_pending = False
        self._carry = b""
        self._in_string = False
        return self._decoder.decode(tail, final=True)

    def _clean_bytes(self, data: bytes) -> bytes:
        if self._carry:
            data = self._carry + data
            self._carry = b""
        if self._in_string:
            data = self._skip_string(data)
            if not data:
                return b""
        if b"\x1b" in data:
            data = self._strip_escapes(data)
        data = data.translate(None, _CTRL_BYTES)
        if self._cr_pending:
            data = b"\r" + data
            self._cr_pending = False
        if b"\r" in data:
            if data.endswith(b"\r"):
                data = data.rstrip(b"\r")
                self._cr_pending = True
            data = data.replace(b"\r\n", b"\n")
            if b"\r" in data:
                data = _CR.sub(b"\n", data)
        return data

    def _skip_string(self, data: bytes) -> bytes:
        """Drop the rest of an OSC/DCS payload; return what follows its terminator."""
        esc = data.find(b"\x1b")
        bel = data.find(b"\x07") if self._string_bel else -1
        if bel != -1 and (esc == -1 or bel < esc):
            self._in_string = False
            return data[bel + 1:]
        if esc == -1:
            return b""
        if esc == len(data) - 1:  # maybe the first half of ST
            self._carry = b"\x1b"
            return b""
        self._in_string = False
        if data[esc + 1] == 0x5C:  # ST = ESC \
            return data[esc + 2:]
        return data[esc:]  # ESC cancels the string and starts a new sequence

    def _strip_escapes(self, data: bytes) -> bytes:
        last = data.rfind(b"\x1b")
        if _ESC_SEQ.match(data, last) is None:
            tail = data[last:]
            if _STRING_START.match(tail):
                # An OSC/DCS string whose terminator has not arrived yet.
                self._enter_string(tail)
                data = data[:last]
            elif tail == b"\x1b" and self._unterminated_string_before(data, last):
                # "ESC ] ... ESC" + "\\": the string terminator ST is split.
                prev = data.rfind(b"\x1b", 0, last)
                self._enter_string(data[prev:])
                self._carry = tail
                data = data[:prev]
            elif len(tail) <= _MAX_ESC_CARRY and _ESC_INCOMPLETE.match(tail):
                self._carry = tail
                data = data[:last]
        data = _ESC_SEQ.sub(b"", data)
        if b"\x1b[" in data:  # only cursor movements are left
            data = _CSI_MOVE.sub(b"\n", data)
        return data

    def _enter_string(self, start: bytes) -> None:
        self._in_string = True
        self._string_bel = start[1] == 0x5D  # OSC may also end with BEL

    @staticmethod
    def _unterminated_string_before(data: bytes, last: int) -> bool:
        prev = data.rfind(b"\x1b", 0, last)
        return (
            prev != -1
            and _STRING_START.match(data, prev) is not None
            and _ESC_SEQ.match(data, prev, last) is None
        )
