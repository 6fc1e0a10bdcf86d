"""The fake agent's terminal: unbuffered output, a raw-ish tty, and its own line editor (bracketed paste, Ctrl-C)."""

from __future__ import annotations

import os
import select
import signal
import termios
import threading
import time

# Re-entrant: the line editor holds it while it updates the line and echoes.
out_lock = threading.RLock()


def out(text: str | bytes) -> None:
    """Write to fd 1 at once (all of it); drop output if the terminal is gone."""
    data = text.encode() if isinstance(text, str) else text
    view = memoryview(data)
    with out_lock:
        try:
            while view:
                view = view[os.write(1, view):]
        except OSError:  # EIO/EPIPE: terminal hung up; an agent would not notice either
            pass


# ---------------------------------------------------------------- terminal and line editing

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"


class RawTerminal:
    """Puts a tty stdin into a raw-ish input mode and restores it (idempotent)."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.saved: list | None = None  # type: ignore[type-arg]
        #: Whether the terminal echoed input before we took over (we echo then).
        self.echo = False

    def enter(self) -> None:
        if not os.isatty(self.fd):
            return
        try:
            saved = termios.tcgetattr(self.fd)
        except termios.error:
            return
        self.saved = saved
        self.echo = bool(saved[3] & termios.ECHO)
        mode = [list(x) if isinstance(x, list) else x for x in saved]
        mode[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.IXON)
        mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
        mode[6][termios.VMIN] = 1
        mode[6][termios.VTIME] = 0
        termios.tcsetattr(self.fd, termios.TCSANOW, mode)

    def restore(self) -> None:
        saved, self.saved = self.saved, None
        if saved is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSANOW, saved)
            except termios.error:  # the terminal is gone
                pass


stdin_terminal = RawTerminal(0)


def exit_now(code: int) -> None:
    """Restore the terminal mode, then exit at once (no cleanup handlers)."""
    stdin_terminal.restore()
    os._exit(code)


def die_by_signal(signum: int, frame: object) -> None:
    """Default-disposition signals: restore the terminal, then die by the same signal."""
    stdin_terminal.restore()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class LineEditor:
    """Reads messages from a raw terminal (or a pipe), doing its own line editing.

    See the module docstring for the keys.  ``read_message`` returns one
    submitted message, or None for Ctrl-D on an empty line or end of input.
    """

    def __init__(self, fd: int, prompt: str, echo: bool) -> None:
        self.fd = fd
        self.prompt = prompt
        self.echo = echo
        self.pending = bytearray()  # read but not yet interpreted
        self.line = bytearray()  # the message being typed
        self.eof = False
        self.at_prompt = False  # the prompt is shown and we wait for input
        self._pasting = False
        self._skip_lf = False

    # -- output around the line ------------------------------------------------
    def show_prompt(self) -> None:
        with out_lock:
            out(self.prompt)
            self.at_prompt = True

    def print_above(self, text: str) -> None:
        """Print ``text`` (whole lines) without corrupting the line being typed."""
        with out_lock:
            if not self.at_prompt:
                out(text)
                return
            shown = self.line.decode(errors="replace") if self.echo else ""
            out("\r\x1b[K" + text + self.prompt + shown)

    def _echo(self, data: bytes | str) -> None:
        if self.echo:
            out(data)

    # -- input ----------------------------------------------------------------
    def _fill(self, timeout: float | None = None) -> bool:
        """Read what is available (waiting up to ``timeout``); False at end of input or timeout."""
        if self.eof:
            return False
        if timeout is not None:
            ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
            if not ready:
                return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the terminal hung up
            data = b""
        if not data:
            self.eof = True
            return False
        self.pending += data
        return True

    def read_message(self) -> str | None:
        """The next submitted message (exact text), or None (Ctrl-D / end of input)."""
        while True:
            result = self._interpret()
            if result is not _MORE:
                return result  # type: ignore[return-value]
            if not self._fill():
                with out_lock:
                    self.at_prompt = False
                    if self.line:
                        text = self.line.decode(errors="replace")
                        self.line.clear()
                        return text
                return None

    def busy_wait(self, seconds: float) -> bool:
        """Be busy for ``seconds``; True when Ctrl-C interrupted it (input typed meanwhile is kept)."""
        deadline = time.monotonic() + seconds
        while True:
            if 3 in self.pending and not self._pasting:
                del self.pending[: self.pending.index(3) + 1]
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self.eof:
                time.sleep(remaining)
                return False
            self._fill(timeout=remaining)

    def _interpret(self) -> object:
        """Apply pending bytes to the line; a submitted message, None, or ``_MORE``."""
        buf = self.pending
        i = 0
        try:
            while i < len(buf):
                if self._pasting:
                    i, done = self._paste(i)
                    if not done:
                        return _MORE
                    continue
                b = buf[i]
                if self._skip_lf:
                    self._skip_lf = False
                    if b == 0x0A:
                        i += 1
                        continue
                if b == 0x1B:
                    end = _escape_end(buf, i)
                    if end is None:
                        return _MORE
                    if buf[i:end] == PASTE_START:
                        self._pasting = True
                    i = end
                elif b in (0x0D, 0x0A):
                    i += 1
                    self._skip_lf = b == 0x0D
                    return self._submit()
                elif b in (0x7F, 0x08):
                    i += 1
                    self._backspace()
                elif b == 0x15:  # Ctrl-U
                    i += 1
                    with out_lock:
                        self.line.clear()
                        self._echo("\r\x1b[K" + self.prompt)
                elif b == 0x03:  # Ctrl-C at the prompt: drop the line
                    i += 1
                    with out_lock:
                        self.line.clear()
                        out("^C\n" + self.prompt)
                elif b == 0x04:  # Ctrl-D: exit on an empty line
                    i += 1
                    if not self.line:
                        with out_lock:
                            self.at_prompt = False
                        return None
                elif b < 0x20 and b != 0x09:
                    i += 1  # other control characters are ignored
                else:
                    j = i + 1
                    while j < len(buf) and (buf[j] >= 0x20 or buf[j] == 0x09) and buf[j] != 0x7F:
                        j += 1
                    with out_lock:
                        self.line += buf[i:j]
                        self._echo(bytes(buf[i:j]))
                    i = j
            return _MORE
        finally:
            del buf[:i]

    def _paste(self, i: int) -> tuple[int, bool]:
        """Take pasted bytes from ``i`` verbatim; (new index, whether the end marker was seen)."""
        buf = self.pending
        end = buf.find(PASTE_END, i)
        if end < 0:
            # Keep a possible partial end marker for the next read.
            stop = max(i, len(buf) - (len(PASTE_END) - 1))
            chunk, new_i, done = bytes(buf[i:stop]), stop, False
        else:
            chunk, new_i, done = bytes(buf[i:end]), end + len(PASTE_END), True
            self._pasting = False
        with out_lock:
            self.line += chunk
            self._echo(chunk)
        return new_i, done

    def _backspace(self) -> None:
        with out_lock:
            if not self.line:
                return
            # Drop one UTF-8 character (continuation bytes first).
            while self.line and (self.line[-1] & 0xC0) == 0x80:
                self.line.pop()
            if self.line:
                self.line.pop()
            self._echo("\b \b")

    def _submit(self) -> str:
        with out_lock:
            text = self.line.decode(errors="replace")
            self.line.clear()
            self.at_prompt = False
            self._echo("\n")
        return text


_MORE = object()  # "need more input" marker of LineEditor._interpret


def _escape_end(buf: bytearray, i: int) -> int | None:
    """End index of the escape sequence at ``buf[i]`` (ESC), or None when incomplete."""
    if i + 1 >= len(buf):
        return None
    kind = buf[i + 1]
    if kind == 0x5B:  # CSI: parameters, then a final byte 0x40-0x7E
        j = i + 2
        while j < len(buf):
            if 0x40 <= buf[j] <= 0x7E:
                return j + 1
            j += 1
        return None
    if kind == 0x4F:  # SS3 (application cursor keys)
        return i + 3 if i + 2 < len(buf) else None
    return i + 2
