"""The control socket's wire format, for both ends (standard library only).

Requests and replies: a 4-byte big-endian length, then that many bytes of
UTF-8 JSON (a JSON object), at most :data:`MAX_MESSAGE`.

After an ``attach`` request is accepted, the connection switches to stream
frames: a 1-byte type, a 4-byte big-endian length, the payload (at most
:data:`MAX_FRAME`).  :func:`frame` writes one; :class:`FrameDecoder` reads them
incrementally.  The frame types are listed in :mod:`supervisor.control.attach`.

Blocking helpers for clients: :func:`connect`, :func:`recv_exactly`,
:func:`read_reply`.  Kept free of asyncio and structlog so that short
commands (``agentd status``) start fast.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_MESSAGE = 1 << 20  # 1 MiB
MAX_FRAME = 1 << 20
HEADER = struct.Struct(">I")
FRAME_HEADER = struct.Struct(">cI")


class ControlError(Exception):
    """An error to report to the client (the message is for the user)."""


class ProtocolError(Exception):
    """The peer broke the framing; the connection is closed."""


class DaemonNotRunning(Exception):
    """No daemon answers on the socket."""


def encode(message: Mapping[str, Any]) -> bytes:
    """One framed JSON message."""
    body = json.dumps(message, separators=(",", ":"), default=str).encode()
    if len(body) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {MAX_MESSAGE} byte limit")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of one message body; ProtocolError if it is not one."""
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"message is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("message must be a JSON object")
    return message


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One stream frame."""
    return FRAME_HEADER.pack(kind, len(payload)) + payload


def json_frame(kind: bytes, value: Mapping[str, Any]) -> bytes:
    return frame(kind, json.dumps(value, separators=(",", ":")).encode())


class FrameDecoder:
    """Incremental decoder: feed bytes, get complete ``(type, payload)`` frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buf += data
        frames = []
        while len(self._buf) >= FRAME_HEADER.size:
            kind, size = FRAME_HEADER.unpack_from(self._buf)
            if size > MAX_FRAME:
                raise ProtocolError(f"frame of {size} bytes exceeds {MAX_FRAME}")
            end = FRAME_HEADER.size + size
            if len(self._buf) < end:
                break
            frames.append((kind, bytes(self._buf[FRAME_HEADER.size:end])))
            del self._buf[:end]
        return frames


# ---------------------------------------------------------------- blocking client side
def connect(path: Path, timeout: float | None) -> socket.socket:
    """A connected socket; DaemonNotRunning when nobody listens, PermissionError as is."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        raise DaemonNotRunning(f"agentd is not running (no answer on {path}: {exc.strerror})") from None
    except OSError:
        sock.close()
        raise
    return sock


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise DaemonNotRunning("agentd closed the connection")
        chunks += chunk
    return bytes(chunks)


def read_reply(sock: socket.socket) -> dict[str, Any]:
    """Exactly one framed JSON message from a blocking socket (and nothing after it)."""
    (size,) = HEADER.unpack(recv_exactly(sock, HEADER.size))
    if size > MAX_MESSAGE:
        raise ProtocolError("reply too large")
    return decode(recv_exactly(sock, size))
