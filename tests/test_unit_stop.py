"""A unit's stop, replayed with the fake agent and a fake clock (issue 27 §1, issue 31 §5).

A stop asks the agent for its notes unless that cannot help (the agent cannot
take a turn: a blocking screen, a failure, a stopped process, a wakeup never
taken) or cannot fit in the stop's budget; whatever it waits for is bounded by
that budget, and the bound it says is the real one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from supervisor.adapters.base import Blocked, BlockKind
from supervisor.config.stopbudget import StopBudget, StopLimit, shutdown_seconds
from supervisor.continuity.stoppolicy import AtOnce, AtStop, CheckpointFirst, at_stop
from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from tests.conftest import wait_until_async
from tests.daemon_fakes import FakeClock, FakeDriver, FakeRuntime, spec

QUIET = "[wakeup]\non_start = false\n[restart]\nstop_timeout = 2\n"


class _Adapter:
    pass


def make(tmp_path: Path, text: str = QUIET) -> tuple[UnitSupervisor, FakeRuntime, FakeClock]:
    clock = FakeClock()
    rt = FakeRuntime(clock, tmp_path)
    return UnitSupervisor(spec(tmp_path, text), rt, _Adapter()), rt, clock  # type: ignore[arg-type]


def never_ends(driver: FakeDriver) -> None:
    """An agent whose turn never ends (it takes the prompt and works forever)."""
    driver.on_type = lambda d, text: None
    driver.watcher.idle = False


# ------------------------------------------------------------------ the policy (pure)
def test_a_checkpoint_at_stop_only_when_the_agent_can_take_a_turn_and_it_fits(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET + "[checkpoint]\ndeadline = 300\n")
    assert at_stop(s, AtStop(wakeup="delivered via first-message"), None, 2) == CheckpointFirst(300)
    assert at_stop(s, AtStop(), 100, 2) == CheckpointFirst(93)  # the room less stop_timeout and the reserve
    assert isinstance(at_stop(s, AtStop(), 9, 2), AtOnce) and "left of the stop budget" in at_stop(s, AtStop(), 9, 2).why
    for seen, said in [(AtStop(process_stopped=True), "stopped (SIGSTOP)"),
                       (AtStop(failure="cannot reach the API"), "cannot reach the API"),
                       (AtStop(blocked="login (run codex login)"), "blocked: login (run codex login)"),
                       (AtStop(frozen="blocked: approval for 200s"), "frozen: blocked: approval"),
                       (AtStop(wakeup="pending"), "not taken its wakeup"),
                       (AtStop(wakeup="failed: the agent was not ready"), "never taken")]:
        decision = at_stop(s, seen, None, 2)
        assert isinstance(decision, AtOnce) and said in decision.why, (seen, decision)
        assert decision.why.startswith("no checkpoint: the agent cannot take a turn")


def test_the_daemon_has_one_stop_budget_inside_the_service_managers_timeout() -> None:
    units = StopBudget(300 + 15 + 10 + 15, ("api",))  # stop_budget(): the chain plus agentd's margin
    assert shutdown_seconds(units, None) == (325, "the units' checkpoint deadlines and stop timeouts")
    seconds, source = shutdown_seconds(units, StopLimit(90, "$TIMEOUT_STOP_USEC (environment)"))
    assert seconds == 75 and "TIMEOUT_STOP_USEC" in source
    assert shutdown_seconds(units, StopLimit(20, "x"))[0] == 10  # never below half of what is allowed
    assert shutdown_seconds(units, StopLimit(1000, "x"))[0] == 325


# ------------------------------------------------------------------ a unit, replayed
@pytest.mark.parametrize("stuck", ["screen", "sigstop", "failure", "wakeup"])
def test_an_agent_that_cannot_take_a_turn_is_stopped_at_once_and_the_reason_said(tmp_path: Path, stuck: str) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        never_ends(driver)
        if stuck == "screen":
            driver.screen = Blocked(BlockKind.LOGIN, "run `codex login`")
        elif stuck == "sigstop":
            driver.sigstopped = True
        elif stuck == "failure":
            driver.failure_text = "cannot reach the API server"
        else:
            unit.wakeup_state = "pending"
        began = clock()
        await unit.stop("stop command", checkpoint=True)
        assert unit.state is UnitState.INACTIVE and driver.typed == [] and not rt.cycles_of("stop")
        assert "no checkpoint: the agent cannot take a turn" in unit.reason
        assert {"screen": "blocked: login", "sigstop": "SIGSTOP", "failure": "cannot reach the API",
                "wakeup": "its wakeup"}[stuck] in unit.reason
        assert clock() - began < 1 and driver.ended == [False]
    asyncio.run(go())


def test_a_stop_with_a_budget_gives_the_checkpoint_only_the_room_left(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, QUIET + "[checkpoint]\ndeadline = 300\ngrace = 5\n")
        await unit.start("start")
        never_ends(unit.driver)
        unit.driver.watcher.idle = True  # ready for the prompt; it never answers
        deadline = clock() + 40
        await unit.stop("daemon shutdown", checkpoint=True, deadline=deadline)
        (record,) = rt.cycles_of("stop")
        assert unit.state is UnitState.INACTIVE and record.flush == "auto" and record.outcome == "stopped"
        assert clock() <= deadline - 2  # the agent's stop_timeout (2 s) still fitted
        tight = clock() + 8  # room for ending the agent, not for a checkpoint
        await unit.start("start")
        await unit.stop("daemon shutdown", checkpoint=True, deadline=tight)
        assert unit.state is UnitState.INACTIVE and "left of the stop budget" in unit.reason
        assert len(rt.cycles_of("stop")) == 1
    asyncio.run(go())


def test_a_cycle_under_way_is_cut_at_the_end_of_the_budget(tmp_path: Path) -> None:
    """Issue 27 §1: one budget for the whole stop, not a checkpoint deadline of 300 s per unit."""
    async def go() -> None:
        unit, rt, clock = make(tmp_path, QUIET + "[checkpoint]\ndeadline = 300\n")
        await unit.start("start")
        never_ends(unit.driver)
        unit.driver.watcher.idle = True
        cycle = asyncio.ensure_future(unit.checkpoint())  # a threshold-like cycle, 300 s to wait
        for _ in range(20):
            await asyncio.sleep(0)
        assert unit.state is UnitState.CHECKPOINTING
        deadline = clock() + 30
        await unit.stop("daemon shutdown", checkpoint=True, deadline=deadline)
        await asyncio.gather(cycle, return_exceptions=True)
        assert unit.state is UnitState.INACTIVE and clock() <= deadline and len(rt.drivers) == 1
    asyncio.run(go())


def test_a_stop_never_waits_for_a_wakeup_and_says_the_real_bound(tmp_path: Path) -> None:
    """Issue 31 §5: the prompt never matches: the stop does not wait out the 60 s ready timeout."""
    async def go() -> None:
        unit, rt, clock = make(tmp_path, "[restart]\nstop_timeout = 2\n[checkpoint]\ndeadline = 4\nready_timeout = 60\n")
        rt.script = lambda d: setattr(d.watcher, "idle", False)  # its prompt never shows
        await unit.start("start")
        await asyncio.sleep(0)
        assert unit.delivering and unit.activity.startswith("waiting for the agent to be ready for its wakeup")
        assert 59 <= unit.activity_until - clock() <= 60  # the delivery's own bound, as status says it
        began = clock()
        await unit.stop("stop command", checkpoint=True)
        assert unit.state is UnitState.INACTIVE and clock() - began < 4 and "not taken its wakeup" in unit.reason
    asyncio.run(go())


def test_two_stops_at_once_are_one_stop_and_now_cuts_the_checkpoint_short(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, QUIET + "[checkpoint]\ndeadline = 100000\n")
        await unit.start("start")
        never_ends(unit.driver)
        unit.driver.watcher.idle = True
        graceful = asyncio.ensure_future(unit.stop("stop command", checkpoint=True))
        for _ in range(20):
            await asyncio.sleep(0)
        assert unit.state is UnitState.CHECKPOINTING and unit.activity == "waiting for the agent to write its notes"
        again = asyncio.ensure_future(unit.stop("stop command", checkpoint=True))
        await unit.stop("stop command", checkpoint=False)
        await asyncio.gather(graceful, again)
        assert unit.state is UnitState.INACTIVE and unit.driver is None and rt.drivers[0].ended == [False]
    asyncio.run(go())


def test_now_during_the_checkpoints_quit_still_ends_the_session_and_the_unit(tmp_path: Path) -> None:
    """A stop cut short while its cycle ended the old session (state stopping) must not stay stopping."""
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        hang = asyncio.Event()
        real_end = driver.end

        async def slow_quit(timeout: float, graceful: bool) -> list:
            if graceful:
                await hang.wait()  # the agent's quit keys go unanswered
            return await real_end(timeout, graceful)
        driver.end = slow_quit  # type: ignore[method-assign]
        graceful = asyncio.ensure_future(unit.stop("stop command", checkpoint=True))
        await wait_until_async(lambda: unit.state is UnitState.STOPPING, 10, what="the cycle's quit step")
        assert unit.busy and unit.op_what == "checkpoint (stop)"
        await unit.stop("stop command", checkpoint=False)
        await graceful
        assert unit.state is UnitState.INACTIVE and unit.driver is None and driver.closed
        assert driver.ended == [False] and not unit.busy
    asyncio.run(go())


def test_the_narration_says_the_daemons_own_bound_and_now_skips_only_a_checkpoints_waits() -> None:
    """Issue 27 §1 / 31 §5: "restart --now" said "--now skips" of the fresh agent's wait; the bound was a guess."""
    from supervisor.cli.progress import step

    turn = {"state": "checkpointing", "activity": "waiting for the agent's turn to end", "activity_bound": 59.6}
    assert step(turn) == "waiting for the turn to end (up to 60 s; --now skips)"
    assert step(turn, now=True) == "waiting for the turn to end (up to 60 s)"
    wake = {"state": "running", "activity": "waiting for the agent to be ready for its wakeup", "activity_bound": 60}
    assert step(wake) == "waiting for the agent to be ready for its wakeup (up to 60 s)"
    said = {"state": "inactive", "reason": "stop command; no checkpoint: the agent cannot take a turn: blocked: login"}
    assert step(said) == "stopped without a checkpoint: the agent cannot take a turn: blocked: login"
    assert step({"state": "error", "reason": "agentd error while reaping"}) == "error: agentd error while reaping"
