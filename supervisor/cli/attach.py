"""``agentd attach``, the terminal half: relay a supervised agent's live PTY to this terminal.

The daemon half and the stream protocol are :mod:`supervisor.control.attach`.
Raw mode is always restored; Ctrl-] (0x1d) detaches.  The agent's output
reaches this terminal less OSC 52 (:mod:`supervisor.session.clipguard`): an
agent never sets nor reads the person's clipboard.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import selectors
import signal
import socket
import termios
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..control.attach import (
    CLOSE, CODE_DETACHED, CODE_ERROR, DETACH, DETACH_KEY, DETACH_KEY_NAME, ENDED, INPUT, OUTPUT, REATTACH_WAIT, RESIZE,
    SESSION, SIZE,
)
from ..control.framing import DaemonNotRunning, FrameDecoder, ProtocolError, connect, encode, frame, read_reply
from ..session.clipguard import ClipboardGuard

class AttachError(Exception):
    """Attaching failed before the relay started (the message is for the user)."""


def terminal_size(*fds: int) -> tuple[int, int] | None:
    """(rows, cols) of the first fd that is a terminal with a size (a 0x0 terminal has none)."""
    for fd in fds:
        try:
            size = os.get_terminal_size(fd)
        except OSError:
            continue
        if size.lines > 0 and size.columns > 0:
            return size.lines, size.columns
    return None


NOT_A_TERMINAL = ("stdin is not a terminal: attach relays the keys you type to the agent. To watch without typing: "
                  "agentd attach {unit} --read-only (Ctrl-C leaves); to type a message: agentd send {unit} TEXT; "
                  "to follow the transcript: agentd logs {unit} -f")


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """Raw mode on ``fd`` if it is a terminal; the old mode is always restored."""
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def winch_pipe() -> Iterator[int | None]:
    """A fd that becomes readable on SIGWINCH (None outside the main thread)."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def on_winch(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            os.write(w, b"w")

    try:
        previous = signal.signal(signal.SIGWINCH, on_winch)
    except ValueError:  # not the main thread
        os.close(r)
        os.close(w)
        yield None
        return
    try:
        yield r
    finally:
        signal.signal(signal.SIGWINCH, previous)
        os.close(r)
        os.close(w)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)  # a non-blocking stdout that is full: wait until writable
        except OSError as exc:
            if exc.errno in (errno.EIO, errno.EPIPE):
                return
            raise


def _connect(socket_path: Path, request: dict[str, Any], timeout: float = 30.0) -> tuple[socket.socket, dict[str, Any]]:
    try:
        sock = connect(socket_path, timeout)
    except DaemonNotRunning as exc:
        raise AttachError(str(exc)) from None
    except PermissionError as exc:
        raise AttachError(f"cannot reach {socket_path}: {exc.strerror} (not the daemon's owner?)") from None
    try:
        sock.sendall(encode({"cmd": "attach", "args": request}))
        reply = read_reply(sock)
    except (OSError, ProtocolError, DaemonNotRunning, ValueError) as exc:
        sock.close()
        raise AttachError(f"attach failed: {exc}") from None
    if not reply.get("ok"):
        sock.close()
        raise AttachError(str(reply.get("error", "unknown error")))
    sock.settimeout(None)
    return sock, reply.get("result") or {}


class _Relay:
    """The client's loop: stdin and SIGWINCH to the socket, frames to stdout."""

    def __init__(self, sock: socket.socket, unit: str, read_only: bool, stdin_fd: int, stdout_fd: int) -> None:
        self.sock = sock
        self.unit = unit
        self.read_only = read_only
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.stdin_is_tty = os.isatty(stdin_fd)
        self.watch_stdin = self.stdin_is_tty  # only a terminal's keys are relayed (read-only: none at all)
        self.decoder = FrameDecoder()
        self.guard = ClipboardGuard()  # the agent never sets nor reads this terminal's clipboard (OSC 52)

    def say(self, text: str) -> None:
        _write_all(self.stdout_fd, f"\r\n[agentd] {text}\r\n".encode())

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self.sock.sendall(frame(kind, payload))

    def send_size(self) -> None:
        size = terminal_size(self.stdout_fd, self.stdin_fd)
        if size is not None:
            self.send(RESIZE, SIZE.pack(min(size[0], 65535), min(size[1], 65535)))

    def on_stdin(self, sel: selectors.BaseSelector) -> int | None:
        try:
            data = os.read(self.stdin_fd, 4096)
        except OSError:  # EIO: our terminal hung up
            data = b""
        if not data:
            if self.stdin_is_tty:
                return CODE_DETACHED  # the terminal is gone
            sel.unregister(self.stdin_fd)  # piped input ended: keep watching
            return None
        keys, hit, _ = data.partition(DETACH_KEY)
        if keys and not self.read_only:
            self.send(INPUT, keys)
        if hit:
            with contextlib.suppress(OSError):
                self.send(DETACH)
            self.say(f"detached from {self.unit}")
            return CODE_DETACHED
        return None

    def on_frame(self, kind: bytes, payload: bytes) -> int | None:
        if kind == OUTPUT:
            shown = self.guard.feed(payload)
            if shown:
                _write_all(self.stdout_fd, shown)
            return None
        info = json.loads(payload or b"{}")
        if kind == SESSION:
            self.say(f"attached to {self.unit} session {info.get('session')} (pid {info.get('pid')}); detach with {DETACH_KEY_NAME}")
        elif kind == ENDED:
            _write_all(self.stdout_fd, self.guard.flush())
            self.say(f"session ended: {info.get('reason')}; waiting {REATTACH_WAIT:g}s for the next one")
        elif kind == CLOSE:
            self.say(str(info.get("reason", "closed")))
            return int(info.get("code", CODE_ERROR))
        return None

    def on_socket(self) -> int | None:
        try:
            data = self.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.say("agentd closed the connection")
            return CODE_ERROR
        for kind, payload in self.decoder.feed(data):
            code = self.on_frame(kind, payload)
            if code is not None:
                return code
        return None

    def run(self, winch: int | None) -> int:
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ, "socket")
            if self.watch_stdin:
                sel.register(self.stdin_fd, selectors.EVENT_READ, "stdin")
            if winch is not None:
                sel.register(winch, selectors.EVENT_READ, "winch")
            while True:
                for key, _ in sel.select():
                    if key.data == "winch":
                        with contextlib.suppress(BlockingIOError):
                            os.read(winch, 512)  # type: ignore[arg-type]
                        self.send_size()
                        continue
                    code = self.on_socket() if key.data == "socket" else self.on_stdin(sel)
                    if code is not None:
                        return code


RAW_WARNING = ("warning: --raw shows the agent's output unredacted: secrets it prints "
               "(keys, tokens, passwords) appear on this terminal and in its scrollback")


def run_attach(socket_path: Path, unit: str, read_only: bool, stdin_fd: int = 0, stdout_fd: int = 1,
               raw: bool = False) -> int:
    """The CLI half.  Returns 0 when the person detached, 3 when the unit's session
    ended with no successor, 1 when the daemon dropped or lost the connection.
    Raises :class:`AttachError` when attaching fails (before raw mode).

    The viewer gets the redacted stream unless ``raw`` (the caller warns).  Typing
    needs stdin to be a terminal; ``read_only`` works without one (Ctrl-C
    leaves).  A terminal without a size (0x0) leaves the agent's size as it is."""
    size = terminal_size(stdout_fd, stdin_fd)
    request: dict[str, Any] = {"unit": unit, "read_only": read_only}
    if raw:
        request["raw"] = True  # sent only when asked, so older daemons keep working without it
    if size is not None:
        request["rows"], request["cols"] = size
    sock, info = _connect(socket_path, request)  # the daemon's refusals (no such unit, not running) come first
    if not read_only and not os.isatty(stdin_fd):
        sock.close()
        raise AttachError(NOT_A_TERMINAL.format(unit=unit))
    relay = _Relay(sock, unit, read_only, stdin_fd, stdout_fd)
    mode = ("read-only, " if read_only else "") + ("RAW: unredacted, " if raw else "")
    try:
        with raw_terminal(stdin_fd), winch_pipe() as winch:
            relay.say(f"attached to {unit} session {info.get('session')} (pid {info.get('pid')}; {mode}detach with {DETACH_KEY_NAME})")
            try:
                return relay.run(winch)
            except (BrokenPipeError, ConnectionError, ProtocolError) as exc:
                relay.say(f"connection to agentd lost: {exc}")
                return CODE_ERROR
            except KeyboardInterrupt:  # Ctrl-C where no raw terminal catches it (read-only without a terminal)
                relay.say(f"detached from {unit}")
                return CODE_DETACHED
    finally:
        sock.close()


__all__ = ["RAW_WARNING", "AttachError", "run_attach"]
