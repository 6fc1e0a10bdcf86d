"""The control socket's listening end: accept connections without ever spinning (issue 13, item 3).

asyncio's ``start_unix_server`` handles ``EMFILE`` from ``accept()`` badly:
its accept loop logs a traceback, pauses the reader for a second, and goes on
accepting in the same loop (up to the backlog), so a daemon at its open-file
limit burns CPU and writes gigabytes of "socket.accept() out of system
resource".  :class:`Listener` accepts one connection at a time with
``loop.sock_accept`` and, when the process is out of descriptors:

1. asks the server to **relieve** the pressure (an idle connection gives way,
   :mod:`supervisor.control.connections`) and tries again at once;
2. else uses its **spare descriptor**: one descriptor (``/dev/null``) held open for
   this moment is closed, the waiting connection is accepted into its place
   and handed over marked ``spare``, so the client gets a clear answer (and
   ``status`` can still be served) instead of a hang; the spare is taken
   again when that connection ends (:meth:`Listener.release_spare`);
3. otherwise **backs off**: stops accepting for a moment (doubling from
   :data:`BACKOFF_FIRST` up to :data:`BACKOFF_MAX` seconds), with one
   rate-limited log line, never a loop of tracebacks.

The socket file is mode 0600 in a 0700 directory (the server checks each
peer's uid as well).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
from collections.abc import Callable
from pathlib import Path

import structlog

from ..config.paths import socket_dir_problem
from ..session.fdlimit import exhaustion

log = structlog.get_logger("agentd.control")

#: accept() errors that mean "out of a resource": wait and try again.
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0
BACKLOG = 128


def next_delay(delay: float, first: float = BACKOFF_FIRST, most: float = BACKOFF_MAX) -> float:
    """The pause after another failed accept (0 before the first failure)."""
    return min(most, max(first, delay * 2))


class Listener:
    """Accepts on ``path``; ``handle(conn, spare)`` gets each connected, non-blocking socket."""

    def __init__(self, path: Path, handle: Callable[[socket.socket, bool], None],
                 relieve: Callable[[], bool] = lambda: False) -> None:
        self.path = path
        self.handle = handle
        self.relieve = relieve  # frees a descriptor (closes an idle connection); False when it cannot
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self._spare: int | None = None
        self.failures = 0  # accepts that failed for lack of a resource (for tests and status)

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        problem = socket_dir_problem(self.path.parent)
        if problem:
            raise OSError(errno.EPERM, f"{problem}; remove it, or use a shorter project path")
        os.chmod(self.path.parent, 0o700)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        except BaseException:
            sock.close()
            raise
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(BACKLOG)
        sock.setblocking(False)
        self._sock = sock
        self.release_spare()
        self._task = asyncio.ensure_future(self._accept_loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def release_spare(self) -> None:
        """Hold the spare descriptor again (after the connection accepted in its place has ended)."""
        if self._spare is None:
            try:
                self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._spare = None  # still out of descriptors: the next EMFILE backs off

    def _accept_on_spare(self) -> socket.socket | None:
        """Out of descriptors: give up the spare for one waiting connection (None if that did not help)."""
        if self._spare is None or self._sock is None:
            return None
        os.close(self._spare)
        self._spare = None
        try:
            conn, _addr = self._sock.accept()
        except OSError:
            self.release_spare()
            return None
        conn.setblocking(False)
        return conn

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        delay = 0.0
        while self._sock is not None:
            try:
                conn, _addr = await loop.sock_accept(self._sock)
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRORS:
                    log.warning("control_accept_failed", error=f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(BACKOFF_FIRST)
                    continue
                self.failures += 1
                if self.relieve():
                    await asyncio.sleep(BACKOFF_FIRST)  # the closed connection's descriptor is freed meanwhile
                    continue
                spare = self._accept_on_spare()
                if spare is not None:
                    self.handle(spare, True)
                    continue
                delay = next_delay(delay)
                log.error("control_accept_failed", error=str(exc), detail=exhaustion(exc), pause=delay)
                await asyncio.sleep(delay)
                continue
            delay = 0.0
            conn.setblocking(False)
            self.handle(conn, False)
