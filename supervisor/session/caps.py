"""The capabilities a fenced agent keeps: Docker's ordinary set, every other one dropped before exec.

Landlock mediates file access, not what a capability allows: a fenced process
of root with ``CAP_SYS_ADMIN`` could type into another unit's terminal
(``TIOCSTI``), mount or ``setns``; with ``CAP_MKNOD`` make a block device in its
scope that is the whole disk.  So :func:`drop_capabilities`, called by the
fence in the forked child (:class:`~.fence.Fence`), clears the inheritable and
ambient sets and, where it may (root), leaves only :data:`KEEP_CAPS` in the
bounding set.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable

#: Capabilities a fenced process of root keeps (Docker's default set less ``CAP_MKNOD``): what ordinary
#: root programs use.  Every other one leaves the bounding set before exec: ``CAP_SYS_ADMIN`` (``TIOCSTI``
#: into another unit's terminal, mounts, ``setns``), ``CAP_MKNOD`` (a block device made in the scope is
#: the whole disk, beneath the fence's notice), ``CAP_SYS_MODULE``, ``CAP_SYS_RAWIO``, ``CAP_DAC_READ_SEARCH``
#: (``open_by_handle_at``), ``CAP_SYS_PTRACE``, ``CAP_BPF`` ... none of which Landlock mediates.
KEEP_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31})
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4


def last_cap() -> int:
    """The highest capability number this kernel knows."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 40


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAP_V3 = 0x20080522


def drop_capabilities(prctl: Callable[..., int], libc: ctypes.CDLL, last: int) -> None:
    """No inheritable or ambient capability, and (where this process may: root) only :data:`KEEP_CAPS` left in
    the bounding set, so what runs after exec, root or not, has none of the others."""
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_V3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) == 0 and (data[0].inheritable or data[1].inheritable):
        data[0].inheritable = data[1].inheritable = 0
        if libc.capset(ctypes.byref(header), data) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"capset (inheritable): {os.strerror(err)}")
    if data[0].effective & (1 << 8) == 0:  # no CAP_SETPCAP (not root): the bounding set is not ours to change
        return
    for cap in range(last + 1):
        if cap not in KEEP_CAPS and prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err != errno.EINVAL:  # a capability this kernel does not know
                raise OSError(err, f"prctl(PR_CAPBSET_DROP, {cap}): {os.strerror(err)}")
