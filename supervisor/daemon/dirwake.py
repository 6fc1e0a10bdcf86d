"""Waking the daemon when a file arrives in a watched directory: raw inotify on the loop, no thread.

The inbox (:mod:`supervisor.daemon.inbox`) used to list every unit's inbox
five times a second, a thread hop and a ``stat`` per unit each time: with 50
idle agents that was most of the daemon's idle CPU (0.5 % of a core of
1.0 %).  :class:`DirWake` instead holds one inotify descriptor, read by the
event loop itself (``loop.add_reader``), with one non-recursive watch per
directory; a name the caller's ``wanted`` accepts, created, written or moved
into a watched directory, calls ``on_wake`` on the loop (``wanted(directory, name)``).  A kernel queue
overflow wakes too (something may have been missed); a watched directory
that is removed or replaced drops its watch (``forget``), and the caller
watches its successor.

Watches never follow a symbolic link (``IN_DONT_FOLLOW``, ``IN_ONLYDIR``):
an agent that swaps its inbox for a link makes agentd watch nothing of its
choosing.  The scope watcher (:mod:`supervisor.scope.watcher`) is watchdog's
recursive observer with threads of its own; this is the small, loop-side
case: a few flat directories, wake-ups only, no paths reported.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import os
import struct
from collections.abc import Callable

IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: What a watched directory reports: a file created, written whole or moved in; the directory itself gone.
MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("iIII")

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


class DirWake:
    """One inotify descriptor on the loop; ``watch(path)`` adds a flat directory.

    ``wanted(directory, name)`` says which names wake (the caller's own files, written into the same
    directories, should not); ``on_wake()`` runs on the loop, at most once per read of the queue.
    Raises OSError when inotify cannot be had (the caller then polls).
    """

    def __init__(self, on_wake: Callable[[], None],
                 wanted: Callable[[str, str], bool] = lambda _directory, _name: True) -> None:
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd = fd
        self.on_wake = on_wake
        self.wanted = wanted
        self._paths: dict[str, int] = {}  # path -> watch descriptor
        self._wds: dict[int, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self.fd, self._readable)

    @property
    def paths(self) -> list[str]:
        """The directories watched now."""
        return list(self._paths)

    def watching(self, path: str) -> bool:
        return path in self._paths

    def watch(self, path: str) -> bool:
        """Watch the directory ``path`` (not through a link); False when it is missing or not a directory."""
        wd = _lib().inotify_add_watch(self.fd, os.fsencode(path), MASK | IN_ONLYDIR | IN_DONT_FOLLOW)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
                return False
            raise OSError(err, f"inotify_add_watch {path}: {os.strerror(err)}")
        old = self._paths.get(path)
        if old is not None and old != wd:
            self._wds.pop(old, None)
        self._paths[path] = wd
        self._wds[wd] = path
        return True

    def forget(self, path: str) -> None:
        wd = self._paths.pop(path, None)
        if wd is not None:
            self._wds.pop(wd, None)
            _lib().inotify_rm_watch(self.fd, wd)

    def _readable(self) -> None:
        wake = False
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                break
            except OSError:
                wake = True  # unreadable: let the caller look at everything
                break
            if not data:
                break
            wake = self._parse(data) or wake
        if wake:
            self.on_wake()

    def _parse(self, data: bytes) -> bool:
        """The events in ``data``; True when one of them should wake the caller."""
        wake, at = False, 0
        while at + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
            name = data[at + _EVENT.size:at + _EVENT.size + size].split(b"\0", 1)[0]
            at += _EVENT.size + size
            if mask & IN_Q_OVERFLOW:
                wake = True
            elif mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                path = self._wds.pop(wd, None)
                if path is not None and self._paths.get(path) == wd:
                    del self._paths[path]  # gone or replaced: the caller watches what is there now
                wake = True
            elif name and wd in self._wds and self.wanted(self._wds[wd], os.fsdecode(name)):
                wake = True
        return wake

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
            self._loop = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self._paths.clear()
        self._wds.clear()
