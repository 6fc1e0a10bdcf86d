"""A quiet session is looked at only when something is new or due (issue 29: 50 idle agents).

The pure part first: :func:`supervisor.continuity.policy.next_due` says how soon a time-based rule of
:func:`~supervisor.continuity.policy.watch` may act on what a tick saw.  Then a unit replayed with the fake
agent and a fake clock: :class:`~supervisor.daemon.watch.SessionWatch` skips a session whose activity did
not change until that moment, and never acts later than it would have looking every second.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from supervisor.adapters.base import ContextFigure, Turn, TurnWatcher
from supervisor.continuity.policy import Checkpoint, Trigger, next_due, watch
from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from supervisor.daemon.watch import LOOK_EVERY
from supervisor.schedule import USAGE_SCAN_EVERY
from supervisor.memory.scaffold import init_store
from tests.daemon_fakes import QUIET, FakeClock, FakeDriver, FakeRuntime, seen, spec



# ------------------------------------------------------------------ the policy (pure)
def test_nothing_is_due_by_time_without_a_time_based_rule(tmp_path: Path) -> None:
    assert next_due(spec(tmp_path, QUIET), seen()) is None


def test_the_soonest_time_based_rule_is_due(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET + "[schedule]\nstall_after = 60\nmax_runtime = 500\n"
                               "[context]\nmax_session_age = 100\n")
    assert next_due(s, seen(silent_for=20.0)) == 40.0  # the stall
    assert next_due(s, seen(silent_for=0.0, session_age=95.0)) == 5.0  # the session's age
    assert next_due(s, seen(silent_for=0.0, run_age=499.0)) == 1.0  # max_runtime
    assert next_due(s, seen(silent_for=0.0, blocked="trust", blocked_for=25.0)) == 5.0  # [freeze] after = 30
    assert next_due(s, seen(silent_for=0.0, stopped_for=28.5)) == 1.5
    assert next_due(s, seen(silent_for=0.0, idle_after_compaction=10.0)) == 20.0
    assert next_due(s, seen(silent_for=0.0, above_hard_limit_for=29.0)) == 1.0
    assert next_due(s, seen(may_type=True)) == 0.0  # queued text: at once
    assert next_due(s, seen(silent_for=70.0)) == 0.0  # past due: now, never negative


def test_a_checkpoint_by_age_is_due_only_where_checkpoints_run(tmp_path: Path) -> None:
    on = spec(tmp_path, QUIET + "[context]\nrestart_every = 50\n")
    assert next_due(on, seen(session_age=10.0)) == 40.0
    off = spec(tmp_path, QUIET + "[context]\nrestart_every = 50\n[checkpoint]\nenabled = false\n")
    assert next_due(off, seen(session_age=10.0)) is None


def test_what_is_due_is_what_watch_then_does(tmp_path: Path) -> None:
    """At the moment next_due names, watch acts; a moment before, it does not (for the stall)."""
    s = spec(tmp_path, QUIET + "[schedule]\nstall_after = 60\n")
    wait = next_due(s, seen(silent_for=12.0))
    assert wait == 48.0
    assert watch(s, seen(silent_for=12.0 + wait - 0.5)) is None
    assert watch(s, seen(silent_for=12.0 + wait)) == Checkpoint(Trigger.STALL, interrupt=True, deadline=60.0)


# ------------------------------------------------------------------ a unit, replayed
class Watcher(TurnWatcher):
    """A real turn watcher (it says when it may see a turn end: never, by time) on the fake clock."""

    @property
    def idle(self) -> bool:
        return self.state is Turn.IDLE

    @idle.setter
    def idle(self, value: bool) -> None:
        self.state = Turn.IDLE if value else Turn.BUSY


class QuietDriver(FakeDriver):
    """The fake agent with an activity (its output and turns) and a count of the watch's looks."""

    def __init__(self, clock: FakeClock, wakeup: str | None = None, first_input: bool = True) -> None:
        super().__init__(clock, wakeup, first_input)
        self.watcher = Watcher(clock)  # type: ignore[assignment]
        self.watcher.idle = True
        self.looks = 0

    @property  # type: ignore[override]
    def activity(self) -> object:
        return (self.last_output, self.watcher.state, self.watcher.turns_ended)

    def context(self) -> ContextFigure | None:
        self.looks += 1
        return self.figure

    def prints(self) -> None:
        self.last_output = self.clock()


class Runtime(FakeRuntime):
    def launch(self, unit: Any, wakeup: str | None) -> FakeDriver:
        driver = QuietDriver(self.clock, wakeup, self.first_input)
        self.script(driver)
        self.drivers.append(driver)
        return driver


def make(tmp_path: Path, text: str = QUIET) -> tuple[UnitSupervisor, Runtime, FakeClock]:
    init_store(tmp_path)
    clock = FakeClock()
    rt = Runtime(clock, tmp_path)

    class _Adapter:
        def sandbox(self) -> object:
            from supervisor.adapters.base import Sandbox

            return Sandbox(mode="workspace-write", bypassed=False, fenced=False)

    return UnitSupervisor(spec(tmp_path, text), rt, _Adapter()), rt, clock  # type: ignore[arg-type]


def ticks(unit: UnitSupervisor, clock: FakeClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(1)
        unit.watch.tick()


def test_a_quiet_session_is_looked_at_again_only_when_it_prints_or_at_the_latest_look(tmp_path: Path) -> None:
    async def go() -> None:
        unit, _rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        assert isinstance(driver, QuietDriver)
        clock.advance(USAGE_SCAN_EVERY + 2)  # the start's output is long scanned
        unit.watch.tick()
        assert driver.looks == 1
        ticks(unit, clock, 5)
        assert driver.looks == 1  # nothing new, nothing due
        driver.prints()
        unit.watch.tick()
        assert driver.looks == 2  # output: looked at at once
        ticks(unit, clock, int(USAGE_SCAN_EVERY))
        assert driver.looks == 3  # and again once the usage-limit scan may look at it
        ticks(unit, clock, int(LOOK_EVERY) - 1)
        assert driver.looks == 3
        ticks(unit, clock, 1)
        assert driver.looks == 4  # LOOK_EVERY after the last look: what no output shows (SIGSTOP, files)
        driver.turn_ends()
        unit.watch.tick()
        assert driver.looks == 5  # a turn ended (the agent's hook): new
        unit.talk.sends.append("queued")  # text waiting: looked at every tick until it is typed
        driver.watcher.idle = False
        ticks(unit, clock, 3)
        assert driver.looks == 8

    asyncio.run(go())


def test_a_time_based_rule_acts_at_the_tick_it_would_have_acted_at(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, QUIET + "[schedule]\nstall_after = 4\n")
        await unit.start("start")
        driver = unit.driver
        assert isinstance(driver, QuietDriver)
        unit.watch.tick()
        ticks(unit, clock, int(USAGE_SCAN_EVERY) - 1)
        assert driver.looks == 1
        ticks(unit, clock, 1)
        assert driver.looks == 2 and unit.state is UnitState.RUNNING  # the usage scan's look
        ticks(unit, clock, 1)  # silent for 4 s: the stall is due now, and seen now
        assert driver.looks == 3
        await asyncio.sleep(0)  # the cycle the watch started
        assert unit.state is UnitState.CHECKPOINTING
        for task in list(rt.tasks):
            task.cancel()

    asyncio.run(go())


def test_a_stopped_process_is_named_within_one_look(tmp_path: Path) -> None:
    """SIGSTOP prints nothing: the latest look finds it, and [freeze] after counts from there."""
    async def go() -> None:
        unit, _rt, clock = make(tmp_path, "[wakeup]\non_start = false\n[freeze]\nafter = 5\n")
        await unit.start("start")
        driver = unit.driver
        assert isinstance(driver, QuietDriver)
        clock.advance(USAGE_SCAN_EVERY + 2)
        unit.watch.tick()
        driver.sigstopped = True
        ticks(unit, clock, int(LOOK_EVERY))
        assert unit.watch.frozen is None and driver.looks == 2  # first seen stopped at the latest look
        ticks(unit, clock, 4)
        assert unit.watch.frozen is None and driver.looks == 2
        ticks(unit, clock, 1)  # [freeze] after since it was seen: due, and named
        assert unit.watch.frozen is not None and unit.watch.frozen["state"] == "stopped_process"

    asyncio.run(go())


def test_a_turn_watchers_due_is_looked_at_once_and_only_while_a_turn_runs(tmp_path: Path) -> None:
    """A generic agent's quiet spell ends its turn at the watcher's due(); a due already past (seen at the
    last look), or one while the turn is over, brings no look at every tick."""
    async def go() -> None:
        unit, _rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        assert isinstance(driver, QuietDriver)
        clock.advance(USAGE_SCAN_EVERY + 2)
        due = [clock() + 4]
        driver.watcher.due = lambda: due[0]  # type: ignore[method-assign]
        driver.watcher.idle = False  # a turn runs: its quiet spell may end it in 4 s
        unit.watch.tick()
        ticks(unit, clock, 3)
        assert driver.looks == 1
        ticks(unit, clock, 1)
        assert driver.looks == 2  # at the watcher's due
        ticks(unit, clock, 5)
        assert driver.looks == 2  # that due is past now: not looked at each tick for it
        driver.watcher.idle = True
        driver.turn_ends()
        unit.watch.tick()
        due[0] = clock() + 1
        ticks(unit, clock, 3)
        assert driver.looks == 3  # the turn is over: its due means nothing

    asyncio.run(go())
