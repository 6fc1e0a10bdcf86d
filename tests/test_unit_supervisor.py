"""The per-unit supervisor, replayed with a fake runtime, fake drivers and a fake clock.

Each test drives one unit through a history of events (start, the agent's
exit, a timer, ticks, commands, the agent's own events) and checks the states
and records it leaves.  No process, PTY or socket: each runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from pathlib import Path

import pytest

from supervisor.adapters.base import ContextFigure, Meaning
from supervisor.continuity.records import StartReason
from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from tests.daemon_fakes import FakeClock, FakeDriver, FakeRuntime, spec

NO_WAKEUP = "[wakeup]\non_start = false\n"


class _Adapter:
    """Only its presence matters: the fake runtime launches fake drivers."""


def make(tmp_path: Path, text: str = NO_WAKEUP) -> tuple[UnitSupervisor, FakeRuntime, FakeClock]:
    clock = FakeClock()
    rt = FakeRuntime(clock, tmp_path)
    return UnitSupervisor(spec(tmp_path, text), rt, _Adapter()), rt, clock  # type: ignore[arg-type]


def run(coro):
    return asyncio.run(coro)


def test_start_runs_and_records_why_the_session_started(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path)
        await unit.start("enabled at daemon start")
        assert unit.state is UnitState.RUNNING and unit.driver is rt.drivers[0]
        (record,) = rt.sessions
        assert record.why is StartReason.START and record.detail == "enabled at daemon start"
        assert record.session == rt.drivers[0].session_id
    run(go())


def test_a_crash_backs_off_then_restarts_with_the_exit_recorded(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[restart]\ninitial_delay = 2\n")
        await unit.start("start")
        first = unit.driver
        first.dies(code=3)
        unit.reap()
        assert unit.state is UnitState.BACKOFF and unit.driver is None and first.closed
        ((due, who),) = rt.timers
        assert who is unit and due == clock() + 2
        clock.advance(2)
        unit.timer_fired()
        await rt.settle()
        assert unit.state is UnitState.RUNNING and unit.restarts == 1 and unit.driver is not first
        assert (unit.crashes, unit.cycled, unit.exit_planned) == (1, 0, False)
        crash = rt.sessions[-1]
        assert crash.why is StartReason.CRASH and crash.previous == first.session_id and crash.previous_exit == "exit 3"
    run(go())


def test_the_start_limit_ends_in_failed_until_reset(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[restart]\nburst = 2\ninterval = 100\ninitial_delay = 1\n")
        await unit.start("start")
        for _ in range(2):
            unit.driver.dies(code=1)
            unit.reap()
            if unit.state is UnitState.BACKOFF:
                clock.advance(1)
                unit.timer_fired()
                await rt.settle()
        assert unit.state is UnitState.FAILED and "start limit hit" in unit.reason
        unit.reset_failed()
        await rt.settle()
        assert unit.state is UnitState.RUNNING
    run(go())


def test_a_session_that_cannot_open_its_files_backs_off_with_the_reason(tmp_path: Path) -> None:
    """Issue 13, item 1: an I/O error at start is a named state a command can leave, not a stuck 'starting'."""
    async def go() -> None:
        unit, rt, _ = make(tmp_path)
        rt.launch_error = OSError(errno.EROFS, "Read-only file system")
        await unit.start("start")
        assert unit.state is UnitState.BACKOFF and "Read-only file system" in unit.reason
        await unit.stop("stop command", checkpoint=False)
        assert unit.state is UnitState.INACTIVE
    run(go())


def test_the_wakeup_is_typed_as_the_first_message(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, "")
        await unit.start("start")
        assert await unit.delivered() == "delivered via first-message"
        driver = rt.drivers[0]
        assert driver.typed == [driver.wakeup] and driver.wakeup and "Hard constraints" in driver.wakeup
    run(go())


def _threshold(driver: FakeDriver) -> None:
    driver.figure = ContextFigure(750, 1000, True, "fake")


def test_the_threshold_runs_one_verified_cycle_into_a_fresh_session(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        old = unit.driver

        def writes_notes(d: FakeDriver, text: str) -> None:
            rt.memory_files.writes += 1  # the agent answers the prompt by writing its notes
            d.turn_ends()
        old.on_type = writes_notes
        _threshold(old)
        unit.watch.tick()
        await rt.settle()
        (record,) = rt.cycles
        assert record.trigger == "threshold" and record.flush == "verified" and record.outcome == "respawned"
        assert record.old_session == old.session_id and record.new_session == unit.driver.session_id
        assert old.typed[0].startswith("CHECKPOINT requested by agentd") and old.ended == [True]
        assert unit.state is UnitState.RUNNING and rt.sessions[-1].why is StartReason.CYCLE
        # a planned cycle is counted as a cycle, never as a restart or a crash, and its exit is planned (issue 27 §2)
        assert (unit.cycled, unit.restarts, unit.crashes) == (1, 0, 0) and unit.exit_planned
        unit.watch.tick()  # the fresh session is below the threshold: nothing more happens
        await rt.settle()
        assert len(rt.cycles) == 1
    run(go())


def test_an_agent_that_ignores_the_prompt_gets_an_auto_checkpoint(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP + "[checkpoint]\ndeadline = 30\ngrace = 2\n")
        await unit.start("start")
        _threshold(unit.driver)
        unit.watch.tick()
        await rt.settle()
        (record,) = rt.cycles
        assert record.flush == "auto" and rt.memory_files.autos and unit.state is UnitState.RUNNING
    run(go())


def test_the_agent_dying_mid_checkpoint_still_ends_in_a_fresh_session(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        unit.driver.on_type = lambda d, text: d.dies(signal=9)
        _threshold(unit.driver)
        unit.watch.tick()
        await rt.settle()
        (record,) = rt.cycles
        assert record.flush == "auto" and record.notes[0] == "the agent exited during the checkpoint"
        assert rt.memory_files.autos == ["the agent exited during the checkpoint"]
        assert record.outcome == "respawned" and unit.state is UnitState.RUNNING and len(rt.drivers) == 2
    run(go())


def test_a_due_checkpoint_waits_while_a_person_types(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        driver = unit.driver
        driver.person = True
        task = asyncio.ensure_future(unit.checkpoint())
        for _ in range(20):
            await asyncio.sleep(0)
        assert unit.state is UnitState.CHECKPOINTING and "a person is typing" in unit.activity
        assert driver.typed == []
        driver.person = False
        record = await task
        assert record["flush"] in ("verified", "auto") and driver.typed[0].startswith("CHECKPOINT")
    run(go())


def test_a_hard_limit_interrupts_the_running_turn(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False  # mid-turn
        driver.figure = ContextFigure(950, 1000, True, "fake")
        unit.watch.tick()
        await rt.settle()
        assert driver.interrupted == 1 and rt.cycles[0].trigger == "hard_limit"
    run(go())


def test_a_stalled_agent_is_interrupted_and_restarted(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[schedule]\nstall_after = 60\n")
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False
        clock.advance(61)
        unit.watch.tick()
        await rt.settle()
        assert driver.interrupted == 1 and rt.cycles[0].trigger == "stall" and unit.driver is not driver
    run(go())


def test_max_runtime_stops_through_a_checkpoint_once(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[schedule]\nmax_runtime = 100\n")
        await unit.start("start")
        clock.advance(101)
        unit.watch.tick()
        await rt.settle()
        assert unit.state is UnitState.INACTIVE and "max_runtime" in unit.reason
        assert rt.cycles[0].trigger == "stop" and rt.cycles[0].outcome == "stopped"
    run(go())


def test_stop_now_cancels_a_checkpoint_that_waits_for_its_deadline(tmp_path: Path) -> None:
    """Issue 13, item 4: a checkpoint that cannot finish never wedges the unit; --now always ends it."""
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP + "[checkpoint]\ndeadline = 100000\n")
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False  # a turn that never ends

        async def never(deadline: float, activity=None) -> bool:
            await asyncio.Event().wait()
            return False
        driver.wait_ready = never  # type: ignore[method-assign]
        checkpoint = asyncio.ensure_future(unit.checkpoint())
        for _ in range(10):
            await asyncio.sleep(0)
        assert unit.state is UnitState.CHECKPOINTING
        await unit.stop("stop command", checkpoint=False)
        assert unit.state is UnitState.INACTIVE and driver.ended == [False] and unit.checkpoint_marker is None
        await asyncio.gather(checkpoint, return_exceptions=True)
    run(go())


def test_a_failing_cycle_ends_in_a_named_state_with_the_reason(tmp_path: Path) -> None:
    """Issue 13, item 4: a full disk during a checkpoint: back to a fresh session, the reason shown."""
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[restart]\ninitial_delay = 1\n")
        await unit.start("start")

        def full(*_a: object) -> str:
            raise OSError(errno.ENOSPC, "No space left on device")
        rt.memory_files.fingerprint = full  # type: ignore[method-assign]
        _threshold(unit.driver)
        unit.watch.tick()
        await rt.settle()
        assert unit.state is UnitState.BACKOFF and "No space left on device" in unit.reason
        clock.advance(1)
        unit.timer_fired()
        await rt.settle()
        assert unit.state is UnitState.RUNNING
    run(go())


def test_a_usage_limit_waits_then_resumes_from_the_wakeup(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        driver = unit.driver
        driver.tail = lambda n: "Error: usage limit reached. Try again in 5 minutes."  # type: ignore[method-assign]
        driver.dies(code=1)
        unit.reap()
        assert unit.state is UnitState.WAITING and "usage limit" in unit.reason
        unit.timer_fired()
        await rt.settle()
        assert unit.state is UnitState.RUNNING and rt.sessions[-1].why is StartReason.LIMIT_RESET
    run(go())


def test_queued_text_is_typed_at_the_next_idle_tick_but_not_while_a_person_types(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False
        reply = await unit.talk.send("run the tests")
        assert reply["delivered"] == "queued"
        driver.watcher.idle = True
        unit.talk.person_input()
        unit.watch.tick()
        await rt.settle()
        assert driver.typed == []
        clock.advance(11)
        unit.watch.tick()
        await rt.settle()
        assert driver.typed == ["run the tests"]
    run(go())


def test_sending_is_refused_during_a_checkpoint_and_when_stopped(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP)
        with pytest.raises(ValueError, match="not running"):
            await unit.talk.send("hello")
        await unit.start("start")
        unit.driver.person = True
        task = asyncio.ensure_future(unit.checkpoint())
        for _ in range(10):
            await asyncio.sleep(0)
        with pytest.raises(ValueError, match="during a checkpoint"):
            await unit.talk.send("hello")
        unit.driver.person = False
        await task
    run(go())


def test_the_agents_own_compaction_is_recorded_and_answered_with_the_wakeup(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP)
        await unit.start("start")
        unit.driver.meanings = [Meaning.COMPACTED, Meaning.INJECT_WAKEUP]
        reply = await unit.talk.agent_event({"type": "agent-turn-complete"}, None)
        assert reply["meanings"] == ["compacted", "inject_wakeup"]
        (record,) = rt.cycles
        assert record.trigger == "agent compacted" and record.outcome == "wakeup re-injected"
        assert unit.talk.sends and "Hard constraints" in unit.talk.sends[0]
        stale = await unit.talk.agent_event({}, "not-the-current-session")
        assert "ignored" in stale
    run(go())


def test_a_restart_now_from_backoff_starts_at_once(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path, NO_WAKEUP + "[restart]\ninitial_delay = 60\n")
        await unit.start("start")
        unit.driver.dies(code=1)
        unit.reap()
        assert unit.state is UnitState.BACKOFF
        await unit.restart(now=True)
        assert unit.state is UnitState.RUNNING and rt.timers == [] and rt.sessions[-1].why is StartReason.RESTART
    run(go())


def test_a_crash_keeps_the_work_off_the_loop_and_the_restart_waits_for_it(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[restart]\ninitial_delay = 1\n")
        await unit.start("start")
        first = unit.driver
        first.trail_value = "what the agent recorded"
        rt.keeper_fake.gate = threading.Event()
        first.dies(signal=9)
        unit.reap()
        assert unit.state is UnitState.BACKOFF  # the reaper never waits for the keep
        assert await asyncio.to_thread(rt.keeper_fake.entered.wait, 10)
        clock.advance(1)
        unit.timer_fired()
        for _ in range(20):
            await asyncio.sleep(0)
        assert unit.state is UnitState.STARTING and len(rt.drivers) == 1  # the new session waits for it
        rt.keeper_fake.gate.set()
        await rt.settle()
        assert unit.state is UnitState.RUNNING and len(rt.drivers) == 2
        assert rt.keeper_fake.calls == [("crash", first.session_id, "what the agent recorded")]
        (kept,) = [c for c in rt.cycles if c.trigger == "crash"]
        assert kept.old_session == first.session_id and kept.wip == rt.keeper_fake.wip
        assert kept.outcome == "agent exited: signal SIGKILL" and kept.flush == "skipped"
    run(go())


def test_stop_and_restart_now_keep_the_work_after_the_session_ended(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, _ = make(tmp_path)
        await unit.start("start")
        first = unit.driver
        await unit.restart(now=True)
        second = unit.driver
        await unit.stop("stop command", checkpoint=False)
        assert [(c[0], c[1]) for c in rt.keeper_fake.calls] == [("restart", first.session_id), ("stop", second.session_id)]
        assert first.ended == [False] and second.ended == [False]
        assert [c.outcome for c in rt.cycles] == ["stopped at once: restart command", "stopped at once: stop command"]
    run(go())


def test_a_failing_keep_is_noted_and_never_stops_the_restart(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, NO_WAKEUP + "[restart]\ninitial_delay = 1\n")
        rt.keeper_fake.fail = RuntimeError("git is gone")
        await unit.start("start")
        unit.driver.dies(code=1)
        unit.reap()
        clock.advance(1)
        unit.timer_fired()
        await rt.settle()
        assert unit.state is UnitState.RUNNING and len(rt.drivers) == 2
        assert not [c for c in rt.cycles if c.trigger == "crash"]  # nothing saved: nothing to name in history
        rt.keeper_fake.fail, rt.keeper_fake.wip = None, None
        await unit.stop("stop command", checkpoint=False)
        assert rt.keeper_fake.calls[-1][0] == "stop" and not rt.cycles  # kept, but no WIP: logged only
    run(go())


def test_a_scope_revert_keeps_the_running_sessions_work_first(tmp_path: Path) -> None:
    async def go() -> None:
        from supervisor.daemon.views import Offender
        from supervisor.scope.guard import ScopeGuard
        from supervisor.scope.rules import Violation

        unit, rt, _ = make(tmp_path)
        await unit.start("start")
        guard = ScopeGuard(tmp_path, tmp_path / "state", units=None, post=lambda _p: None, spawn=rt.spawn)  # type: ignore[arg-type]
        await guard.act(Offender(unit), Violation("outside.txt", "outside the scope", "scope"), "busy", action="revert")
        assert rt.keeper_fake.calls == [("scope revert", unit.driver.session_id, None)]
        assert rt.cycles[-1].trigger == "scope revert" and rt.cycles[-1].outcome == "kept before reverting outside.txt"
    run(go())


def test_a_checkpoint_asked_while_the_start_finishes_waits_for_it(tmp_path: Path) -> None:
    """`agentd checkpoint` right after `agentd start`: the agent has its wakeup, the start is still under way."""
    async def go() -> None:
        unit, rt, _ = make(tmp_path)
        rt.persist_gate = asyncio.Event()
        start = unit.start("start")
        for _ in range(10):
            await asyncio.sleep(0)
        assert unit.state is UnitState.STARTING and unit.driver is not None
        checkpoint = asyncio.ensure_future(unit.checkpoint())
        await asyncio.sleep(0)
        rt.persist_gate.set()
        record = await checkpoint
        assert record["trigger"] == "command" and record["outcome"] == "respawned" and start.done()
    run(go())
