"""The daemon's containment: chosen once at start, its leftovers ended, its orphans reaped, its refusals judged.

:meth:`Confinement.discover` runs in the daemon process before any unit
starts (the subreaper mode changes the calling process):
:func:`supervisor.session.subreaper.discover` picks ``cgroup`` (a cgroup v2
group per session) or ``subreaper``.  Each session then joins it in
:func:`supervisor.adapters.driver.launch`, and :meth:`Driver.end
<supervisor.adapters.driver.Driver.end>` ends it through it.  The arbiter
calls:

* :meth:`reap` on SIGCHLD (the subreaper's adopted orphans are collected, and
  the sessions' trees recorded again, since an orphan was just made);
* :meth:`tick` each second: the same reaping, and each fenced session's new
  refusals handed to the scope guard (violations known with certainty);
* :meth:`shutdown` last: whatever a stopped unit left is ended, the groups removed.

The control server asks :meth:`caller` who each peer is (the
:class:`~supervisor.control.access.Callers` Protocol): the session whose
process tree the peer is in (:func:`supervisor.session.lineage.trace`), never
what the peer says.  For that, :meth:`discover` makes the daemon a child
subreaper in both modes (an agent's orphan is adopted by the daemon, not by
init, so it stays in the daemon's tree) and names the process
:data:`~supervisor.session.lineage.DAEMON_COMM` (so another daemon knows its agents).

The leftovers of a crashed daemon are ended by
:func:`supervisor.daemon.leftovers.end_contained` before the ``agents.json`` pass.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..control.access import Caller
from ..session import lineage
from ..session.containment import CgroupContainment, Containment, Mode
from ..session.subreaper import discover
from ..session.fence import availability

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from .unit import UnitSupervisor

log = structlog.get_logger("agentd")


class Refusals(Protocol):
    """Where the kernel's refusals go (the scope guard)."""

    def refused(self, unit: str, paths: list[Path]) -> None: ...


class Confinement:
    """The containment of every session of this daemon (see the module doc)."""

    def __init__(self, containment: Containment, spawn: Callable[[Coroutine[Any, Any, Any]], Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.containment = containment
        self.spawn = spawn
        self.clock = clock
        self._refreshing = False
        self._printed: dict[str, int] = {}  # session id -> its transcript's bytes when its refusals were last read

    @classmethod
    def discover(cls, settings: Settings, spawn: Callable[[Coroutine[Any, Any, Any]], Any],
                 clock: Callable[[], float] = time.monotonic) -> Confinement:
        """Pick the mode for this daemon (call once, in the daemon process, before any spawn)."""
        containment = discover(settings.project_root, cgroup_parent=settings.cgroup_parent,
                               use_cgroup=settings.containment == "auto", instance=settings.state_path,
                               marker=("AGENTD_SOCKET", str(settings.socket_path)), clock=clock)
        if isinstance(containment, CgroupContainment):
            containment.adopt_orphans()
        lineage.mark_daemon()
        log.info("containment", mode=containment.mode.value, detail=containment.detail)
        return cls(containment, spawn, clock)

    @property
    def mode(self) -> Mode:
        return self.containment.mode

    # ------------------------------------------------------------------ events
    def reap(self) -> None:
        """On SIGCHLD: collect adopted orphans and (subreaper mode) record the sessions' trees again."""
        self._reap_orphans()
        if self.mode is not Mode.SUBREAPER:
            return
        if not self._refreshing and self.containment.members:
            self._refreshing = True
            self.spawn(self._refresh())

    def _reap_orphans(self) -> None:
        if not _exited_child():
            return  # no child has exited: nothing to look for in /proc (each second, with 50 agents)
        try:
            reaped = self.containment.reap_orphans()
        except OSError as exc:  # /proc unreadable (out of descriptors): the next SIGCHLD or tick reaps them
            log.error("orphans_not_reaped", error=f"{type(exc).__name__}: {exc}")
            return
        for pid, info in reaped:
            log.info("orphan_reaped", pid=pid, exit=info.describe())

    async def _refresh(self) -> None:
        members = list(self.containment.members.values())
        try:
            await asyncio.to_thread(lambda: [self.containment.processes(m) for m in members])
        finally:
            self._refreshing = False

    async def tick(self, units: Iterable[UnitSupervisor], guard: Refusals) -> None:
        """Each second: reap adopted orphans; hand each fenced session's new refusals to the guard.

        Only a session that printed since its refusals were last read is read again (a refusal is a line
        of its output, or comes with one): 50 idle agents cost no thread hop and no file read per second.
        """
        self._reap_orphans()
        printed: dict[str, int] = {}
        fenced = []
        for u in units:
            driver = u.driver
            if driver is None or not driver.fenced:
                continue
            size = printed[driver.session_id] = driver.transcript_bytes
            if size != self._printed.get(driver.session_id):
                fenced.append((u.name, driver))
        self._printed = printed  # ended sessions are forgotten
        if not fenced:
            return
        found = await asyncio.to_thread(lambda: [(name, driver.refusals()) for name, driver in fenced])
        for name, paths in found:
            if paths:
                guard.refused(name, paths)

    async def shutdown(self, timeout: float) -> None:
        """End whatever the stopped sessions left, remove their groups, then the project's parent group."""
        members = list(self.containment.members.values())
        for member in members:
            ended = await self.containment.end(member, timeout)
            log.warning("containment_leftovers_ended", unit=member.unit, session=member.session_id,
                        killed=list(ended.killed), empty=ended.empty)
            try:
                self.containment.release(member)
            except OSError as exc:
                log.error("containment_release_failed", unit=member.unit, error=str(exc))
        self.containment.close()

    # ------------------------------------------------------------------ callers
    def caller(self, pid: int) -> Caller:
        """Who process ``pid`` is to the control socket (blocking; called off the loop).

        ProcessLookupError when it is gone; OSError when ``/proc`` cannot be read.
        """
        members = {m.leader.pid: m for m in list(self.containment.members.values())
                   if m.leader is not None and m.leader_start is not None}
        found = lineage.trace(pid, os.getpid(), {p: m.leader_start for p, m in members.items()
                                                  if m.leader_start is not None})
        if found.kind == "session" and found.leader in members:
            member = members[found.leader]
            return Caller.of_unit(member.unit, member.session_id, pid)
        if found.kind == "outside":
            return Caller.operator(pid, found.why)
        return Caller.stray(pid, found.why)

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """The daemon's ``containment`` and ``landlock`` lines in ``agentd status``."""
        have = availability()
        return {"containment": {"mode": self.mode.value, "detail": self.containment.detail},
                "landlock": f"ABI {have.abi}" if have.available else f"unavailable: {have.reason}"}


def _exited_child() -> bool:
    """Whether a child of this process has exited and waits to be reaped (peeked at, not reaped: ``WNOWAIT``)."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # no child at all
        return False
