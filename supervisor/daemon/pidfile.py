"""The daemon's pidfile: a locked file holding ``PID START_TIME``.

The lock, not the number, decides liveness: the daemon holds an exclusive
``flock`` for its whole life, and the kernel drops it when the process dies,
however it dies.  The start time next to the pid lets a reader tell the daemon
from an unrelated process that reused the pid.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..session.process import ProcessRecord  # imported when used: `agentd status` needs only is_locked()

# psutil is imported where it is used: `agentd status` only needs is_locked().


class AlreadyRunning(Exception):
    """Another daemon holds the pidfile lock."""


def read_pidfile(path: Path) -> ProcessRecord | None:
    from ..session.process import ProcessRecord

    try:
        fields = path.read_text().split()
        return ProcessRecord(int(fields[0]), float(fields[1]))
    except (OSError, ValueError, IndexError):
        return None


def is_locked(path: Path) -> bool:
    """True when a live daemon holds the pidfile."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def daemon_alive(pidfile: Path, socket_path: Path) -> bool:
    """True when a live daemon holds the pidfile, or, where the pidfile cannot be seen (inside a
    fence's view, which hides agentd's state directory but for the control socket), when the
    socket accepts a connection."""
    if is_locked(pidfile):
        return True
    if pidfile.parent.is_dir() and os.path.lexists(pidfile):
        return False  # seen and not held: no daemon
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            sock.connect(str(socket_path))
        except OSError:
            return False
    return True


class PidFile:
    """Held by the running daemon."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            info = read_pidfile(self.path)
            who = f"pid {info.pid}" if info else "another process"
            raise AlreadyRunning(f"agentd is already running ({who}; pidfile {self.path})") from None
        import psutil

        me = psutil.Process()
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{me.pid} {me.create_time():.3f}\n".encode(), 0)
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            os.close(self._fd)
            self._fd = -1
