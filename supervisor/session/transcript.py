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

Redaction (:class:`Redactor`) happens once, before either file is written,
and each chunk is parsed once: the redactor hands back the bytes it releases
and their text (with ``[REDACTED]`` in the same places), and the clean view
only folds carriage returns and decodes that text
(:class:`~.cleantext.LineFolder`).  The redactor matches on the text with
escape sequences removed, so a secret
printed with colour codes or cursor moves inside it is cut out of the raw
``.log`` too.  A secret may arrive in pieces, any time apart, so the
redactor holds back a possible secret prefix until its token ends (the next
byte that cannot be part of it, or a size cap), never for a fixed time: a
prompt such as ``fake> `` ends with a blank and is written at once, a key
printed in two pieces a second apart is held until its end and written as
``[REDACTED]``.  :meth:`Transcript.write` returns the bytes it appended to
the ``.log``: exactly what an attached viewer may see.

A write that fails (``ENOSPC`` on a full disk, ``EROFS``, ``EIO``, a file
grown past ``RLIMIT_FSIZE``) never raises out of :meth:`Transcript.write`:
the chunk is still parsed (the redactor, the clean view and the counts move
on, and the redacted bytes are still returned for attached viewers), the
bytes that did not reach the file are counted, and :attr:`Transcript.problem`
names it (``transcript: ENOSPC, 1234 bytes not written``).  Every later
chunk is tried again, so the transcript recovers by itself once space
returns; the problem then says since when it writes again, so the gap stays
visible for the rest of the session.

Everything on the hot path works on whole chunks with compiled bytes regexes
and ``bytes.translate``; there are no per-byte Python loops.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from ..tokens import estimate_tokens_bytes
from .cleantext import LineFolder
from .redact import Redactor

__all__ = ["Transcript", "follow_clean", "read_clean_at", "read_clean_tail", "read_tail", "valid_session_id"]

_SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_HIGH_BYTES = bytes(range(0x80, 0x100))
_LEAD_BYTES = bytes(range(0xC0, 0x100))
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


def _write_some(fd: int, data: bytes) -> tuple[int, OSError | None]:
    """Append ``data``; (bytes not written, the error that stopped it) — never raises OSError."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError as exc:
            return len(view), exc
        view = view[written:]
    return 0, None


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

    def __init__(self, directory: Path, session_id: str, env: Mapping[str, str] | None = None,
                 cols: int | None = None) -> None:
        if not _SESSION_ID_RE.fullmatch(session_id):
            raise ValueError(f"invalid session id {session_id!r}: use letters, digits, '_', '-', '.'")
        self.directory = Path(directory)
        self.session_id = session_id
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self.log_path = self.directory / f"{session_id}.log"
        self.text_path = self.directory / f"{session_id}.txt"
        self._redactor = Redactor(env, cols=cols)  # cols: a full line is one a TUI wrapped (see .unwrap)
        self._fold = LineFolder()
        self._log_fd: int | None = os.open(self.log_path, _OPEN_FLAGS, 0o600)
        try:
            self._txt_fd: int | None = os.open(self.text_path, _OPEN_FLAGS, 0o600)
        except BaseException:
            os.close(self._log_fd)
            raise
        self._raw_bytes = 0
        self._ascii_chars = 0
        self._other_chars = 0
        self.lost_bytes = 0  # bytes (of either file) that could not be written
        self._error: str | None = None  # errno name of the last failed write
        self._failing = False
        self._recovered_at: float | None = None  # wall clock of the first good write after a failure

    # -- writing ---------------------------------------------------------
    def write(self, data: bytes) -> bytes:
        """Append one chunk of PTY output (redacted) to both files; return what the ``.log`` got."""
        if self._log_fd is None:
            raise ValueError("transcript is closed")
        if not data:
            return b""
        out, text = self._redactor.feed_text(data)
        self._emit(out, text)
        return out

    def resize(self, cols: int) -> None:
        """The terminal's new width (the redactor joins a full line to the next: a TUI wrapped it)."""
        self._redactor.cols = cols

    @property
    def pending(self) -> int:
        """Raw bytes held back because they may be the start of a secret."""
        return self._redactor.pending

    def flush(self) -> bytes:
        """End of the stream: write out what the redactor held back (redacted); return it.

        Only for the end of the agent's output (EOF, exit): a held prefix is
        released as if nothing followed, so a secret still being printed would
        be cut in two.
        """
        if self._log_fd is None:
            return b""
        out, text = self._redactor.flush_text()
        self._emit(out, text)
        return out

    def close(self) -> None:
        """Flush everything, finish the clean view and close both files (idempotent)."""
        if self._log_fd is None:
            return
        try:
            self._emit(*self._redactor.flush_text())
            self._emit_text(self._fold.finish().encode("utf-8"))
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

    def _emit(self, data: bytes, text: bytes) -> None:
        """Append released raw bytes to the ``.log`` and their text (from the redactor) to the ``.txt``."""
        if data:
            assert self._log_fd is not None
            self._append(self._log_fd, data)
            self._raw_bytes += len(data)
        if text:
            self._emit_text(self._fold.feed_utf8(text))

    def _append(self, fd: int, data: bytes) -> None:
        """Append to one of the files; a failure is counted and named, never raised."""
        lost, exc = _write_some(fd, data)
        if exc is None:
            if self._failing:
                self._failing, self._recovered_at = False, time.time()
            return
        self.lost_bytes += lost
        self._error = errno.errorcode.get(exc.errno or 0, exc.strerror or type(exc).__name__)
        self._failing, self._recovered_at = True, None

    @property
    def problem(self) -> str | None:
        """Why bytes are missing from the files (None when nothing was lost)."""
        if not self.lost_bytes:
            return None
        text = f"transcript: {self._error}, {self.lost_bytes} bytes not written"
        if self._recovered_at is not None:
            text += time.strftime(" (writing again since %H:%M:%SZ)", time.gmtime(self._recovered_at))
        return text

    @property
    def failing(self) -> bool:
        """True while the last write failed."""
        return self._failing

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
        self._append(self._txt_fd, encoded)

    # -- figures ---------------------------------------------------------
    @property
    def raw_bytes(self) -> int:
        """Bytes released to the ``.log`` file by this writer (those of :attr:`lost_bytes` included)."""
        return self._raw_bytes

    @property
    def clean_chars(self) -> int:
        """Characters of clean text this writer produced (written to the ``.txt``, or lost with a failed write)."""
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


def valid_session_id(session: str) -> bool:
    """Whether ``session`` can name a session's files (letters, digits, '_', '-', '.'; no path)."""
    return _SESSION_ID_RE.fullmatch(session) is not None


def read_clean_at(path: Path, offset: int, lines: int) -> list[str]:
    """``lines`` lines of a clean transcript from byte ``offset`` on (``agentd logs --at``, event search hits).

    An offset inside a line starts there; a character cut at the offset is skipped.
    """
    out = b""
    with open(_clean_path(path), "rb") as f:
        f.seek(offset)
        while out.count(b"\n") < lines:
            chunk = f.read(1 << 16)
            if not chunk:
                break
            out += chunk
    text = _decode_tail(out).split("\n")
    if text and text[-1] == "":
        text.pop()
    return text[:lines]


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
