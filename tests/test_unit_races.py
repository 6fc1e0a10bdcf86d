"""Races: events of one unit in an unlucky order (found by bench.soak and by issue 31's storms).

The checkpoint's operation is started as a task; the agent may die and be
reaped (the unit goes to backoff) before the task runs.  The cycle must then
not run at all (it was an IllegalTransition backoff -> checkpointing, logged
as a failed operation), ``checkpoint`` says it did not run, and a graceful
``stop`` still stops the unit instead of leaving it to restart from backoff.

A crash loop replayed in random orders (issue 31): exits reaped while a start
still runs, backoff timers that fire after a stop, a stop at any moment: the
stop wins, nothing raises, no session stays open.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from supervisor.adapters.base import ContextFigure
from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from tests.daemon_fakes import FakeClock, FakeRuntime, spec


class _Adapter:
    pass


def make(tmp_path: Path) -> tuple[UnitSupervisor, FakeRuntime]:
    rt = FakeRuntime(FakeClock(), tmp_path)
    return UnitSupervisor(spec(tmp_path, "[wakeup]\non_start = false\n"), rt, _Adapter()), rt  # type: ignore[arg-type]


async def _dies_before_the_op_runs(unit: UnitSupervisor, command: asyncio.Future) -> None:
    for _ in range(10):  # the command starts the op task (a stop through its own task); the op has not run yet
        if unit.busy:
            break
        await asyncio.sleep(0)
    assert unit.busy
    unit.driver.dies(signal=9)  # type: ignore[union-attr]
    unit.reap()
    assert unit.state is UnitState.BACKOFF


def test_checkpoint_of_an_agent_that_died_meanwhile_does_not_run(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt = make(tmp_path)
        await unit.start("start")
        command = asyncio.ensure_future(unit.checkpoint())
        await _dies_before_the_op_runs(unit, command)
        result = await command
        assert result["outcome"] == "not run: the session ended before the checkpoint began"
        assert unit.state is UnitState.BACKOFF
        assert [c.trigger for c in rt.cycles] == ["crash"]  # only the crash's kept work: no checkpoint ran
    asyncio.run(go())


def test_a_graceful_stop_of_an_agent_that_died_meanwhile_still_stops(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt = make(tmp_path)
        await unit.start("start")
        command = asyncio.ensure_future(unit.stop("stop command", checkpoint=True))
        await _dies_before_the_op_runs(unit, command)
        await command
        assert unit.state is UnitState.INACTIVE and not rt.timers  # no restart left pending
    asyncio.run(go())


# ------------------------------------------------------------------ issue 31: crash loops stopped at once
STORM = "[wakeup]\non_start = false\n[restart]\npolicy = \"always\"\ninitial_delay = 0.05\nmultiplier = 1\nburst = 100000\n"


async def _storm(tmp_path: Path, rng: random.Random) -> None:
    """One crash-looping unit; its events (exits, reaps, backoff timers, stale timers, a start held right
    after its launch) in a random order, and a ``stop --now`` at a random moment of it."""
    rt = FakeRuntime(FakeClock(), tmp_path)
    unit = UnitSupervisor(spec(tmp_path, STORM), rt, _Adapter())  # type: ignore[arg-type]
    gate = rt.persist_gate = asyncio.Event()
    gate.set()

    def timer() -> None:
        """A TimerFired dispatched: its handle has fired (none is pending), whether or not it is stale now."""
        rt.timers.clear()
        unit.timer_fired()

    await unit.start("start")
    stop: asyncio.Task | None = None
    for step in range(rng.randrange(5, 60)):
        event = rng.choice(["die", "reap", "timer", "hold", "release", "yield", "yield"])
        if event == "die" and unit.driver is not None and not unit.driver.exited:
            unit.driver.dies(code=1)
        elif event == "reap":
            unit.reap()
        elif event == "timer":
            timer()
        elif event == "hold":
            gate.clear()
        elif event == "release":
            gate.set()
        for _ in range(rng.randrange(0, 4)):
            await asyncio.sleep(0)
        if stop is None and step >= 3 and rng.random() < 0.2:
            stop = asyncio.ensure_future(unit.stop("stop command", checkpoint=False))
    if stop is None:
        stop = asyncio.ensure_future(unit.stop("stop command", checkpoint=False))
    for _ in range(rng.randrange(0, 6)):  # events still arrive while the stop runs
        unit.reap()
        timer()
        await asyncio.sleep(0)
    gate.set()
    await stop
    unit.reap()
    timer()  # and after it: stale, ignored
    await rt.settle()
    assert unit.state is UnitState.INACTIVE, (unit.state, unit.reason)
    assert unit.driver is None and all(d.closed for d in rt.drivers), "a session was left open"
    assert not rt.timers, rt.timers
    assert not unit.busy, unit.op


def test_a_crash_loop_stopped_at_any_moment_ends_inactive_with_every_session_closed(tmp_path: Path) -> None:
    """Issue 31 §1-3: stale events (an exit reaped while a start still runs, a backoff timer after the stop)
    are ignored, never an IllegalTransition; the stop wins; no session of the loop stays open."""
    for seed in range(300):
        asyncio.run(_storm(tmp_path, random.Random(seed)))


def test_a_start_planned_before_a_stop_does_not_run(tmp_path: Path) -> None:
    """Issue 31 §2: `agentd start` goes unit by unit; a unit stopped meanwhile is not started after."""
    async def go() -> None:
        from supervisor.daemon.table import UnitTable

        rt = FakeRuntime(FakeClock(), tmp_path)
        table = UnitTable(rt.spawn)
        for name in ("a", "b"):
            table.add(UnitSupervisor(spec(tmp_path, "[wakeup]\non_start = false\n", name=name), rt, _Adapter()))  # type: ignore[arg-type]
        rt.persist_gate = asyncio.Event()
        plan = asyncio.ensure_future(table.start(["a", "b"], "start command"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert table["a"].state is UnitState.STARTING and table["b"].state is UnitState.INACTIVE
        await table.stop(["b"], "stop command", checkpoint=False)
        rt.persist_gate.set()
        await plan
        await rt.settle()
        assert table["a"].state is UnitState.RUNNING and table["b"].state is UnitState.INACTIVE
        assert len(rt.drivers) == 1
    asyncio.run(go())


def test_what_handling_a_unit_raises_is_its_error_state_and_a_stop_or_start_leaves_it(tmp_path: Path) -> None:
    """Issue 31 §1: nothing one unit raises ends the arbiter: the unit goes to a named error state."""
    async def go() -> None:
        unit, rt = make(tmp_path)
        await unit.start("start")
        driver = unit.driver

        def broken() -> None:
            raise RuntimeError("a bug")
        driver.reap = broken  # type: ignore[method-assign]
        unit.guarded("reaping its session", unit.reap)  # how the arbiter hands each event to a unit
        await rt.settle()
        assert unit.state is UnitState.ERROR and "a bug" in unit.reason and "reaping its session" in unit.reason
        assert unit.driver is None and driver.ended == [False] and driver.closed
        await unit.stop("stop command")
        assert unit.state is UnitState.INACTIVE
        unit.fault(RuntimeError("again"), "watching its session")
        assert unit.state is UnitState.ERROR
        await unit.start("start command")
        assert unit.state is UnitState.RUNNING
    asyncio.run(go())


def test_no_unit_starts_or_respawns_once_the_daemon_stops(tmp_path: Path) -> None:
    """Issue 27 §1: a backoff timer, a start and a cycle's respawn during a daemon stop do nothing."""
    async def go() -> None:
        unit, rt = make(tmp_path)
        await unit.start("start")
        unit.driver.dies(code=1)
        unit.reap()
        assert unit.state is UnitState.BACKOFF
        rt.stopping = True
        unit.timer_fired()
        assert unit.state is UnitState.BACKOFF and unit.start("start command") is None
        rt.stopping = False
        unit.timer_fired()
        await rt.settle()
        assert unit.state is UnitState.RUNNING
        unit.driver.figure = ContextFigure(750, 1000, True, "fake")
        unit.driver.on_type = lambda d, text: (setattr(rt, "stopping", True), d.turn_ends())  # a stop begins mid-cycle
        cycle = asyncio.ensure_future(unit.checkpoint())
        record = await cycle
        assert record["outcome"].startswith("stopped instead of respawning") and unit.state is UnitState.INACTIVE
        assert len(rt.drivers) == 2  # no third session
    asyncio.run(go())
