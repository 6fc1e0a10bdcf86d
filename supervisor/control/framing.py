"""The control socket's wire format, for both ends (standard library only).

Requests and replies: a 4-byte big-endian length, then that many bytes of
UTF-8 JSON (a JSON object), at most :data:`MAX_MESSAGE`.  :func:`decode` takes
only plain JSON: nested at most :data:`MAX_DEPTH` deep, integers of at most
:data:`MAX_DIGITS` digits, finite numbers (no ``NaN``, ``Infinity``, ``1e999``)
and strings that are valid Unicode (no lone surrogate from a ``\ud800``
escape); anything else is a :class:`ProtocolError`, never an exception the
daemon did not expect (a 100,000-deep frame used to raise ``RecursionError``).

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
import math
import re
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_MESSAGE = 1 << 20  # 1 MiB
MAX_FRAME = 1 << 20
#: Deepest nesting of arrays and objects in a message (a request needs 4).
MAX_DEPTH = 32
#: Longest integer in a message, in digits.
MAX_DIGITS = 20
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


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ProtocolError(f"an integer of more than {MAX_DIGITS} digits")
    return int(text)


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ProtocolError(f"a number that is not finite ({text[:20]})")
    return value


def _constant(name: str) -> Any:
    raise ProtocolError(f"{name} is not JSON")


def _check(value: Any, strings: bool = True) -> None:
    """Depth and (with ``strings``) the strings of a decoded message (iterative: a deep one costs no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if strings and _SURROGATE.search(item):
                raise ProtocolError("a string with a lone surrogate (not valid Unicode)")
        elif isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise ProtocolError(f"nested more than {MAX_DEPTH} deep")
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)


_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of one message body; ProtocolError if it is not one (see the module doc)."""
    try:
        message = json.loads(body.decode("utf-8"), parse_int=_integer, parse_float=_number, parse_constant=_constant)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"message is not UTF-8: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"message is not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError(f"message is nested more than {MAX_DEPTH} deep") from None
    except ValueError as exc:  # a number Python refuses to convert
        raise ProtocolError(f"message is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("message must be a JSON object")
    # A surrogate can only come from a \uD800-\uDFFF escape (UTF-8 cannot carry one): without any,
    # only the depth is checked (a 50-unit status reply: 3 ms less of `agentd status`).
    _check(message, strings=_ESCAPED_SURROGATE.search(body) is not None)
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
