"""``agentd attach``: relay a supervised agent's live PTY to a person's terminal.

This is the daemon half (:func:`serve_attach`, a streaming control command);
the terminal half is :mod:`supervisor.cli.attach`.  Framing is
:mod:`supervisor.control.framing`.

Connection
----------
The client opens the control socket and sends one ordinary framed JSON request
(see :mod:`supervisor.control.server`)::

    {"cmd": "attach", "args": {"unit": NAME, "read_only": BOOL, "rows": R, "cols": C, "raw": true}}

``rows``/``cols`` are optional (absent when the client has no terminal).
``raw`` is sent only by ``agentd attach --raw`` (see "What a viewer sees").  The
daemon answers in the same framing, ``{"ok": false, "error": ...}`` (and closes)
or ``{"ok": true, "result": INFO}`` with ``INFO = {"unit", "session", "pid",
"rows", "cols", "read_only", "raw", "detach_key"}``.  From then on both sides speak
the binary stream protocol below until either closes the connection.

Stream protocol
---------------
Every frame is a 1-byte type, a 4-byte big-endian payload length, and the
payload (at most :data:`MAX_FRAME` bytes)::

    daemon -> viewer
      b"o"  OUTPUT   the bytes the agent wrote to its terminal, redacted (see
                     below).  The first OUTPUT of each session is its opening
                     (:mod:`supervisor.control.repaint`, from the session's
                     redacted ``.log``): the last ~4 KiB of a line-oriented
                     agent, cut at a line start, or a repaint of a
                     full-screen agent's current screen (a TUI that sits on
                     a login screen shows it, not a blank terminal).
      b"s"  SESSION  JSON INFO of a *new* session the viewer now follows
                     (after the previous one ended or was replaced).
      b"e"  ENDED    JSON {"reason": str}: the followed session ended or was
                     replaced; the daemon waits up to :data:`REATTACH_WAIT`
                     seconds for the unit's next session (then SESSION, or CLOSE).
      b"x"  CLOSE    JSON {"reason": str, "code": int}: the daemon ends the
                     stream (no next session: code 3; viewer too slow: code 1).
    viewer -> daemon
      b"i"  INPUT    bytes the person typed (ignored by the daemon for a
                     read-only viewer; the client does not send them either).
      b"r"  RESIZE   4 bytes, ``>HH`` rows, cols: the viewer's window size
                     (applied to the agent's PTY for read-write viewers only).
      b"d"  DETACH   empty: the person detached; the daemon closes.

Closing the socket is the same as DETACH.  The daemon keeps writing the
transcript as always: a viewer only adds a listener to the session.

What a viewer sees
------------------
By default the *redacted* stream: exactly the bytes the transcript appends to
the ``.log`` (the session's output listener,
:meth:`~supervisor.session.pty.Session.add_output_listener`), so a secret
the agent prints reaches the viewer as ``[REDACTED]``, and a possible secret
prefix only once its token has ended.  With ``raw`` the viewer gets the bytes
as read from the PTY (the session's raw listener), at once and unredacted;
the client prints a warning and the daemon logs ``attach_raw``.

Back-pressure: output for one viewer goes through a bounded outbox drained by
one task with ``writer.drain()``.  If a viewer falls more than
:data:`MAX_BEHIND` bytes behind, it is sent CLOSE and dropped; the agent and the
other viewers never wait for it.

The target
----------
The daemon side needs only the small :class:`AttachTarget` protocol, which the
:class:`~supervisor.daemon.arbiter.Arbiter` implements.

Detach key: Ctrl-] (0x1d), as in telnet.  A read-only viewer's other keys
are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from .framing import FRAME_HEADER, MAX_FRAME, ControlError, encode, frame, json_frame
from .repaint import Opening

log = structlog.get_logger("agentd.attach")

DETACH_KEY = b"\x1d"  # Ctrl-]
DETACH_KEY_NAME = "Ctrl-]"
MAX_BEHIND = 1 << 20  # bytes a viewer may lag before it is dropped
REATTACH_WAIT = 5.0  # seconds to wait for the next session after one ends
POLL = 0.1  # seconds between checks that the followed session is still current

OUTPUT, SESSION, ENDED, CLOSE = b"o", b"s", b"e", b"x"
INPUT, RESIZE, DETACH = b"i", b"r", b"d"

CODE_DETACHED = 0
CODE_ERROR = 1
CODE_NO_SESSION = 3

SIZE = struct.Struct(">HH")


# ====================================================================== server
class AttachSession(Protocol):
    """What the server uses of a :class:`~supervisor.session.pty.Session`."""

    unit: str
    session_id: str
    pid: int
    rows: int
    cols: int

    def add_listener(self, callback: Any) -> None: ...
    def remove_listener(self, callback: Any) -> None: ...
    def add_output_listener(self, callback: Any) -> None: ...
    def remove_output_listener(self, callback: Any) -> None: ...
    def send(self, data: bytes) -> None: ...
    def resize(self, rows: int, cols: int) -> None: ...


class AttachTarget(Protocol):
    """The daemon as seen by :func:`serve_attach` (implemented by the Arbiter).

    ``current_session(unit)``
        The unit's session object right now, or None.  Raises ControlError for
        an unknown unit.  A viewer follows one session until this stops
        returning it (so output drained at the end still reaches the viewer).
    ``await wait_session(unit, previous, timeout)``
        A running session of ``unit`` other than ``previous``, waiting up to
        ``timeout`` seconds; None if none started.
    ``person_input(unit)``
        A person typed into the unit's session just now (the daemon holds back
        its own typing while a person types).
    ``viewer_attached(unit, delta)``
        +1 when a viewer attaches, -1 when it leaves; returns the new count.
    """

    def current_session(self, unit: str) -> Any: ...
    async def wait_session(self, unit: str, previous: Any, timeout: float) -> Any: ...
    def person_input(self, unit: str) -> None: ...
    def viewer_attached(self, unit: str, delta: int) -> int: ...


@dataclass
class AttachRequest:
    unit: str
    read_only: bool
    rows: int | None
    cols: int | None
    raw: bool = False

    @classmethod
    def parse(cls, args: dict[str, Any]) -> AttachRequest:
        unit = args.get("unit")
        if not isinstance(unit, str) or not unit:
            raise ValueError("attach: unit must be a unit name")
        rows, cols = args.get("rows"), args.get("cols")
        for value in (rows, cols):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535):
                raise ValueError("attach: rows and cols must be integers from 1 to 65535")
        if (rows is None) != (cols is None):
            raise ValueError("attach: give both rows and cols, or neither")
        raw = args.get("raw", False)
        if not isinstance(raw, bool):
            raise ValueError("attach: raw must be true or false")
        return cls(unit, bool(args.get("read_only", False)), rows, cols, raw)


def session_info(session: AttachSession, read_only: bool, raw: bool = False) -> dict[str, Any]:
    return {
        "unit": session.unit,
        "session": session.session_id,
        "pid": session.pid,
        "rows": session.rows,
        "cols": session.cols,
        "read_only": read_only,
        "raw": raw,
        "detach_key": DETACH_KEY_NAME,
    }


class _Outbox:
    """Frames waiting for one viewer; refuses more once the viewer is too far behind."""

    def __init__(self, writer: asyncio.StreamWriter, limit: int = MAX_BEHIND) -> None:
        self._writer = writer
        self._limit = limit
        self._frames: deque[bytes] = deque()
        self._size = 0
        self._ready = asyncio.Event()
        self.closed = False
        self.overflowed = False

    def behind(self) -> int:
        transport = self._writer.transport
        return self._size + (transport.get_write_buffer_size() if transport is not None else 0)

    def put(self, data: bytes) -> bool:
        """Queue ``data``; False (and ``overflowed``) if the viewer is over the limit."""
        if self.closed or self.overflowed:
            return False
        if self.behind() + len(data) > self._limit:
            self.overflowed = True
            self._frames.clear()
            self._size = 0
            self._ready.set()
            return False
        self._frames.append(data)
        self._size += len(data)
        self._ready.set()
        return True

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def pump(self) -> None:
        """Write queued frames until closed (or overflowed) and empty."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            if self.overflowed:
                return
            if self._frames:
                data = b"".join(self._frames)
                self._frames.clear()
                self._size = 0
                self._writer.write(data)
                await self._writer.drain()
            elif self.closed:
                return
            if self._frames or self.closed:
                self._ready.set()


@dataclass
class _Viewer:
    """One attached viewer: follows sessions of one unit until it leaves."""

    target: AttachTarget
    request: AttachRequest
    writer: asyncio.StreamWriter
    outbox: _Outbox
    session: AttachSession | None = None
    listener: Opening | None = None
    painting: asyncio.Future[None] | None = None
    input_bytes: int = 0
    ignored_bytes: int = 0
    sessions: list[str] = field(default_factory=list)

    # -- viewer -> daemon ---------------------------------------------------
    async def read_client(self, reader: asyncio.StreamReader) -> str:
        """Handle the viewer's frames; return why it left."""
        while True:
            try:
                header = await reader.readexactly(FRAME_HEADER.size)
                kind, size = FRAME_HEADER.unpack(header)
                if size > MAX_FRAME:
                    return f"protocol error: frame of {size} bytes"
                payload = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                return "connection closed"
            except ConnectionError:
                return "connection lost"
            if kind == DETACH:
                return "detached"
            if kind == INPUT:
                self.on_input(payload)
            elif kind == RESIZE and len(payload) == SIZE.size:
                self.request.rows, self.request.cols = SIZE.unpack(payload)
                self.apply_size()

    def on_input(self, data: bytes) -> None:
        if self.request.read_only:
            self.ignored_bytes += len(data)
            return
        if not data or self.session is None:
            return
        self.target.person_input(self.request.unit)
        try:
            self.session.send(data)
        except Exception:  # noqa: BLE001 - the session ended under us; the keys are lost
            return
        self.input_bytes += len(data)

    def apply_size(self) -> None:
        if self.request.read_only or self.session is None or not self.request.rows or not self.request.cols:
            return
        try:
            self.session.resize(self.request.rows, self.request.cols)
        except Exception:  # noqa: BLE001 - a session that is going away
            pass

    # -- daemon -> viewer ---------------------------------------------------
    def on_output(self, data: bytes) -> None:
        self.outbox.put(frame(OUTPUT, data))

    def follow(self, session: AttachSession) -> None:
        """Start relaying ``session``: its opening first, then live output (no gap, no repeat: see
        :class:`~supervisor.control.repaint.Opening`; the opening is built at the size the agent drew at)."""
        rows, cols = session.rows, session.cols
        self.session = session
        self.sessions.append(session.session_id)
        self.listener = Opening(session.transcript.log_path, rows, cols, self.on_output)  # type: ignore[attr-defined]
        if self.request.raw:
            session.add_listener(self.listener)
        else:
            session.add_output_listener(self.listener)
        self.painting = asyncio.ensure_future(self.listener.run())
        self.apply_size()  # after the size is noted: the agent redraws at the viewer's size, live

    def unfollow(self) -> None:
        if self.painting is not None:
            self.painting.cancel()
            self.painting = None
        if self.session is not None and self.listener is not None:
            if self.request.raw:
                self.session.remove_listener(self.listener)
            else:
                self.session.remove_output_listener(self.listener)
            self.listener = None

    def ended(self, session: AttachSession) -> str | None:
        """Why ``session`` is no longer the one to follow, or None while it is."""
        try:
            current = self.target.current_session(self.request.unit)
        except ControlError:
            current = None
            why = "the unit was removed"
        else:
            why = "replaced by session " + current.session_id if current is not None else "no session running"
        if current is session:
            return None
        exit_info = getattr(session, "exit", None)
        status = exit_info.describe() if exit_info is not None else "stopped"
        return f"session {session.session_id} ({status}); {why}"

    async def relay(self, session: AttachSession, client: asyncio.Task[str]) -> str | None:
        """Relay ``session`` until it ends (return the reason) or the viewer leaves/overflows (None)."""
        self.follow(session)
        try:
            while True:
                await asyncio.wait({client}, timeout=POLL)
                if client.done() or self.outbox.overflowed:
                    return None
                reason = self.ended(session)
                if reason is not None:
                    return reason
        finally:
            self.unfollow()

    async def next_session(self, previous: AttachSession, client: asyncio.Task[str]) -> AttachSession | None:
        waiter = asyncio.ensure_future(self.target.wait_session(self.request.unit, previous, REATTACH_WAIT))
        try:
            await asyncio.wait({client, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiter.done():
                waiter.cancel()
        if client.done() or waiter.cancelled() or waiter.exception() is not None:
            return None
        return waiter.result()

    async def run(self, first: AttachSession, reader: asyncio.StreamReader) -> str:
        """Follow sessions until the viewer leaves or no next session starts; return why it ended."""
        client = asyncio.ensure_future(self.read_client(reader))
        pump = asyncio.ensure_future(self.outbox.pump())
        session = first
        try:
            while True:
                reason = await self.relay(session, client)
                if reason is None:
                    break
                self.outbox.put(json_frame(ENDED, {"reason": reason}))
                following = await self.next_session(session, client)
                if client.done():
                    break
                if following is None:
                    self.close(f"no new session of {self.request.unit} within {REATTACH_WAIT:g}s", CODE_NO_SESSION)
                    await _finish(pump)
                    return "no new session"
                session = following
                self.outbox.put(json_frame(SESSION, session_info(session, self.request.read_only, self.request.raw)))
            if self.outbox.overflowed:
                log.warning("viewer_dropped", unit=self.request.unit, limit=MAX_BEHIND, read_only=self.request.read_only)
                pump.cancel()
                self.writer.write(json_frame(CLOSE, {"reason": f"dropped: more than {MAX_BEHIND} bytes behind the agent", "code": CODE_ERROR}))
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.writer.drain(), 2.0)
                return "too slow"
            return client.result()
        finally:
            client.cancel()
            pump.cancel()

    def close(self, reason: str, code: int) -> None:
        self.outbox.put(json_frame(CLOSE, {"reason": reason, "code": code}))
        self.outbox.close()


async def _finish(pump: asyncio.Future[None], timeout: float = 5.0) -> None:
    """Let the last frames go out, without waiting forever for a stuck viewer."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(pump, timeout)


async def _reply(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(encode(message))
    await writer.drain()


async def serve_attach(target: AttachTarget, args: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The daemon half: answer the request, then relay until the viewer leaves."""
    try:
        request = AttachRequest.parse(args)
        session = target.current_session(request.unit)
        if session is None or getattr(session, "exit", None) is not None:
            raise ControlError(f"unit {request.unit!r} has no running session to attach to")
    except (ValueError, ControlError) as exc:
        await _reply(writer, {"ok": False, "error": str(exc)})
        return
    viewer = _Viewer(target, request, writer, _Outbox(writer))
    count = target.viewer_attached(request.unit, +1)
    reason = "error"
    try:
        # logged before the reply: whoever sees the viewer attached finds it in the log too
        log.info("attached", unit=request.unit, session=session.session_id, read_only=request.read_only, viewers=count)
        if request.raw:
            log.warning("attach_raw", unit=request.unit, session=session.session_id,
                        note="the viewer sees the unredacted stream")
        await _reply(writer, {"ok": True, "result": session_info(session, request.read_only, request.raw)})
        reason = await viewer.run(session, reader)
    finally:
        count = target.viewer_attached(request.unit, -1)
        log.info("detached", unit=request.unit, read_only=request.read_only, reason=reason, viewers=count,
                 input_bytes=viewer.input_bytes, ignored_bytes=viewer.ignored_bytes, sessions=viewer.sessions)


__all__ = ["AttachTarget", "DETACH_KEY", "serve_attach"]
