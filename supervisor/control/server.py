"""The control socket's server: the explicit command table, peer check, dispatch.

Protocol (framing in :mod:`supervisor.control.framing`): a Unix stream
socket; each message is length-prefixed UTF-8 JSON.  A request is ``{"cmd": NAME, "args": {...}}``; a reply is ``{"ok": true,
"result": ...}`` or ``{"ok": false, "error": "..."}``.  One connection may
carry several requests, answered in order.

Security: the socket file is mode 0600 inside a 0700 directory, and every
connection's peer uid is read with ``SO_PEERCRED`` and must equal the daemon's
own uid (``owner_uid``: tests name another uid to prove the refusal as any
user).  Agents run with that uid too, so each connection's caller is then
told apart (issue 25 §2): its pid, pinned by a pidfd
(:mod:`supervisor.control.peer`), is looked up by the daemon's ``callers``
(a session's process, the operator, or an agent process no session claims),
and each command declares who may run it (``Command.who``;
:mod:`supervisor.control.access`: an own-unit command runs with the caller's
unit bound into its arguments).  A peer that cannot be told (it exited before
the lookup, or is not visible from the daemon's pid namespace) is refused.
Commands are looked up in an explicit table built by the daemon; there is no
attribute lookup by name.

Limits (issue 13, item 5; :mod:`supervisor.control.connections`), so that idle
or stuck clients never use up the daemon's descriptors and ``status`` always
answers: an idle timeout, a cap with a reserve for the priority commands, idle
connections giving way under pressure, and the listener's backoff and spare
descriptor when the daemon is out of descriptors
(:mod:`supervisor.control.listener`).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from ..session.fdlimit import fd_limit_message
from .access import OPERATOR, OPERATOR_CALLER, Access, Caller, Callers, Refused, permit
from .framing import HEADER, MAX_MESSAGE, ControlError, ProtocolError, decode, encode
from .connections import PRIORITY, Admission, Conn, Connections, Limits
from .listener import BACKOFF_FIRST, Listener, next_delay
from .peer import PIN_FIRST, Peer, read_peer

__all__ = ["Command", "ControlError", "ControlServer", "Limits", "PRIORITY", "ProtocolError", "read_message"]

log = structlog.get_logger("agentd.control")
#: Seconds a caller waits to be told apart while the daemon is out of descriptors (then it is refused).
IDENTIFY_WAIT = 5.0

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
#: A streaming handler owns the connection after the request: (args, reader, writer).
StreamHandler = Callable[[dict[str, Any], asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(frozen=True)
class Command:
    """One entry of the command table.

    A plain command answers with one reply.  A ``stream`` command (``attach``)
    is handed the connection after the peer check, the argument check and the
    access check, and speaks its own framing until it returns.  ``who``: who
    may run it (:mod:`supervisor.control.access`; the operator only unless declared).
    """

    handler: Handler | StreamHandler
    args: frozenset[str] = frozenset()
    help: str = ""
    stream: bool = False
    who: Access = OPERATOR


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """Read one message; None on a clean end of stream."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ProtocolError("truncated header") from None
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_MESSAGE:
        raise ProtocolError(f"message of {size} bytes exceeds the {MAX_MESSAGE} byte limit")
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ProtocolError("truncated message") from None
    return decode(body)


class ControlServer:
    """Serves the command table on a Unix socket."""

    def __init__(self, path: Path, commands: Mapping[str, Command], limits: Limits | None = None, *,
                 owner_uid: int | None = None, callers: Callers | None = None) -> None:
        """``owner_uid``: the only peer uid served (default: this process's uid).  ``callers``: who each
        peer is (the daemon's containment); without it every peer of that uid is the operator."""
        self.path = path
        self.callers = callers
        self.commands = dict(commands)
        self.limits = limits or Limits()
        self.table = Connections(self.limits)
        self._listener = Listener(path, self._accepted, relieve=self.table.evict_idle)
        self._uid = os.getuid() if owner_uid is None else owner_uid
        self._tasks: set[asyncio.Task[None]] = set()
        self._spare: int | None = None  # a descriptor held for telling callers apart when there is none

    async def start(self) -> None:
        await self._listener.start()
        self._take_spare()

    async def close(self) -> None:
        """Stop accepting (connections being served finish their reply)."""
        await self._listener.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None

    def _take_spare(self) -> None:
        """Hold the descriptor that telling a caller apart may use when there is no other."""
        if self._spare is None and self.callers is not None:
            try:
                self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._spare = None  # out of descriptors: taken again after the next caller told on it

    def _accepted(self, sock: socket.socket, spare: bool) -> None:
        """A new connection: serve it, on the reserve, or refuse it with a clear error."""
        admission = Admission.RESERVE if spare else self.table.admission()
        if spare:
            why = fd_limit_message("the daemon")
        else:
            why = (f"agentd is serving {self.table.open} connections, its limit (a connection idle for "
                   f"{self.limits.idle_timeout:g} s is closed); try again")
        if admission is Admission.REFUSED:
            log.warning("control_refused", error="too many connections", detail=why)
            try:
                sock.send(encode({"ok": False, "error": why}))
            except OSError:
                pass
            sock.close()
            return
        conn = self.table.add(admission, spare)
        task = asyncio.ensure_future(self._connection(sock, conn, why))

        def done(_task: asyncio.Task[None]) -> None:
            self._tasks.discard(_task)
            self.table.remove(conn)
            if spare:
                self._listener.release_spare()

        self._tasks.add(task)
        task.add_done_callback(done)

    async def _connection(self, sock: socket.socket, conn: Conn, why: str) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_MESSAGE + 64)
        except OSError as exc:
            log.warning("control_connection_failed", error=str(exc))
            sock.close()
            return
        conn.writer = writer
        await self._serve(reader, writer, PRIORITY if conn.admission is Admission.RESERVE else None, why, conn)

    async def _next_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            conn: Conn | None) -> dict[str, Any] | None:
        """The next request; None at the end of the stream or after the idle timeout (the client is told)."""
        if conn is not None:
            conn.idle_since = self.table.clock()
        try:
            return await asyncio.wait_for(read_message(reader), self.limits.idle_timeout)
        except asyncio.TimeoutError:
            await self._reply(writer, {"ok": False, "error": f"closed: no request within {self.limits.idle_timeout:g} s"})
            return None
        finally:
            if conn is not None:
                conn.idle_since = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     only: frozenset[str] | None = None, why: str = "", conn: Conn | None = None) -> None:
        sock = writer.get_extra_info("socket")
        try:
            peer = read_peer(sock)
        except OSError:
            peer = Peer(0, -1)
        try:
            if peer.uid != self._uid:
                log.warning("control_refused", peer_uid=peer.uid, reason="peer uid differs from the daemon's")
                await self._reply(writer, {"ok": False, "error": f"permission denied: uid {peer.uid} is not the daemon's owner"})
                return
            caller = await self._identify(sock, peer)
            if isinstance(caller, str):
                log.warning("control_refused", peer_pid=peer.pid, error=caller)
                await self._reply(writer, {"ok": False, "error": f"permission denied: {caller}"})
                return
            while True:
                try:
                    message = await self._next_request(reader, writer, conn)
                except ProtocolError as exc:
                    log.warning("control_protocol_error", error=str(exc))
                    await self._reply(writer, {"ok": False, "error": f"protocol error: {exc}"})
                    return
                if message is None:
                    return
                if only is not None and message.get("cmd") not in only:
                    await self._reply(writer, {"ok": False, "error": f"{why}; only {', '.join(sorted(only))} "
                                                                     "are answered now"})
                    return
                command = self.commands.get(message.get("cmd")) if isinstance(message.get("cmd"), str) else None
                if command is not None and command.stream:
                    name, args = str(message["cmd"]), message.get("args") or {}
                    error = self._check_args(name, command, args)
                    bound = self._bind(name, command, caller, args) if error is None else None
                    if error is not None or isinstance(bound, str):
                        await self._reply(writer, error or {"ok": False, "error": bound})
                        return
                    await command.handler(bound, reader, writer)  # type: ignore[call-arg]
                    return
                await self._reply(writer, await self.dispatch(message, caller))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            peer.close()
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - closing a broken transport
                pass

    async def _identify(self, sock: socket.socket, peer: Peer) -> Caller | str:
        """Who the peer is, or why that cannot be told (then it is refused).

        Telling needs one descriptor at a time (a ``/proc`` file, then the pidfd).  Out of them, it is
        done on the loop in the place of the server's spare descriptor (nothing else on the loop takes
        that place meanwhile); failing that, an idle connection gives way, as for an accept
        (:mod:`supervisor.control.connections`), or the server waits, up to :data:`IDENTIFY_WAIT` seconds.
        """
        if self.callers is None:
            return OPERATOR_CALLER
        if peer.pid <= 0:
            return "the calling process is not visible from agentd's pid namespace, so its unit cannot be told"
        gone = f"the calling process (pid {peer.pid}) ended before agentd could tell which unit it is in"
        deadline, delay = self.table.clock() + IDENTIFY_WAIT, 0.0
        while True:
            try:
                try:
                    caller = await asyncio.to_thread(self._tell, sock, peer)
                except OSError as exc:
                    if isinstance(exc, ProcessLookupError) or exc.errno not in (errno.EMFILE, errno.ENFILE):
                        raise
                    caller = self._tell_on_spare(sock, peer)
            except ProcessLookupError:
                return gone
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or self.table.clock() >= deadline:
                    return f"agentd cannot tell which unit pid {peer.pid} is in: {exc.strerror or exc}; try again"
                delay = BACKOFF_FIRST if self.table.evict_idle() else next_delay(delay)
                await asyncio.sleep(delay)  # an evicted connection's descriptor is freed meanwhile
                continue
            except Exception as exc:
                log.exception("control_caller_lookup_failed", peer_pid=peer.pid)
                return f"agentd could not tell which unit pid {peer.pid} is in ({type(exc).__name__}: {exc})"
            return caller if caller is not None else gone

    def _tell(self, sock: socket.socket, peer: Peer) -> Caller | None:
        """The caller (blocking); None when the process that connected is gone by the end of the lookup."""
        assert self.callers is not None
        try:
            if PIN_FIRST:
                peer.pin(sock)
            caller = self.callers.caller(peer.pid)
            peer.pin(sock)  # the process that connected: still alive, so its pid was never reused since
            return caller if peer.alive() else None
        finally:
            peer.close()

    def _tell_on_spare(self, sock: socket.socket, peer: Peer) -> Caller | None:
        """:meth:`_tell` on the loop, out of descriptors, in the place of the spare (EMFILE when there is none)."""
        if self._spare is None:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        os.close(self._spare)
        self._spare = None
        try:
            return self._tell(sock, peer)
        finally:
            self._take_spare()

    @staticmethod
    def _bind(name: str, command: Command, caller: Caller, args: dict[str, Any]) -> dict[str, Any] | str:
        """The arguments ``name`` runs with for ``caller``, or why it is refused (logged)."""
        try:
            return permit(name, command.who, caller, args)
        except Refused as exc:
            log.warning("control_refused", cmd=name, error=str(exc), **caller.log_fields())
            return str(exc)

    async def dispatch(self, message: Mapping[str, Any], caller: Caller = OPERATOR_CALLER) -> dict[str, Any]:
        name = message.get("cmd")
        args = message.get("args") or {}
        if not isinstance(name, str) or name not in self.commands:
            known = ", ".join(sorted(self.commands))
            return {"ok": False, "error": f"unknown command {name!r}; known commands: {known}"}
        command = self.commands[name]
        error = self._check_args(name, command, args)
        if error is not None:
            return error
        bound = self._bind(name, command, caller, args)
        if isinstance(bound, str):
            return {"ok": False, "error": bound}
        args = bound
        if command.stream:
            return {"ok": False, "error": f"{name} needs a connection of its own"}
        try:
            return {"ok": True, "result": await command.handler(args)}  # type: ignore[call-arg]
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:
            log.exception("control_command_failed", cmd=name)
            return {"ok": False, "error": f"{name} failed: {type(exc).__name__}: {exc}"}

    @staticmethod
    def _check_args(name: str, command: Command, args: Any) -> dict[str, Any] | None:
        if not isinstance(args, dict):
            return {"ok": False, "error": "args must be a JSON object"}
        unknown = set(args) - command.args
        if unknown:
            return {"ok": False, "error": f"{name}: unknown argument(s) {sorted(unknown)}; allowed: {sorted(command.args)}"}
        return None

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, reply: dict[str, Any]) -> None:
        try:
            data = encode(reply)
        except ProtocolError as exc:
            data = encode({"ok": False, "error": str(exc)})
        writer.write(data)
        await writer.drain()
