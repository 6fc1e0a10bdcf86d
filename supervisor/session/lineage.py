"""Which session of this daemon a process belongs to, read from the kernel's process tree (issue 25 §2).

The control socket asks :func:`trace` about each peer (the pid ``SO_PEERCRED``
names, :mod:`supervisor.control.peer`); :mod:`supervisor.control.access`
turns the answer into rights.  It trusts only what an agent cannot change:

* **ancestry**: a process's parent is the one that forked it or, once that one
  has died, the nearest *child subreaper* above it.  The daemon is a child
  subreaper in both containment modes (:meth:`supervisor.daemon.confinement.Confinement.discover`),
  so no process of an agent leaves the daemon's tree while the daemon lives:
  an orphan is adopted by the daemon, never by init;
* **the session id**: ``setsid()`` only starts a new session, with the
  caller's own pid as its id; no process can join another's.  Every session
  leader starts its own at spawn (the PTY), so a process whose session id is
  a live leader's pid descends from that leader, however far it wandered;
* **a process's own name** (``comm``): only a thread of that process can set
  it.  The daemon names itself :data:`DAEMON_COMM` (:func:`mark_daemon`), so
  an agent of another agentd daemon is known by that ancestor.

Not used, because an agent forges them: its environment (``AGENTD_UNIT``,
``AGENTD_SESSION``), the request's arguments, and its **cgroup**.  ``clone3()``
with ``CLONE_INTO_CGROUP`` starts a child in any group whose common ancestor's
``cgroup.procs`` the agent's uid may write (every group, as root; every group
of a delegated subtree, as its user), and Landlock does not mediate it: on
Linux 6.18 a fenced agent put a child into the root group and into another
session's group.  The group still finds and ends a session's processes; it
does not say who a process is.

:func:`trace` answers with a :class:`Trace`:

* ``outside``: not a descendant of this daemon: the operator.  Unless it
  descends from *another* agentd daemon: then it is ``stray``, except when
  this daemon runs in that same session of that daemon (an agent running
  agentd's own tests commands the daemons it started);
* ``session``: it descends from a session leader, through live parents or by
  its session id: ``leader`` is that leader's pid;
* ``stray``: it descends from this daemon but from no session that can be
  proved: a ``setsid`` orphan (it left its session and its parent died, so
  nothing unforgeable ties it to one), or a child of the daemon's own helpers.

Also here, the rest of what the daemon does with the tree: becoming a child
subreaper (:func:`set_child_subreaper`), reaping the orphans it adopted
(:func:`reap_adopted`, from ``/proc/self/task/*/children``, not a scan of
``/proc``), and naming itself (:func:`mark_daemon`).

Races: each step up the tree is checked (the child's parent is read again
after the parent itself: had the parent died meanwhile, the child would have
been reparented), so a parent whose pid was reused is never followed; the walk
starts again.  A tree deeper than :data:`MAX_DEPTH` is ``stray``, never
``outside``.  The peer itself is pinned by the caller of :func:`trace` (a pidfd).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: The daemon's process name (``/proc/PID/comm``, 15 bytes at most): how another daemon knows it is one.
DAEMON_COMM = "agentd-daemon"
#: Deepest process tree walked; deeper is an agent's doing (``stray``).
MAX_DEPTH = 4096
#: Walks started again when the tree changed under one, before giving up.
ATTEMPTS = 8
PR_SET_NAME = 15
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


@dataclass(frozen=True)
class Stat:
    """The fields of ``/proc/PID/stat`` the trace needs."""

    pid: int
    comm: str
    state: str
    ppid: int
    sid: int
    start: int  # clock ticks after boot


def read_stat(pid: int) -> Stat:
    """``/proc/PID/stat``; ProcessLookupError when there is no such process."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessLookupError(pid) from None
    try:
        data = os.read(fd, 4096)  # one read: the kernel writes the line whole
    except ProcessLookupError:  # ESRCH: gone between the open and the read
        raise ProcessLookupError(pid) from None
    finally:
        os.close(fd)
    left, right = data.find(b"("), data.rfind(b")")
    fields = data[right + 2:].split()
    if left < 0 or right < left or len(fields) < 20:
        raise ProcessLookupError(pid)
    return Stat(pid, data[left + 1:right].decode(errors="replace"), fields[0].decode(), int(fields[1]),
                int(fields[3]), int(fields[19]))


class _Moved(Exception):
    """The tree changed during a walk (a parent died): walk again."""


def chain(pid: int, stop: int, read: Callable[[int], Stat] = read_stat) -> list[Stat]:
    """``pid`` and its ancestors, nearest first, up to ``stop`` (included) or the top of the tree.

    ProcessLookupError when ``pid`` is gone, or the tree kept changing for :data:`ATTEMPTS` walks.
    """
    for _ in range(ATTEMPTS):
        try:
            return _walk(pid, stop, read)
        except _Moved:
            continue
    raise ProcessLookupError(f"the process tree above pid {pid} kept changing")


def _walk(pid: int, stop: int, read: Callable[[int], Stat]) -> list[Stat]:
    links = [read(pid)]
    while links[-1].pid != stop and links[-1].ppid > 0 and len(links) <= MAX_DEPTH:
        child = links[-1]
        try:
            parent = read(child.ppid)
            again = read(child.pid)
        except ProcessLookupError:
            raise _Moved from None
        if again.ppid != child.ppid or again.start != child.start:
            raise _Moved
        links.append(parent)
    return links


@dataclass(frozen=True)
class Trace:
    """Where a process stands to this daemon (see the module doc)."""

    kind: str  # "outside" | "session" | "stray"
    why: str
    leader: int | None = None  # kind "session": the session leader's pid


def trace(pid: int, me: int, leaders: Mapping[int, int], read: Callable[[int], Stat] = read_stat) -> Trace:
    """Where process ``pid`` stands to the daemon ``me`` whose sessions' leaders are ``leaders``
    (pid -> start in clock ticks, :attr:`Stat.start`: a pid given to another process has another start).

    ProcessLookupError when ``pid`` is gone.
    """
    links = chain(pid, me, read)
    if links[0].pid == me:
        return Trace("outside", "the daemon itself")
    if links[-1].pid == me:
        return _below(links[:-1], links[-1], leaders, read)
    if len(links) > MAX_DEPTH:
        return Trace("stray", f"more than {MAX_DEPTH} processes deep")
    for i, link in enumerate(links[1:], 1):
        if link.comm == DAEMON_COMM:
            theirs = links[i - 1]
            mine = _child_of(link, me, read)
            if mine is not None and (mine.pid, mine.start) == (theirs.pid, theirs.start):
                return Trace("outside", f"this daemon runs in the same session of agentd daemon {link.pid}")
            return Trace("stray", f"an agent of another agentd daemon (pid {link.pid})")
    return Trace("outside", "not a descendant of the daemon")


def _below(links: list[Stat], daemon: Stat, leaders: Mapping[int, int], read: Callable[[int], Stat]) -> Trace:
    """A descendant of the daemon: ``links`` from the process up to the daemon's child."""
    top = links[-1]
    if leaders.get(top.pid) == top.start:
        return Trace("session", "descends from the session's agent", top.pid)
    for link in links:
        if link.sid in leaders and _is_leader(link.sid, leaders[link.sid], read):
            return Trace("session", "in the session's process session (setsid is its only way out)", link.sid)
    if top.sid == daemon.sid:
        return Trace("stray", "started by the daemon's own helper, outside every session")
    return Trace("stray", "an orphan that left its session (setsid) and lost its parent: nothing ties it to one")


def _is_leader(pid: int, start: int, read: Callable[[int], Stat]) -> bool:
    """The recorded leader still holds ``pid`` (alive or not yet reaped), so session ``pid`` is its."""
    try:
        return read(pid).start == start
    except ProcessLookupError:
        return False


def _child_of(daemon: Stat, me: int, read: Callable[[int], Stat]) -> Stat | None:
    """The process below ``daemon`` on this process's own path up to it, or None when it is no ancestor of ours."""
    try:
        mine = chain(me, daemon.pid, read)
    except ProcessLookupError:
        return None
    if len(mine) >= 2 and (mine[-1].pid, mine[-1].start) == (daemon.pid, daemon.start):
        return mine[-2]
    return None


def _prctl() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.prctl
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def set_child_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (``PR_SET_CHILD_SUBREAPER``)."""
    if _prctl()(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def is_child_subreaper() -> bool:
    value = ctypes.c_int(0)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0 and value.value != 0


def reap_adopted(skip: set[int], own_sid: int, spare_leaders: bool = False) -> list[tuple[int, int]]:
    """``waitpid`` each dead child of this process but those in ``skip`` and those in session ``own_sid``;
    ``(pid, wait status)`` of each one reaped.  OSError when ``/proc`` cannot be read.

    ``spare_leaders``: also leave every dead session leader (pid == its session id): a child of our own
    spawned with ``start_new_session`` whose pid its spawner does not know yet (asyncio's spawn awaits;
    a check that exits at once would otherwise be reaped here, and asyncio report exit 255 for it)."""
    found = children()
    if found is None:
        import psutil

        found = [c.pid for c in psutil.Process().children()]
    reaped = []
    for pid in found:
        if pid in skip:
            continue
        try:
            stat = read_stat(pid)
            if stat.state != "Z" or stat.sid == own_sid or (spare_leaders and stat.sid == pid):
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
        except (ProcessLookupError, ChildProcessError):
            continue
        if done:
            reaped.append((done, status))
    return reaped


def mark_daemon() -> None:
    """Name this process :data:`DAEMON_COMM` and make it undumpable (call in the daemon, once).

    Undumpable (``PR_SET_DUMPABLE`` 0): a process of the same uid without
    ``CAP_SYS_PTRACE`` can no longer ptrace the daemon, nor read its memory,
    environment or descriptors through ``/proc/PID/`` (they belong to root
    now).  agentd's fence keeps fenced agents out anyway; this holds against
    the agents it does not fence (a Codex unit in its own sandbox, ``fence =
    "off"``).  Not inherited across exec: agents and helpers are dumpable
    again (a child step that needs its own ``/proc/self`` before exec sets it
    back, :mod:`.mountview`).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NAME, DAEMON_COMM.encode(), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NAME): {os.strerror(err)}")
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_DUMPABLE): {os.strerror(err)}")


def children() -> list[int] | None:
    """This process's children from ``/proc/self/task/*/children`` (every thread's), without a scan of
    ``/proc``; None where the kernel has no such file (``CONFIG_PROC_CHILDREN``)."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return None
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                out.extend(int(p) for p in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return out
