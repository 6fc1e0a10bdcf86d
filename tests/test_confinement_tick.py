"""The daemon's containment each second (issue 29: 50 idle agents): what a tick reads and when.

Refusals are read only for a fenced session that printed since its last read, and adopted orphans
are looked for in ``/proc`` only when a child of the daemon has exited.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from supervisor.daemon.confinement import Confinement


class Containment:
    mode = SimpleNamespace(value="cgroup")

    def __init__(self) -> None:
        self.reaps = 0
        self.members: dict[str, Any] = {}

    def reap_orphans(self) -> list[Any]:
        self.reaps += 1
        return []


class Driver:
    def __init__(self, session: str, fenced: bool = True) -> None:
        self.session_id, self.fenced = session, fenced
        self.transcript_bytes = 0
        self.reads = 0
        self.found: list[Path] = []

    def refusals(self) -> list[Path]:
        self.reads += 1
        found, self.found = self.found, []
        return found


class Guard:
    def __init__(self) -> None:
        self.got: list[tuple[str, list[Path]]] = []

    def refused(self, unit: str, paths: list[Path]) -> None:
        self.got.append((unit, paths))


def test_refusals_are_read_only_for_sessions_that_printed() -> None:
    a, b, loose = Driver("s-a"), Driver("s-b"), Driver("s-c", fenced=False)
    units = [SimpleNamespace(name="a", driver=a), SimpleNamespace(name="b", driver=b),
             SimpleNamespace(name="c", driver=loose), SimpleNamespace(name="d", driver=None)]
    confinement = Confinement(Containment(), spawn=lambda coro: None)  # type: ignore[arg-type]
    guard = Guard()

    async def go() -> None:
        await confinement.tick(units, guard)  # type: ignore[arg-type]
        assert (a.reads, b.reads, loose.reads) == (1, 1, 0)  # a new session: read once
        await confinement.tick(units, guard)  # type: ignore[arg-type]
        assert (a.reads, b.reads) == (1, 1)  # nothing printed since
        b.transcript_bytes = 120
        b.found = [Path("/etc/x")]
        await confinement.tick(units, guard)  # type: ignore[arg-type]
        assert (a.reads, b.reads) == (1, 2) and guard.got == [("b", [Path("/etc/x")])]
        units[1] = SimpleNamespace(name="b", driver=Driver("s-b2"))  # b respawned: its new session is read
        await confinement.tick(units, guard)  # type: ignore[arg-type]
        assert units[1].driver.reads == 1 and a.reads == 1

    asyncio.run(go())


def test_orphans_are_looked_for_only_when_a_child_exited() -> None:
    containment = Containment()
    confinement = Confinement(containment, spawn=lambda coro: None)  # type: ignore[arg-type]
    confinement.reap()
    asyncio.run(confinement.tick([], Guard()))  # type: ignore[arg-type]
    assert containment.reaps == 0
    child = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while containment.reaps == 0 and time.monotonic() < deadline:
            confinement.reap()  # the exited child is peeked at (WNOWAIT), so /proc is read
            time.sleep(0.01)
        assert containment.reaps >= 1
    finally:
        child.wait()
    before = containment.reaps
    confinement.reap()
    assert containment.reaps == before  # reaped (by its owner): nothing to look for again


def test_a_session_leader_of_our_own_is_spared_while_a_spawn_is_under_way() -> None:
    """A plan check spawned with start_new_session can exit before asyncio's spawn returns its pid; reaped by the
    orphan reaper then, asyncio reports exit 255 (CI saw a check's `grep` fail so beside two busy loops)."""
    from supervisor.session.containment import BaseContainment, Member
    from supervisor.session.lineage import read_stat, reap_adopted
    from supervisor.session.process import ProcessRecord

    child = subprocess.Popen(["true"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while read_stat(child.pid).state != "Z":
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        own = os.getsid(0)
        assert reap_adopted(set(), own, spare_leaders=True) == []  # spared: its spawner reaps it
        # the containment spares them while one of its members is being spawned (no leader yet)
        containment = BaseContainment()
        member = Member("u", "s1")
        containment.members[member.name] = member
        assert containment.reap_orphans() == [] and read_stat(child.pid).state == "Z"
        member.leader = ProcessRecord(child.pid + 1, 0.0)  # spawned (another pid): nothing spared any more
        assert [pid for pid, _ in containment.reap_orphans()] == [child.pid]  # an orphan's due: reaped
    finally:
        try:
            child.wait(timeout=5)
        except ChildProcessError:
            pass
