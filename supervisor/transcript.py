"""Per-session transcripts: redacted raw bytes plus a clean-text view.

The daemon reads raw bytes from an agent's PTY master (up to 64 KiB per
``os.read``) and hands every chunk to :meth:`Transcript.write`.  Two files are
kept per session, both opened ``O_APPEND`` and written with ``os.write`` (no
Python buffering, so a crash of the daemon never loses accepted bytes and a
reader sees them at once):

``SESSION-ID.log``
    The raw byte stream after secret redaction.  When nothing needs redacting
    it is byte-for-byte what the agent wrote.
``SESSION-ID.txt``
    A clean text view for ``agentd logs`` and token counting: ANSI escape
    sequences (CSI, OSC, DCS/SOS/PM/APC, charset designations, other ``ESC x``)
    and other control characters removed, ``\\r\\n`` and lone ``\\r`` turned
    into ``\\n``, cursor movements to another line turned into ``\\n``, UTF-8
    decoded incrementally with ``errors="replace"``.

Redaction (:class:`Redactor`) happens before either file is written, and
once more on the clean text (a secret printed with colour codes inside it
only becomes whole once they are stripped; the raw ``.log`` keeps such a
split secret as the agent wrote it, interleaved with escape sequences).  A
secret may be split across two ``write()`` calls, so the redactor holds back a
bounded tail (at most :data:`MAX_HOLD` bytes) *only* when that tail could be
the start of a secret; the tail is released by the next ``write()`` or by
``flush()``.  Callers that want a quiet PTY's last bytes (a prompt) on disk
promptly should call ``flush()`` when a read tick produced no new data.

Everything on the hot path works on whole chunks with compiled bytes regexes
and ``bytes.translate``; there are no per-byte Python loops.
"""

from __future__ import annotations

import codecs
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from supervisor.tokens import estimate_tokens_bytes

__all__ = [
    "MAX_HOLD",
    "REDACTED",
    "CleanTextFilter",
    "Redactor",
    "Transcript",
    "follow_clean",
    "read_clean_tail",
    "redact_text",
]

#: Replacement written in place of every secret.
REDACTED = b"[REDACTED]"
#: Upper bound of bytes the redactor holds back between two writes.
MAX_HOLD = 256
#: Environment values shorter than this are not treated as secrets.
MIN_ENV_SECRET_LEN = 8
#: Suffixes (and exact names) of environment variables whose values are secrets.
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
SECRET_ENV_NAMES = frozenset({"API_KEY"})

# --------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------

# Each pattern is written so that the regex engine can skip quickly to a
# literal first byte; word boundaries are expressed as look-behinds placed
# *after* the first literal so that the literal-prefix scan still applies.
_KEY_CHARS = rb"[A-Za-z0-9_\-]"
_SK = rb"sk-(?<![A-Za-z0-9_\-]sk-)" + _KEY_CHARS + rb"{20,}"
_GH = rb"(?:gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{20,}|github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{20,})"
_AWS = rb"(?:AKIA|ASIA)(?<![A-Za-z0-9](?:AKIA|ASIA))[0-9A-Z]{16}(?![0-9A-Z])"
_BEARER = rb"(?P<bearer>[Bb]earer|BEARER)(?<![A-Za-z0-9_][Bb]earer)(?<![A-Za-z0-9_]BEARER)(?P<sp>[ \t]+)[A-Za-z0-9._~+/=\-]{8,}"

# "Could this tail be the start of a secret?" patterns, anchored at the end of
# a short tail.  Each matches every proper prefix of its secret pattern and any
# complete match that could still grow with the next chunk.
_SK_PARTIAL = rb"(?<![A-Za-z0-9_\-])(?:s|sk|sk-[A-Za-z0-9_\-]*)\Z"
_GH_PARTIAL = (
    rb"(?<![A-Za-z0-9_])(?:g|gh|gh[pousr]|gh[pousr]_[A-Za-z0-9]*"
    rb"|gi|git|gith|githu|github|github_|github_p|github_pa|github_pat|github_pat_[A-Za-z0-9_]*)\Z"
)
_AWS_PARTIAL = rb"(?<![A-Za-z0-9])(?:A|AK|AKI|AS|ASI|(?:AKIA|ASIA)[0-9A-Z]{0,16})\Z"
_BEARER_PARTIAL = (
    rb"(?<![A-Za-z0-9_])(?:[Bb]|[Bb]e|[Bb]ea|[Bb]ear|[Bb]eare|BE|BEA|BEAR|BEARE"
    rb"|(?:[Bb]earer|BEARER)(?:[ \t]+[A-Za-z0-9._~+/=\-]*)?)\Z"
)

# The bytes a partial match can consist of: the key characters of every
# pattern, and for a "Bearer" token also the blanks and token punctuation.
_PARTIAL_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_PARTIAL_CHARS_BEARER = _PARTIAL_CHARS + b" \t._~+/="


def _is_secret_env_name(name: str) -> bool:
    upper = name.upper()
    return upper in SECRET_ENV_NAMES or upper.endswith(SECRET_ENV_SUFFIXES)


class Redactor:
    """Streaming secret redactor for a PTY byte stream.

    ``env`` is the unit's environment; the exact values of variables named
    ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD`` or ``API_KEY``
    (values of at least 8 characters) are redacted in addition to the built-in
    patterns (``sk-…``, ``Bearer …``, GitHub ``ghp_``/``gho_``/``github_pat_``
    tokens, AWS ``AKIA…`` key ids).

    Use :meth:`feed` for stream chunks, :meth:`flush` to release the held tail,
    :meth:`redact` / :meth:`redact_text` for complete, self-contained data.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, max_hold: int = MAX_HOLD) -> None:
        self.max_hold = max_hold
        values = sorted(
            {
                v.encode("utf-8", "surrogateescape")
                for k, v in (env or {}).items()
                if _is_secret_env_name(k) and len(v) >= MIN_ENV_SECRET_LEN
            },
            key=len,
            reverse=True,
        )
        self._env_values: tuple[bytes, ...] = tuple(values)
        alternatives = [_SK, _GH, _AWS, _BEARER]
        if values:
            alternatives.insert(0, b"(?:" + b"|".join(re.escape(v) for v in values) + b")")
        self._full = re.compile(b"|".join(alternatives))
        self._partial = re.compile(b"|".join([_SK_PARTIAL, _GH_PARTIAL, _AWS_PARTIAL, _BEARER_PARTIAL]))
        # Cheap pre-checks (literal-prefix searches run at ~1 GB/s): if none
        # hits, no pattern can match and the chunk is passed through as is.
        builtin = tuple(re.compile(t).search for t in
                        (rb"sk-", rb"gh[pousr]_", rb"github_pat_", rb"A[KS]IA", rb"earer", rb"EARER"))
        # A value containing a built-in trigger (an sk-... key) needs no trigger of its own.
        own = [re.compile(re.escape(v)).search for v in values if not any(b(v) for b in builtin)]
        self._triggers = builtin + tuple(own)
        self._carry = b""

    # -- complete data ---------------------------------------------------
    def redact(self, data: bytes) -> bytes:
        """Redact every secret in ``data`` (treated as complete, nothing held)."""
        if not self._may_contain_secret(data):
            return data
        return self._full.sub(self._replace, data)

    def redact_text(self, text: str) -> str:
        """Redact a complete string (log lines, structlog event values)."""
        data = text.encode("utf-8", "surrogateescape")
        out = self.redact(data)
        return text if out is data else out.decode("utf-8", "surrogateescape")

    def structlog_processor(self, logger: object, method_name: str, event_dict: dict) -> dict:
        """A structlog processor redacting every string value of the event."""
        for key, value in event_dict.items():
            if isinstance(value, str):
                event_dict[key] = self.redact_text(value)
        return event_dict

    # -- streams ---------------------------------------------------------
    @property
    def pending(self) -> int:
        """Number of bytes currently held back."""
        return len(self._carry)

    def feed(self, data: bytes) -> bytes:
        """Redact the next chunk of a stream; may hold back up to ``max_hold`` bytes."""
        buf = self._carry + data if self._carry else bytes(data)
        n = len(buf)
        cut = self._hold_point(buf)
        self._carry = buf[cut:]
        return self.redact(buf[:cut]) if cut < n else self.redact(buf)

    def flush(self) -> bytes:
        """Release (redacted) whatever is held back."""
        buf, self._carry = self._carry, b""
        return self.redact(buf)

    # -- internals -------------------------------------------------------
    def _may_contain_secret(self, data: bytes) -> bool:
        for search in self._triggers:
            if search(data) is not None:
                return True
        return False

    @staticmethod
    def _replace(match: re.Match[bytes]) -> bytes:
        if match.group("bearer") is not None:
            return match.group("bearer") + match.group("sp") + REDACTED
        return REDACTED

    def _hold_point(self, buf: bytes) -> int:
        """Index from which ``buf`` must be held back (``len(buf)`` if none)."""
        n = len(buf)
        lo = max(0, n - self.max_hold)
        cut = n
        # Every partial match ends at the end of ``buf`` and consists only of
        # token bytes (plus blanks after a "Bearer"), so it starts inside the
        # trailing run of such bytes: search only there (usually nothing, as
        # output lines end with a newline).  Same leftmost match as searching
        # from ``lo``; the look-behinds still see the byte before the run.
        tail = buf[lo:]
        chars = _PARTIAL_CHARS_BEARER if (b"earer" in tail or b"EARER" in tail) else _PARTIAL_CHARS
        start = lo + len(tail.rstrip(chars))
        if start < n:
            m = self._partial.search(buf, start)
            if m is not None:
                cut = m.start()
        for value in self._env_values:
            cut = min(cut, _prefix_suffix_start(buf, value, lo))
        if cut < n:
            # A complete secret straddling the cut would be split in two: hold it whole.
            window = max(0, cut - self.max_hold)
            if self._may_contain_secret(buf[window:]):
                for full in self._full.finditer(buf, window, n):
                    if full.start() < cut < full.end():
                        cut = max(full.start(), lo)
                        break
        return cut


def _prefix_suffix_start(buf: bytes, value: bytes, lo: int) -> int:
    """Start of the longest suffix of ``buf[lo:]`` that is a proper prefix of ``value``."""
    n = len(buf)
    longest = min(len(value) - 1, n - lo)
    first = value[:1]
    # Only positions holding the first byte of the value can start a prefix.
    pos = buf.find(first, n - longest) if longest > 0 else -1
    while pos != -1:
        if value.startswith(buf[pos:]):
            return pos
        pos = buf.find(first, pos + 1)
    return n


_default_redactor: Redactor | None = None


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """Redact the built-in secret patterns (and ``env`` secret values) in ``text``."""
    global _default_redactor
    if env:
        return Redactor(env).redact_text(text)
    if _default_redactor is None:
        _default_redactor = Redactor()
    return _default_redactor.redact_text(text)


# --------------------------------------------------------------------------
# Clean text
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Transcript files
# --------------------------------------------------------------------------

_SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_HIGH_BYTES = bytes(range(0x80, 0x100))
_LEAD_BYTES = bytes(range(0xC0, 0x100))
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _decode_tail(raw: bytes) -> str:
    """Decode bytes read from the middle of a UTF-8 file (skip a cut first char)."""
    start = 0
    while start < len(raw) and start < 3 and (raw[start] & 0xC0) == 0x80:
        start += 1
    return raw[start:].decode("utf-8", errors="replace")


class Transcript:
    """The transcript of one agent session: ``SESSION-ID.log`` and ``SESSION-ID.txt``.

    ``directory`` is created (mode 0700) if missing; files are created 0600.
    ``env`` is the unit's environment, used for redaction (see :class:`Redactor`).
    """

    def __init__(self, directory: Path, session_id: str, env: Mapping[str, str] | None = None) -> None:
        if not _SESSION_ID_RE.fullmatch(session_id):
            raise ValueError(f"invalid session id {session_id!r}: use letters, digits, '_', '-', '.'")
        self.directory = Path(directory)
        self.session_id = session_id
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self.log_path = self.directory / f"{session_id}.log"
        self.text_path = self.directory / f"{session_id}.txt"
        self._redactor = Redactor(env)
        # Second pass over the clean text: a secret the agent printed with escape
        # sequences inside it (syntax highlighting) only becomes whole once they
        # are stripped.
        self._text_redactor = Redactor(env)
        self._clean = CleanTextFilter()
        self._log_fd: int | None = os.open(self.log_path, _OPEN_FLAGS, 0o600)
        try:
            self._txt_fd: int | None = os.open(self.text_path, _OPEN_FLAGS, 0o600)
        except BaseException:
            os.close(self._log_fd)
            raise
        self._raw_bytes = 0
        self._ascii_chars = 0
        self._other_chars = 0

    # -- writing ---------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Append one chunk of PTY output (redacted) to both files."""
        if self._log_fd is None:
            raise ValueError("transcript is closed")
        if data:
            self._emit(self._redactor.feed(data))

    def flush(self) -> None:
        """Write out the bytes the redactor was holding back (a quiet PTY's prompt)."""
        if self._log_fd is not None:
            self._emit(self._redactor.flush())
            self._emit_text(self._text_redactor.flush())

    def close(self) -> None:
        """Flush everything, finish the clean view and close both files (idempotent)."""
        if self._log_fd is None:
            return
        try:
            self._emit(self._redactor.flush())
            self._emit_text(self._text_redactor.feed(self._clean.finish().encode("utf-8")))
            self._emit_text(self._text_redactor.flush())
        finally:
            log_fd, txt_fd = self._log_fd, self._txt_fd
            self._log_fd = self._txt_fd = None
            os.close(log_fd)
            if txt_fd is not None:
                os.close(txt_fd)

    @property
    def closed(self) -> bool:
        return self._log_fd is None

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        assert self._log_fd is not None
        _write_all(self._log_fd, data)
        self._raw_bytes += len(data)
        self._emit_text(self._text_redactor.feed(self._clean.feed_utf8(data)))

    def _emit_text(self, encoded: bytes) -> None:
        """Append valid UTF-8 ``encoded`` to the ``.txt`` file and count its characters."""
        if not encoded:
            return
        if encoded.isascii():
            self._ascii_chars += len(encoded)
        else:
            # Valid UTF-8: one lead byte per non-ASCII character.
            self._ascii_chars += len(encoded.translate(None, _HIGH_BYTES))
            self._other_chars += len(encoded) - len(encoded.translate(None, _LEAD_BYTES))
        assert self._txt_fd is not None
        _write_all(self._txt_fd, encoded)

    # -- figures ---------------------------------------------------------
    @property
    def raw_bytes(self) -> int:
        """Bytes written to the ``.log`` file by this writer."""
        return self._raw_bytes

    @property
    def clean_chars(self) -> int:
        """Characters written to the ``.txt`` file by this writer."""
        return self._ascii_chars + self._other_chars

    @property
    def estimated_tokens(self) -> int:
        """Token estimate of the clean text (see :mod:`supervisor.tokens`)."""
        return estimate_tokens_bytes(self._ascii_chars, self._other_chars)

    def tail(self, n_bytes: int) -> str:
        """The last ``n_bytes`` (at most) of the clean text, read from the file."""
        return read_tail(self.text_path, n_bytes)


def read_tail(path: Path, n_bytes: int) -> str:
    """The last ``n_bytes`` of a UTF-8 file as text (a character cut at the start is skipped)."""
    if n_bytes <= 0:
        return ""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - n_bytes)
        f.seek(start)
        raw = f.read(size - start)
    return _decode_tail(raw) if start else raw.decode("utf-8", errors="replace")


def _clean_path(path: Path) -> Path:
    path = Path(path)
    return path.with_suffix(".txt") if path.suffix == ".log" else path


def _tail_lines(f: BinaryIO, end: int, lines: int) -> list[str]:
    """The last ``lines`` lines of the first ``end`` bytes of the open file ``f``."""
    if lines <= 0 or end <= 0:
        return []
    block = 8192
    start = end
    data = b""
    # Read backwards until there are lines+1 newlines (one may end the last line).
    while start > 0 and data.count(b"\n") <= lines:
        step = min(block, start)
        start -= step
        f.seek(start)
        data = f.read(step) + data
        block *= 2
    text = _decode_tail(data) if start else data.decode("utf-8", errors="replace")
    result = text.split("\n")
    if result[-1] == "":
        result.pop()
    return result[-lines:]


def read_clean_tail(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a clean transcript (``.txt``; a ``.log`` path is mapped to it).

    A final line without a newline (a prompt) counts as a line.
    """
    with open(_clean_path(path), "rb") as f:
        return _tail_lines(f, f.seek(0, os.SEEK_END), lines)


def follow_clean(
    path: Path,
    *,
    should_stop: Callable[[], bool],
    lines: int = 0,
    poll_interval: float = 0.2,
) -> Iterator[str]:
    """Yield a clean transcript's text as it grows (``agentd logs UNIT -n N -f``).

    First yields the last ``lines`` lines (newline-joined; a newline follows the
    last one unless it is an unterminated prompt), then every piece of text
    appended after that point, decoded incrementally so multi-byte characters
    are never cut and nothing between the two phases is missed.  Waits for the
    file to appear.  Checks ``should_stop()`` whenever no new data is there and
    returns once it is true.  A replaced or truncated file is re-read from its
    beginning.
    """
    path = _clean_path(path)
    while not path.exists():
        if should_stop():
            return
        time.sleep(poll_interval)
    f = open(path, "rb")
    try:
        ident = os.fstat(f.fileno())
        offset = ident.st_size
        if lines > 0 and offset > 0:
            head = "\n".join(_tail_lines(f, offset, lines))
            f.seek(offset - 1)
            if f.read(1) == b"\n":
                head += "\n"
            yield head
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        f.seek(offset)
        while True:
            chunk = f.read(1 << 16)
            if chunk:
                offset += len(chunk)
                text = decoder.decode(chunk)
                if text:
                    yield text
                continue
            if should_stop():
                return
            time.sleep(poll_interval)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            if (st.st_ino, st.st_dev) != (ident.st_ino, ident.st_dev) or st.st_size < offset:
                f.close()
                f = open(path, "rb")
                ident = os.fstat(f.fileno())
                offset = 0
                decoder.reset()
    finally:
        f.close()
