"""The control socket's client side and framing (standard library only).

Kept apart from :mod:`supervisor.control` (the asyncio server) so that short
commands such as ``agentd status`` do not import asyncio or structlog.
Framing: a 4-byte big-endian length, then that many bytes of UTF-8 JSON, at
most :data:`MAX_MESSAGE`.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_MESSAGE = 1 << 20  # 1 MiB
_HEADER = struct.Struct(">I")


class ControlError(Exception):
    """An error to report to the client (the message is for the user)."""


class ProtocolError(Exception):
    """The peer broke the framing; the connection is closed."""


def encode(message: Mapping[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), default=str).encode()
    if len(body) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {MAX_MESSAGE} byte limit")
    return _HEADER.pack(len(body)) + body


class DaemonNotRunning(Exception):
    """No daemon answers on the socket."""


class Client:
    """A blocking client for the CLI (one socket, several requests)."""

    def __init__(self, path: Path, timeout: float | None = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise DaemonNotRunning(f"agentd is not running (no answer on {self.path}: {exc.strerror})") from None
        except OSError:
            sock.close()
            raise
        self._sock = sock

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
        self._sock.sendall(encode({"cmd": cmd, "args": args}))
        reply = self._read()
        if not reply.get("ok"):
            raise ControlError(reply.get("error", "unknown error"))
        return reply.get("result")

    def _recv_exactly(self, size: int) -> bytes:
        assert self._sock is not None
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self._sock.recv(size - len(chunks))
            if not chunk:
                raise DaemonNotRunning("agentd closed the connection")
            chunks += chunk
        return bytes(chunks)

    def _read(self) -> dict[str, Any]:
        (size,) = _HEADER.unpack(self._recv_exactly(_HEADER.size))
        if size > MAX_MESSAGE:
            raise ProtocolError("reply too large")
        return json.loads(self._recv_exactly(size))


def call(path: Path, cmd: str, timeout: float | None = 30.0, **args: Any) -> Any:
    """One-shot request."""
    with Client(path, timeout=timeout) as client:
        return client.call(cmd, **args)
