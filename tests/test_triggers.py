"""What makes agentd checkpoint, restart or stop a session on its own: each rule replayed, then end to end.

``[context] hard_limit``, ``max_session_age``, ``restart_every`` (in
``[context]`` and in ``[schedule]``), ``[schedule] max_runtime`` and
``stall_after`` with an agent that no longer answers.

First each rule is replayed on one unit with the fake clock and fake agent of
:mod:`tests.daemon_fakes` (milliseconds, the clock moved by hand to either
side of the limit).  Then one real end-to-end test per trigger: the real
daemon and CLI with the fake agent, observing only what the product exposes
(status, history, transcripts, the event log, the agent's input log), with
limits of a few seconds, since the replays prove the timing.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path

import pytest

from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from tests.conftest import CONSTRAINT, Project, alive, stays, wait_until
from tests.daemon_fakes import FakeClock, FakeDriver, FakeRuntime, spec


# ------------------------------------------------------------------ the rules, replayed with a fake clock
def replay(tmp_path: Path, text: str) -> tuple[UnitSupervisor, FakeRuntime, FakeClock]:
    """A unit whose fake agent answers a checkpoint prompt by writing its notes (a verified flush)."""
    clock = FakeClock()
    rt = FakeRuntime(clock, tmp_path)

    def answers(driver: FakeDriver) -> None:
        def on_type(d: FakeDriver, text: str) -> None:
            if text.startswith("CHECKPOINT"):
                rt.memory_files.writes += 1
            d.turn_ends()
        driver.on_type = on_type

    rt.script = answers
    return UnitSupervisor(spec(tmp_path, "[wakeup]\non_start = false\n" + text), rt, object()), rt, clock  # type: ignore[arg-type]


async def tick_at(unit: UnitSupervisor, rt: FakeRuntime, clock: FakeClock, at: float) -> None:
    """Move the clock to ``at`` seconds after the unit's first start and let one tick act."""
    clock.now = 1000.0 + at
    unit.watch.tick()
    await rt.settle()


@pytest.mark.parametrize(("section", "trigger"), [("context", "max_session_age"), ("context", "restart_every"),
                                                  ("schedule", "restart_every")])
def test_replay_a_session_gets_a_fresh_one_at_its_age_not_before(tmp_path: Path, section: str, trigger: str) -> None:
    async def go() -> None:
        unit, rt, clock = replay(tmp_path, f"[{section}]\n{trigger} = 5\n")
        await unit.start("start")
        first = unit.driver
        await tick_at(unit, rt, clock, 4.9)
        assert rt.cycles == [] and unit.driver is first
        await tick_at(unit, rt, clock, 5.0)
        (record,) = rt.cycles
        assert (record.trigger, record.outcome, record.flush) == (trigger, "respawned", "verified")
        assert record.old_session == first.session_id and first.ended == [True] and first.typed[0].startswith("CHECKPOINT")
        assert unit.state is UnitState.RUNNING and unit.driver is not first
        fresh = unit.driver
        await tick_at(unit, rt, clock, 5.0 + 4.9)  # the fresh session's age counts from its own start
        assert len(rt.cycles) == 1 and unit.driver is fresh
    asyncio.run(go())


def test_replay_max_runtime_stops_through_a_checkpoint_and_stays_down(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = replay(tmp_path, "[schedule]\nmax_runtime = 6\n[restart]\npolicy = \"always\"\n")
        await unit.start("start")
        await tick_at(unit, rt, clock, 5.9)
        assert unit.state is UnitState.RUNNING and rt.cycles == []
        await tick_at(unit, rt, clock, 6.0)
        assert unit.state is UnitState.INACTIVE and unit.reason == "max_runtime 6s reached"
        (record,) = rt.cycles
        assert (record.trigger, record.outcome, record.flush) == ("stop", "stopped", "verified")
        assert rt.timers == [] and len(rt.drivers) == 1  # a limit, not a crash: even policy "always" stays down
        await tick_at(unit, rt, clock, 600.0)
        assert unit.state is UnitState.INACTIVE and len(rt.drivers) == 1
    asyncio.run(go())


def test_replay_a_stall_interrupts_and_gives_up_on_the_turn_within_stall_after(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = replay(tmp_path, "[schedule]\nstall_after = 4\n[checkpoint]\ndeadline = 300\ngrace = 2\n")
        await unit.start("start")
        hung = unit.driver

        async def ignores_ctrl_c() -> None:
            hung.interrupted += 1

        hung.interrupt = ignores_ctrl_c  # type: ignore[method-assign]
        hung.on_type = lambda d, text: d.typed  # no output, no turn end: a hung agent
        hung.watcher.idle = False
        await tick_at(unit, rt, clock, 3.9)
        assert rt.cycles == []
        await tick_at(unit, rt, clock, 4.0)
        (record,) = rt.cycles
        assert hung.interrupted == 1 and record.trigger == "stall" and record.outcome == "respawned"
        assert record.flush == "auto" and "the turn did not end before the deadline" in record.notes
        assert rt.memory_files.autos and unit.driver is not hung and unit.state is UnitState.RUNNING
        # the turn was given stall_after (4 s), not the checkpoint's deadline (300 s), and then the grace
        assert clock() - (1000.0 + 4.0) < 4.0 + 2.0 + 5.0
    asyncio.run(go())


def test_replay_the_hard_limit_interrupts_the_turn_before_the_checkpoint_is_typed(tmp_path: Path) -> None:
    from supervisor.adapters.base import ContextFigure

    async def go() -> None:
        unit, rt, clock = replay(tmp_path, "[context]\nwindow = 2000\ncheckpoint_at = 0.6\nhard_limit = 0.6\n")
        await unit.start("start")
        busy = unit.driver
        order: list[str] = []
        real_interrupt = busy.interrupt

        async def interrupt() -> None:
            order.append("interrupt")
            await real_interrupt()

        busy.interrupt = interrupt  # type: ignore[method-assign]
        answer = busy.on_type
        busy.on_type = lambda d, text: (order.append(text[:10]), answer(d, text))  # type: ignore[assignment]
        busy.watcher.idle = False  # mid-turn, and the turn would not end by itself
        busy.figure = ContextFigure(1199, 2000, True, "fake")
        await tick_at(unit, rt, clock, 1.0)
        assert rt.cycles == []  # under the limit: nothing, even mid-turn
        busy.figure = ContextFigure(1200, 2000, True, "fake")
        await tick_at(unit, rt, clock, 2.0)
        (record,) = rt.cycles
        assert record.trigger == "hard_limit" and record.flush == "verified" and record.tokens_before == 1200
        assert order == ["interrupt", "CHECKPOINT"]
        assert "interrupted a running turn (hard limit)" in record.notes
    asyncio.run(go())


# ------------------------------------------------------------------ one real end-to-end test per trigger


def when(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def cycle(project: Project, unit: str, trigger: str, timeout: float = 90) -> dict:
    """The first history record with that trigger (waits for it)."""
    return wait_until(lambda: next((r for r in project.history(unit) if r["trigger"] == trigger), None), timeout,
                      what=f"a {trigger} cycle of {unit}")


def session_start(session: str) -> float:
    """When a session was started: its id begins with the UTC time, to the microsecond, before the spawn."""
    return datetime.strptime(session[:22], "%Y%m%dT%H%M%S.%f").replace(tzinfo=timezone.utc).timestamp()


def test_hard_limit_interrupts_a_running_turn(project: Project) -> None:
    project.init_memory()
    # one limit for both: the first figure past it is the hard limit, never the plain threshold
    project.fake_unit("eager", cycle=True, context="window = 2000\ncheckpoint_at = 0.6\nhard_limit = 0.6")
    project.agentd("start")
    first = project.wait_state("eager", "running")
    wait_until(lambda: len(project.inputs("eager")) == 1 and project.unit_status("eager")["turn"] == "idle", 60,
               what="the wakeup to be taken")
    assert project.unit_status("eager")["context"]["ratio"] < 0.6
    never = project.root / "never-created"
    # a turn that prints past the limit and then works on: it would never end by itself
    project.agentd("send", "eager", f"hold {never} 200")
    record = cycle(project, "eager", "hard_limit")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned"
    assert record["flush"] == "verified" and "interrupted a running turn (hard limit)" in record["notes"]
    assert record["tokens_before"] >= 0.6 * 2000
    old = project.transcript("eager", first["session"])
    assert "^C interrupted" in old and "released by" not in old
    typed = project.inputs("eager")[0]
    # each line agentd types into a REPL carries the constraints' digest after it (adapters/generic.py)
    assert typed[-2].split("\n")[0] == f"hold {never} 200" and CONSTRAINT in typed[-2]
    assert typed[-1].startswith("CHECKPOINT")  # after the interrupt
    wait_until(lambda: len(project.inputs("eager")) == 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("eager")[1][0]
    assert not alive(first["pid"])


def test_max_session_age_gives_a_fresh_session(project: Project) -> None:
    project.init_memory()
    project.fake_unit("aging", cycle=True, context="max_session_age = 2")
    project.agentd("start")
    first = project.wait_state("aging", "running")
    record = cycle(project, "aging", "max_session_age")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned"
    assert record["flush"] == "verified"
    due = next(e for e in project.events("checkpoint_due", "aging") if e["trigger"] == "max_session_age")
    assert when(due) - session_start(first["session"]) >= 2  # not before its age
    wait_until(lambda: len(project.inputs("aging")) >= 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("aging")[1][0]


def test_restart_every_gives_a_fresh_session_on_a_timer(project: Project) -> None:
    """The [schedule] spelling and the fresh session's own timer are replayed above."""
    project.init_memory()
    project.fake_unit("sched", cycle=True, schedule="restart_every = 2")
    project.agentd("start")
    first = project.wait_state("sched", "running")
    record = cycle(project, "sched", "restart_every")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned", record
    due = next(e for e in project.events("checkpoint_due", "sched") if e["trigger"] == "restart_every")
    assert when(due) - session_start(first["session"]) >= 2
    wait_until(lambda: len(project.inputs("sched")) >= 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("sched")[1][0]


def test_max_runtime_stops_the_unit_through_a_checkpoint(project: Project) -> None:
    project.init_memory()
    project.fake_unit("bounded", cycle=True, schedule="max_runtime = 3")
    project.agentd("start")
    first = project.wait_state("bounded", "running")
    stopped = project.wait_state("bounded", "inactive", timeout=90)
    assert stopped["reason"] == "max_runtime 3s reached"
    (record,) = project.history("bounded")
    assert record["trigger"] == "stop" and record["outcome"] == "stopped" and record["flush"] == "verified"
    (reached,) = project.events("max_runtime_reached", "bounded")
    starting = next(e for e in project.events("unit_state", "bounded") if e["new"] == "starting")  # the run began
    assert when(reached) - when(starting) >= 3 - 0.05
    assert not alive(first["pid"])
    # a limit, not a crash: the unit stays down
    assert stays(lambda: project.unit_status("bounded")["state"] == "inactive", 1.0)
    assert project.agentd("status", "bounded", check=False).returncode == 3


def test_a_stalled_agent_that_does_not_answer_is_restarted(project: Project) -> None:
    project.init_memory()
    # it prints a line every second while it works, so only `hang` makes it go silent
    project.fake_unit("stuck", "--work-interval", "1", "--work-lines", "1", cycle=True, schedule="stall_after = 4")
    project.agentd("start")
    first = project.wait_state("stuck", "running")
    wait_until(lambda: len(project.inputs("stuck")) == 1 and project.unit_status("stuck")["turn"] == "idle", 60,
               what="the wakeup to be taken")
    project.agentd("send", "stuck", "hang")  # no output, no input read, Ctrl-C ignored
    record = cycle(project, "stuck", "stall")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned", record
    assert record["flush"] == "auto" and "the turn did not end before the deadline" in record["notes"]
    assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()
    assert project.events("stalled", "stuck")
    new = wait_until(lambda: (r := project.unit_status("stuck"))["state"] == "running"
                     and r["session"] == record["new_session"] and r, 60, what="the fresh session")
    assert not alive(first["pid"]) and new["pid"] != first["pid"]
    wait_until(lambda: len(project.inputs("stuck")) == 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("stuck")[1][0]
