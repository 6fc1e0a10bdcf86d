"""The open-file limit: what agentd needs of it, and naming it when it runs out (issue 13, items 3 and 12).

Every agent costs the daemon a PTY master and two transcript files, every
control connection one descriptor, and the daemon itself some more (its log,
the pidfile, the socket, the event loop, inotify, the threads' files).  A
limit below that turns into confusing failures far from the cause: an
``accept()`` that fails in a loop, "out of pty devices" from a spawn.  This
module says plainly what ran out and what to do.

Mechanism and pure helpers only (no logging, no policy beyond the figures).
"""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

#: Descriptors the daemon holds whatever it supervises (log, pidfile, socket,
#: event loop, signal pipe, inotify, /proc reads, the to_thread workers' files).
BASE_FDS = 48
#: Per unit: the PTY master, the transcript's .log and .txt, a spawn's
#: transient pipe and pty slave, the cgroup's files.
FDS_PER_UNIT = 8

HOW_TO_RAISE = ("raise it: `ulimit -n 4096` in the shell that runs `agentd start`, "
                "or LimitNOFILE=4096 in the systemd service")

__all__ = ["BASE_FDS", "FDS_PER_UNIT", "FdLimitTooLow", "ensure_fd_limit", "exhaustion", "fds_needed",
           "fd_limit_message", "open_fds"]


class FdLimitTooLow(Exception):
    """The hard open-file limit is below what agentd needs (the message says what to do)."""


def fds_needed(units: int, connections: int) -> int:
    """Descriptors the daemon needs for ``units`` units and ``connections`` control connections."""
    return BASE_FDS + FDS_PER_UNIT * max(units, 1) + connections


def ensure_fd_limit(needed: int) -> tuple[int, int]:
    """Make the soft RLIMIT_NOFILE at least ``needed`` (up to the hard limit); the (old, new) soft limit.

    Raises :class:`FdLimitTooLow` when even the hard limit is below ``needed``.
    The soft limit is raised only as far as needed: agents inherit it, and some
    programs still use select(), which breaks above 1024.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft >= needed:
        return soft, soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise FdLimitTooLow(
            f"the open-file limit (RLIMIT_NOFILE) is {soft} (hard limit {hard}); agentd needs at least {needed} "
            f"for its units and control connections; {HOW_TO_RAISE}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return soft, needed


def open_fds(proc: Path = Path("/proc/self/fd")) -> int | None:
    """How many descriptors this process has open (None when that cannot be read: no fd left)."""
    try:
        return max(0, len(os.listdir(proc)) - 1)  # listdir's own descriptor is in the listing
    except OSError:
        return None


def fd_limit_message(what: str = "agentd") -> str:
    """'out of file descriptors: 1021 of the limit 1024 open ...; raise it ...'."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    count = open_fds()
    held = f"{count} of the limit {soft}" if count is not None else f"all of the limit {soft}"
    return f"out of file descriptors: {held} (RLIMIT_NOFILE) are open in {what}; {HOW_TO_RAISE}"


def _pty_figures(root: Path = Path("/proc/sys/kernel/pty")) -> tuple[int, int] | None:
    try:
        return int((root / "nr").read_text()), int((root / "max").read_text())
    except (OSError, ValueError):
        return None


def exhaustion(exc: BaseException, *, slack: int = 8) -> str | None:
    """What really ran out when ``exc`` ended a spawn or an accept, or None when nothing did.

    ``pty.fork`` hides the cause: when ``os.forkpty`` fails (EMFILE) it falls
    back to the old BSD pty names and raises ``OSError('out of pty devices')``
    without an errno.  So without an errno the descriptors and the kernel's
    pty count are looked at: close to the fd limit means the fd limit.
    """
    if not isinstance(exc, OSError):
        return None
    if exc.errno == errno.EMFILE:
        return fd_limit_message()
    if exc.errno == errno.ENFILE:
        return "the system's open-file table is full (ENFILE: fs.file-max); close files or raise fs.file-max"
    if exc.errno is None and "pty devices" in str(exc):
        count = open_fds()
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if count is None or (soft != resource.RLIM_INFINITY and count + slack >= soft):
            return fd_limit_message()
        ptys = _pty_figures()
        if ptys is not None and ptys[0] >= ptys[1]:
            return f"out of pty devices: {ptys[0]} of kernel.pty.max = {ptys[1]} in use; raise kernel.pty.max"
    return None
