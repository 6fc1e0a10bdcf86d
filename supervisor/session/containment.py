"""Containment: every process a session starts is found and ended, in one of two modes.

* :attr:`Mode.CGROUP` — each session in its own cgroup v2 group
  (:mod:`.cgroup`): the agent joins it before exec, so every descendant,
  ``setsid`` or started hours later, is in it; ``cgroup.kill`` ends them all;
  ``cpu.stat`` (and ``memory.current`` when the memory controller is on) give
  the session's figures; optional :class:`Limits`.
* :attr:`Mode.SUBREAPER` — where no group can be made (an unprivileged user
  without delegation).  The daemon becomes a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so an orphan of any session is reparented to
  the daemon instead of init, and stays findable.  A session's processes are
  then: the recorded tree (by pid and start time) and its descendants, plus
  the daemon's adopted children that are not another session's.  An adopted
  child is told apart by its environment (``AGENTD_SESSION``, which
  :mod:`supervisor.config.environment` gives every agent); one with no marker
  (its environment was wiped) and in no session's recorded tree counts for
  every session, so whichever stops first ends it.  The daemon's own helpers
  (same session id as the daemon) are never counted.  Limits: a process that
  wiped its environment and whose parent died before a refresh is attributed
  by that rule, not by ancestry; nothing is found after the daemon itself
  dies (its orphans go to init): :meth:`.subreaper.SubreaperContainment.cleanup_leftovers`
  finds those by their ``AGENTD_ROOT``.

Both modes offer the same operations (:class:`Containment`): add a session,
the child step that places the agent, list its processes, end it (TERM, wait,
KILL, then everything left), usage figures, release, leftovers of a crashed
daemon, and reaping adopted orphans.  The subreaper mode is :mod:`.subreaper`, and its
:func:`~.subreaper.discover` picks the mode.

The daemon is a child subreaper in the cgroup mode too (:meth:`CgroupContainment.adopt_orphans`):
not to find processes (the group does that) but so that no agent process ever
leaves the daemon's process tree, which is what tells the control socket's
callers apart (:mod:`.lineage`; a group is no proof of who a process is).
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psutil

from . import lineage
from .lineage import is_child_subreaper, reap_adopted, set_child_subreaper  # noqa: F401 - is_child_subreaper: re-exported
from .cgroup import KILL_WAIT, Group, JoinStep, Parent, enable_controllers
from .process import ExitInfo, ProcessRecord, end_processes

SESSION_ENV = "AGENTD_SESSION"
ROOT_ENV = "AGENTD_ROOT"


class Mode(enum.Enum):
    CGROUP = "cgroup"
    SUBREAPER = "subreaper"


@dataclass(frozen=True)
class Limits:
    """Per-session resource limits (``[resources]``); applied only where the controller exists."""

    memory_max: int | None = None  # bytes, memory.max
    cpu_weight: int | None = None  # 1..10000, cpu.weight (100 is the default share)

    def __post_init__(self) -> None:
        if self.memory_max is not None and self.memory_max <= 0:
            raise ValueError("memory_max must be a positive number of bytes")
        if self.cpu_weight is not None and not 1 <= self.cpu_weight <= 10000:
            raise ValueError("cpu_weight must be between 1 and 10000")

    def files(self) -> dict[str, tuple[str, str]]:
        """controller -> (file, value) for the limits that are set."""
        out: dict[str, tuple[str, str]] = {}
        if self.memory_max is not None:
            out["memory"] = ("memory.max", str(self.memory_max))
        if self.cpu_weight is not None:
            out["cpu"] = ("cpu.weight", str(self.cpu_weight))
        return out


@dataclass(frozen=True)
class Usage:
    """A session's figures for ``status``: CPU seconds, memory bytes and where the memory figure came from."""

    cpu_seconds: float
    memory_bytes: int
    memory_source: str  # "memory.current" (the cgroup's, page cache included) or "rss" (sum over live processes)


@dataclass
class Member:
    """One session under containment (the daemon keeps it next to its Session)."""

    unit: str
    session_id: str
    group: Group | None = None
    leader: ProcessRecord | None = None
    tree: dict[int, ProcessRecord] = field(default_factory=dict)
    limits_applied: tuple[str, ...] = ()
    limits_unavailable: tuple[str, ...] = ()  # one reason per limit that could not be applied
    leader_start: int | None = None  # the leader's start in clock ticks after boot (/proc/PID/stat)

    @property
    def name(self) -> str:
        return f"{self.unit}@{self.session_id}"


@dataclass(frozen=True)
class Ended:
    """How :meth:`Containment.end` went: pids that needed SIGKILL, and whether nothing is left."""

    killed: tuple[int, ...]
    empty: bool


class Containment(Protocol):
    """What the daemon needs of either mode."""

    mode: Mode
    detail: str  # for status: where the groups are, or why there are none
    members: dict[str, Member]  # the sessions added and not yet released, by Member.name

    def add(self, unit: str, session_id: str, limits: Limits | None = None) -> Member: ...
    def child_step(self, member: Member) -> JoinStep | None: ...
    def started(self, member: Member, pid: int, create_time: float) -> None: ...
    def processes(self, member: Member) -> list[psutil.Process]: ...
    def empty(self, member: Member) -> bool: ...
    async def end(self, member: Member, timeout: float) -> Ended: ...
    async def kill(self, member: Member) -> bool: ...
    def usage(self, member: Member) -> Usage: ...
    def release(self, member: Member) -> None: ...
    async def cleanup_leftovers(self) -> list[str]: ...
    def reap_orphans(self) -> list[tuple[int, ExitInfo]]: ...
    def close(self) -> None: ...


def check_name(unit: str, session_id: str) -> None:
    for what, value in (("unit", unit), ("session id", session_id)):
        if not value or "/" in value or "\n" in value or "@" in value or value.startswith("."):
            raise ValueError(f"{what} {value!r} cannot name a cgroup (no '/', '@', newline or leading '.')")


def rss_and_cpu(procs: list[psutil.Process]) -> tuple[float, int]:
    cpu, rss = 0.0, 0
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                cpu += times.user + times.system
                rss += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return cpu, rss


class BaseContainment:
    mode: Mode
    detail: str

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.members: dict[str, Member] = {}
        self.clock = clock
        self._sid = os.getsid(0)

    def reap_orphans(self) -> list[tuple[int, ExitInfo]]:
        """Collect the exit status of every adopted orphan that died (call on SIGCHLD and on the tick).

        Only zombies that are not a session's leader (the Session reaps those)
        and not in the daemon's own session (its helpers, reaped by whoever
        started them) are collected, each with its own ``waitpid``.  While a
        member's leader is being spawned (added, not yet :meth:`started`), no
        dead session leader is collected: it may be that one (a plan check
        that exits before its spawn returned), which its spawner reaps.
        """
        leaders = {m.leader.pid for m in self.members.values() if m.leader}
        spawning = any(m.leader is None for m in self.members.values())  # a leader whose pid is not known yet
        return [(pid, ExitInfo.from_wait_status(status))
                for pid, status in reap_adopted(leaders, self._sid, spare_leaders=spawning)]

    def processes(self, member: Member) -> list[psutil.Process]:  # pragma: no cover - overridden
        raise NotImplementedError

    async def kill(self, member: Member) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def empty(self, member: Member) -> bool:
        return not self.processes(member)

    def started(self, member: Member, pid: int, create_time: float) -> None:
        """Record the leader once spawned (``create_time`` from psutil, 0 when it already died).

        Its start in clock ticks too (``leader_start``): what tells the control socket's callers apart
        compares that, exactly, and never a wall-clock time a clock step would move.
        """
        member.leader = ProcessRecord(pid, create_time)
        member.tree[pid] = member.leader
        try:
            member.leader_start = lineage.read_stat(pid).start  # the daemon's child: its pid is not reused yet
        except (ProcessLookupError, OSError):
            member.leader_start = None

    async def end(self, member: Member, timeout: float) -> Ended:
        """SIGTERM (+SIGCONT) every process and the leader's group, wait ``timeout``, SIGKILL, then end what is left.

        The last step catches processes started during the wait.
        """
        procs = self.processes(member)
        leader = member.leader.alive() if member.leader else None
        survivors = await end_processes(procs, timeout, pgid=leader.pid if leader else 0, clock=self.clock)
        empty = await self.kill(member)
        return Ended(tuple(p.pid for p in survivors), empty)


class CgroupContainment(BaseContainment):
    """:attr:`Mode.CGROUP`: one group per session below ``parent``."""

    mode = Mode.CGROUP

    def __init__(self, parent: Parent, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.parent = parent
        self.detail = f"cgroup v2 ({parent.how}): {parent.path}"
        self.adopting = False

    def adopt_orphans(self) -> None:
        """Make this process (the daemon) the child subreaper of its sessions' orphans, and reap them."""
        set_child_subreaper()
        self.adopting = True

    def _top(self) -> Path:
        """The highest group agentd may change when enabling controllers."""
        if self.parent.how == "root":
            return self.parent.mount
        if self.parent.how == "delegated":
            return self.parent.path.parent.parent
        return self.parent.path

    def add(self, unit: str, session_id: str, limits: Limits | None = None) -> Member:
        """Create the session's group (before spawning; raises OSError when it cannot)."""
        check_name(unit, session_id)
        member = Member(unit, session_id)
        self.parent.path.mkdir(parents=True, exist_ok=True)  # another project's daemon may have removed agentd/
        member.group = Group(self.parent.path / member.name, self.parent.mount).create()
        if limits is not None and limits.files():
            wanted = limits.files()
            missing = enable_controllers(self._top(), self.parent.path, list(wanted))
            applied = []
            for controller, (filename, value) in wanted.items():
                if controller in missing:
                    continue
                try:
                    (member.group.path / filename).write_text(value)
                    applied.append(f"{filename}={value}")
                except OSError as exc:
                    missing[controller] = f"cannot write {filename}: {exc.strerror}"
            member.limits_applied = tuple(applied)
            member.limits_unavailable = tuple(missing.values())
        self.members[member.name] = member
        return member

    def child_step(self, member: Member) -> JoinStep:
        """The step that moves the forked child into the group before exec (pass to Session.spawn)."""
        assert member.group is not None
        return member.group.join_step()

    def processes(self, member: Member) -> list[psutil.Process]:
        out = []
        for pid in member.group.pids() if member.group else ():
            try:
                out.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return out

    def empty(self, member: Member) -> bool:
        return member.group is None or not member.group.populated()

    async def kill(self, member: Member) -> bool:
        return member.group is None or await member.group.kill(KILL_WAIT, clock=self.clock)

    def usage(self, member: Member) -> Usage:
        group = member.group
        cpu = group.cpu_seconds() if group else None
        mem = group.memory_bytes() if group else None
        if cpu is None or mem is None:
            rss_cpu, rss = rss_and_cpu(self.processes(member))
            cpu = rss_cpu if cpu is None else cpu
            if mem is None:
                return Usage(cpu, rss, "rss")
        return Usage(cpu, mem, "memory.current")

    def release(self, member: Member) -> None:
        """Forget the session and remove its group (raises OSError(EBUSY) when it is not empty)."""
        if member.group is not None and member.group.exists() and not member.group.remove():
            raise OSError(16, f"cgroup {member.group.path} still has processes; end the session first")
        self.members.pop(member.name, None)

    async def cleanup_leftovers(self) -> list[str]:
        """Kill and remove every group below the parent that is not a current session's.

        Called at daemon start: a crashed daemon's sessions (and anything they
        started) are in those groups.  Returns the names of the groups removed.
        """
        removed = []
        try:
            entries = sorted(p for p in self.parent.path.iterdir() if p.is_dir())
        except FileNotFoundError:
            return removed
        for path in entries:
            if path.name in self.members:
                continue
            group = Group(path, self.parent.mount)
            if await group.kill(KILL_WAIT, clock=self.clock) and group.remove():
                removed.append(path.name)
        return removed

    def reap_orphans(self) -> list[tuple[int, ExitInfo]]:
        return super().reap_orphans() if self.adopting else []  # else orphans are not this process's children

    def close(self) -> None:
        """Remove the project's parent group when no session is left in it (daemon shutdown)."""
        try:
            self.parent.path.rmdir()
        except OSError:
            pass
