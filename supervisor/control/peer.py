"""The control socket's peer as the kernel names it: uid and pid (``SO_PEERCRED``), pinned by a pidfd.

``SO_PEERCRED`` gives the pid of the process that connected, translated into
the daemon's pid namespace (0 when that process is not visible from it).  A
pid alone is a name that can be reused: the peer may exit and another process
get its number before the daemon reads ``/proc``.  So after reading ``/proc``
the server takes a **pidfd** of the peer with ``SO_PEERPIDFD`` (Linux 6.5),
which refers to the very process that called ``connect()`` (the kernel kept
it with the socket), and asks whether that process is still alive
(:meth:`Peer.alive`).  Alive, its pid cannot have been reused at any moment
since it connected, so what was read was the peer's; gone, the caller is
refused.  One descriptor at a time is used (a ``/proc`` file, then the pidfd),
so a daemon short of descriptors can still tell its callers.  Kernels before
6.5 have no ``SO_PEERPIDFD``: there ``pidfd_open`` is called *before* reading
``/proc`` (:data:`PIN_FIRST`), so only the microseconds between accepting and
that call are open to a reused pid.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import struct
from dataclasses import dataclass

_PEERCRED = struct.Struct("3i")
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


def _no_peerpidfd() -> bool:
    """True on a kernel without ``SO_PEERPIDFD`` (before 6.5)."""
    a, b = socket.socketpair(socket.AF_UNIX)
    try:
        os.close(a.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
        return False
    except OSError as exc:
        return exc.errno in (errno.ENOPROTOOPT, errno.EINVAL)
    finally:
        a.close()
        b.close()


#: Pin the peer before reading ``/proc`` (no ``SO_PEERPIDFD`` here: ``pidfd_open`` names whoever has the pid now).
PIN_FIRST = _no_peerpidfd()


@dataclass
class Peer:
    """One connection's peer; :meth:`close` the pidfd when done."""

    pid: int
    uid: int
    pidfd: int = -1

    def alive(self) -> bool:
        """The peer process still runs (or is not reaped yet), so its pid still names it."""
        if self.pidfd < 0:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # it exists (a signal to it is not allowed: another uid, refused anyway)
        return True

    def pin(self, sock: socket.socket) -> None:
        """Take the peer's pidfd.  ProcessLookupError when the peer is gone; OSError otherwise (EMFILE ...)."""
        if self.pidfd >= 0:
            return
        if PIN_FIRST:
            self.pidfd = os.pidfd_open(self.pid)
        else:
            self.pidfd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


def read_peer(sock: socket.socket) -> Peer:
    """The peer of ``sock`` (not pinned yet: :meth:`Peer.pin`); OSError when it has no credentials."""
    data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, _gid = _PEERCRED.unpack(data)
    return Peer(pid, uid)
