"""Processes: who a process is, how it ended, its tree, and the one way agentd ends processes.

* :class:`ProcessRecord` names a process across pid reuse (pid + start time);
  the pidfile holds the daemon's, ``agents.json`` one per agent process.
* :class:`ExitInfo` is how a process ended (an exit code or a signal).
* :func:`live_tree`: a process tree recorded by pid and
  start time, so descendants reparented after their leader died are found.
* :func:`end_processes` is the single "end these processes" mechanism:
  SIGTERM (and SIGCONT, so a stopped process sees it) to the group and every
  member, wait up to a timeout, then SIGKILL and wait again.  Every path that
  ends agents (a stop, a respawn, leftovers of a crashed session or daemon)
  calls it; none writes its own TERM/KILL loop.

psutil is imported lazily: ``agentd status`` only needs the pidfile, and the
pidfile only needs :class:`ProcessRecord`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import psutil

#: Seconds to wait for processes to vanish after SIGKILL.
KILL_WAIT = 5.0


@dataclass(frozen=True)
class ProcessRecord:
    """Identity of a process that survives pid reuse: pid plus start time."""

    pid: int
    create_time: float

    def alive(self) -> psutil.Process | None:
        """The running process this record names, or None (gone, a zombie, or the pid reused)."""
        import psutil

        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 0.05:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            return None


@dataclass(frozen=True)
class ExitInfo:
    """How a process ended: an exit code or a signal number."""

    code: int | None = None
    signal: int | None = None

    @classmethod
    def from_wait_status(cls, status: int) -> ExitInfo:
        if os.WIFSIGNALED(status):
            return cls(signal=os.WTERMSIG(status))
        return cls(code=os.waitstatus_to_exitcode(status))

    @property
    def success(self) -> bool:
        return self.signal is None and self.code == 0

    def describe(self) -> str:
        if self.signal is not None:
            try:
                return f"signal {signal.Signals(self.signal).name}"
            except ValueError:
                return f"signal {self.signal}"
        return f"exit {self.code}"


def record_of(proc: psutil.Process) -> ProcessRecord | None:
    import psutil

    try:
        return ProcessRecord(proc.pid, proc.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def live_tree(records: Iterable[ProcessRecord]) -> list[psutil.Process]:
    return [p for p in (r.alive() for r in records) if p is not None]


def descendants(root: psutil.Process, children_of: Mapping[int, list[int]] | None = None) -> list[psutil.Process]:
    """``root`` and its descendants now (from ``children_of`` when given: one /proc pass for many trees)."""
    import psutil

    procs = [root]
    try:
        if children_of is None:
            procs.extend(root.children(recursive=True))
            return procs
        stack = list(children_of.get(root.pid, ()))
        while stack:
            pid = stack.pop()
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
            stack.extend(children_of.get(pid, ()))
    except psutil.NoSuchProcess:
        pass
    return procs


def group_members(pgid: int, leader_ctime: float) -> list[psutil.Process]:
    """Processes still in process group ``pgid`` that are not older than its leader."""
    import psutil

    if pgid <= 1:
        return []
    found = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["create_time"] >= leader_ctime - 0.05:
                found.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return found


def signal_processes(procs: Iterable[psutil.Process], sig: int) -> None:
    import psutil

    for proc in procs:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            pass


def kill_group(pgid: int, sig: int) -> None:
    if pgid <= 1:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def running(proc: psutil.Process) -> bool:
    """True while ``proc`` runs (a zombie counts as gone)."""
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


async def wait_gone(
    procs: list[psutil.Process], timeout: float, *, clock: Callable[[], float] = time.monotonic, poll: float = 0.05
) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds until every process in ``procs`` is gone; return the survivors."""
    deadline = clock() + timeout
    remaining = list(procs)
    while remaining:
        remaining = [p for p in remaining if running(p)]
        if not remaining or clock() >= deadline:
            break
        await asyncio.sleep(poll)
    return remaining


async def end_processes(
    procs: list[psutil.Process],
    timeout: float,
    *,
    pgid: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> list[psutil.Process]:
    """SIGTERM (+ SIGCONT) to group ``pgid`` and ``procs``, wait ``timeout``, then SIGKILL and wait.

    Returns the processes that were still alive at the SIGKILL (empty when
    SIGTERM was enough), for the caller's log.
    """
    for sig in (signal.SIGTERM, signal.SIGCONT):
        kill_group(pgid, sig)
        signal_processes(procs, sig)
    survivors = await wait_gone(procs, timeout, clock=clock)
    if survivors:
        kill_group(pgid, signal.SIGKILL)
        signal_processes(survivors, signal.SIGKILL)
        await wait_gone(survivors, KILL_WAIT, clock=clock)
    return survivors


def is_stopped(pid: int) -> bool:
    """``pid`` is stopped (SIGSTOP, a tracer: ``T`` or ``t`` in ``/proc/PID/stat``); False when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    end = stat.rfind(b")")  # "pid (comm) state ...": comm may hold ")"
    return stat[end + 2:end + 3] in (b"T", b"t")
