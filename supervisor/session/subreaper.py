"""The subreaper containment (:attr:`~.containment.Mode.SUBREAPER`), and :func:`discover`, which picks the mode.

Where no cgroup can be made, the daemon becomes a child subreaper and tells
the orphans it adopts apart by their environment (the rules are in
:mod:`.containment`'s docstring).  :func:`discover` tries a cgroup parent
first and falls back to this mode, saying why.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from .cgroup import KILL_WAIT, POLL, CgroupUnavailable, find_parent
from .containment import (
    ROOT_ENV,
    SESSION_ENV,
    CgroupContainment,
    Limits,
    Member,
    Mode,
    Usage,
    BaseContainment,
    check_name,
    rss_and_cpu,
)
from .lineage import set_child_subreaper
from .process import descendants, end_processes, record_of, running


class SubreaperContainment(BaseContainment):
    """:attr:`Mode.SUBREAPER`: the daemon adopts orphans; trees are recorded and adopted children attributed."""

    mode = Mode.SUBREAPER

    def __init__(self, project_root: Path, reason: str, *, marker: tuple[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        set_child_subreaper()
        self.project_root = Path(project_root)
        self.marker = marker  # (variable, value) that tells this daemon's agents from another daemon's of the project
        self.reason = reason
        self.detail = f"subreaper (no cgroup: {reason})"

    def add(self, unit: str, session_id: str, limits: Limits | None = None) -> Member:
        check_name(unit, session_id)
        member = Member(unit, session_id)
        if limits is not None:
            member.limits_unavailable = tuple(f"{f} not applied: no cgroup ({self.reason})" for f, _ in limits.files().values())
        self.members[member.name] = member
        return member

    def child_step(self, member: Member) -> None:
        return None  # the agent's environment (AGENTD_SESSION) is the marker

    def _adopted(self) -> list[psutil.Process]:
        """The daemon's live children that are neither a session's leader nor the daemon's own helpers."""
        leaders = {m.leader.pid for m in self.members.values() if m.leader}
        out = []
        for child in psutil.Process().children():
            if child.pid in leaders or not running(child):
                continue
            try:
                if os.getsid(child.pid) == self._sid:
                    continue
            except ProcessLookupError:
                continue
            out.append(child)
        return out

    def _owners(self, proc: psutil.Process) -> list[Member]:
        try:
            marker = proc.environ().get(SESSION_ENV)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            marker = None
        if marker:
            return [m for m in self.members.values() if m.session_id == marker]
        rec = record_of(proc)
        recorded = [m for m in self.members.values() if rec is not None and m.tree.get(proc.pid) == rec]
        return recorded or list(self.members.values())

    def processes(self, member: Member) -> list[psutil.Process]:
        """The session's live processes now; also refreshes its recorded tree."""
        roots = [p for p in (r.alive() for r in member.tree.values()) if p is not None]
        roots += [c for c in self._adopted() if member in self._owners(c)]
        found: dict[int, psutil.Process] = {}
        for root in roots:
            for proc in descendants(root):
                if running(proc):
                    found[proc.pid] = proc
        tree = {pid: rec for pid, p in found.items() if (rec := record_of(p)) is not None}
        if member.leader is not None and member.leader.alive() is not None:
            tree[member.leader.pid] = member.leader
        member.tree = tree
        return list(found.values())

    async def kill(self, member: Member) -> bool:
        """SIGKILL the session's processes until none is left (new ones included); True when none is."""
        deadline = self.clock() + KILL_WAIT
        while True:
            procs = self.processes(member)
            if not procs:
                self.reap_orphans()
                return True
            if self.clock() >= deadline:
                return False
            for proc in procs:
                try:
                    proc.send_signal(signal.SIGKILL)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            await asyncio.sleep(POLL)
            self.reap_orphans()

    def usage(self, member: Member) -> Usage:
        cpu, rss = rss_and_cpu(self.processes(member))
        return Usage(cpu, rss, "rss")

    def release(self, member: Member) -> None:
        self.members.pop(member.name, None)

    async def cleanup_leftovers(self, timeout: float = 2.0) -> list[str]:
        """End processes a crashed daemon left: any whose environment names this project (``AGENTD_ROOT``)
        and carries the daemon's ``marker`` when one is set (``agentd run-unit`` runs one daemon per unit).

        The daemon itself, its ancestors and the current sessions' processes
        are spared.  Returns one ``pid (name)`` per process ended.
        """
        spare = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
        for member in self.members.values():
            spare.update(p.pid for p in self.processes(member))
        target = str(self.project_root)
        found = []
        for proc in psutil.process_iter(["pid", "name"]):
            if proc.pid in spare:
                continue
            try:
                env = proc.environ() if running(proc) else {}
                if env.get(ROOT_ENV) == target and (self.marker is None or env.get(self.marker[0]) == self.marker[1]):
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                continue
        if found:
            await end_processes(found, timeout, clock=self.clock)
            self.reap_orphans()
        return [f"{p.pid} ({p.info.get('name')})" for p in found]

    def close(self) -> None:
        pass


def discover(project_root: Path, *, cgroup_parent: Path | None = None, use_cgroup: bool = True,
             instance: Path | None = None, marker: tuple[str, str] | None = None,
             clock: Callable[[], float] = time.monotonic) -> CgroupContainment | SubreaperContainment:
    """The containment for this daemon: a cgroup parent when one can be made, else the subreaper.

    Call once, in the daemon process, before the first spawn (the subreaper
    mode changes the calling process).  ``cgroup_parent`` skips detection;
    ``use_cgroup=False`` forces the subreaper (an opt-out, or tests).  Where
    several daemons serve one project (``agentd run-unit``), ``instance`` (the
    daemon's state directory) keys its parent group instead of the project,
    and ``marker`` tells its agents apart in subreaper mode, so that one
    daemon's start never ends another's sessions.
    """
    reason = "disabled by the settings"
    if use_cgroup:
        try:
            return CgroupContainment(find_parent(instance or project_root, given=cgroup_parent), clock=clock)
        except CgroupUnavailable as exc:
            reason = str(exc)
    return SubreaperContainment(project_root, reason, marker=marker, clock=clock)
