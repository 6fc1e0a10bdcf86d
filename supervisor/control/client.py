"""The control socket's blocking client (standard library only, so commands start fast)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from .framing import ControlError, DaemonNotRunning, ProtocolError, connect, encode, read_reply

__all__ = ["Client", "ControlError", "DaemonNotRunning", "ProtocolError", "call"]


class Client:
    """One socket, several requests (answered in order)."""

    def __init__(self, path: Path, timeout: float | None = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        self._sock = connect(self.path, self.timeout)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def call(self, cmd: str, timeout: float | None = None, **args: Any) -> Any:
        """Send one command; return its result or raise ControlError."""
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        self._sock.settimeout(timeout if timeout is not None else self.timeout)
        try:
            self._sock.sendall(encode({"cmd": cmd, "args": args}))
        except BrokenPipeError:
            pass  # refused before reading (too many connections): the reason may still be there to read
        reply = read_reply(self._sock)
        if not reply.get("ok"):
            raise ControlError(reply.get("error", "unknown error"))
        return reply.get("result")


def call(path: Path, cmd: str, timeout: float | None = 30.0, **args: Any) -> Any:
    """One-shot request."""
    with Client(path, timeout=timeout) as client:
        return client.call(cmd, **args)
