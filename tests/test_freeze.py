"""Frozen sessions, named and acted on: the pure policy, then a unit replayed with the fake agent.

Each freeze of :class:`supervisor.continuity.policy.Freeze` is detected, shown
in status (``unit.watch.frozen``), written once to history, and acted on as
the unit's ``[freeze]`` says (``restart`` through the cycle, or ``notify``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from supervisor.adapters.base import Blocked, BlockKind, ContextFigure, Keystrokes, Meaning
from supervisor.continuity.policy import Checkpoint, Freeze, Frozen, Trigger, TypeQueued, hold, overdue, watch
from supervisor.daemon.commands import status_row
from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from supervisor.memory.scaffold import init_store
from tests.daemon_fakes import QUIET, FakeClock, FakeRuntime, seen, spec



# ------------------------------------------------------------------ the policy (pure)
def test_each_freeze_needs_freeze_after_seconds(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET)
    assert watch(s, seen(blocked="trust", blocked_for=29, blocked_todo="run agentd trust u")) is None
    action = watch(s, seen(blocked="trust", blocked_for=30, blocked_todo="run agentd trust u"))
    assert action == Frozen(Freeze.BLOCKED_SCREEN, "blocked: trust for 30s; run agentd trust u", restart=False)
    action = watch(s, seen(blocked="approval", blocked_for=31))
    assert isinstance(action, Frozen) and action.freeze is Freeze.APPROVAL_WAIT and action.restart
    assert watch(s, seen(idle_after_compaction=29.0)) is None
    action = watch(s, seen(idle_after_compaction=30.0))
    assert isinstance(action, Frozen) and action.freeze is Freeze.IDLE_AFTER_COMPACTION and action.restart
    # queued text goes first: typing it is the agent going on
    assert watch(s, seen(idle_after_compaction=40.0, may_type=True)) == TypeQueued()


def test_stuck_above_the_hard_limit_only_when_checkpoints_cannot_bring_it_down(tmp_path: Path) -> None:
    high = ContextFigure(950, 1000, True, "t")
    on = spec(tmp_path, QUIET)
    assert watch(on, seen(context=high, above_hard_limit_for=100)) == Checkpoint(Trigger.HARD_LIMIT, interrupt=True)
    off = spec(tmp_path, "[wakeup]\non_start = false\n[checkpoint]\nenabled = false\n"
                         "[freeze]\nafter = 30\nstuck_above_hard_limit = \"notify\"\n")
    assert watch(off, seen(context=high, above_hard_limit_for=10)) is None
    action = watch(off, seen(context=high, above_hard_limit_for=30))
    assert isinstance(action, Frozen) and action.freeze is Freeze.STUCK_ABOVE_HARD_LIMIT and not action.restart
    assert "95%" in action.detail


def test_a_checkpoint_is_overdue_after_everything_it_may_wait_for(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET + "[checkpoint]\ndeadline = 100\ngrace = 10\nready_timeout = 20\n")
    limit = 100 + 10 + 2 * 5 + 20 + 30
    assert overdue(s, limit - 1, stop_timeout=5) is None
    late = overdue(s, limit, stop_timeout=5)
    assert late is not None and late.freeze is Freeze.CHECKPOINT_OVERDUE and late.restart


# ------------------------------------------------------------------ a unit, replayed with the fake agent
def make(tmp_path: Path, text: str = QUIET) -> tuple[UnitSupervisor, FakeRuntime, FakeClock]:
    init_store(tmp_path)
    clock = FakeClock()
    rt = FakeRuntime(clock, tmp_path)

    class _Adapter:
        def sandbox(self) -> object:
            from supervisor.adapters.base import Sandbox

            return Sandbox(mode="workspace-write", bypassed=False, fenced=False)

    return UnitSupervisor(spec(tmp_path, text), rt, _Adapter()), rt, clock  # type: ignore[arg-type]


def freeze_records(rt: FakeRuntime) -> list[str]:
    return [r.trigger for r in rt.cycles if r.trigger.startswith("freeze: ")]


def test_idle_after_its_own_compaction_restarts_through_the_cycle(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False  # a turn runs; the agent compacts inside it
        driver.meanings = [Meaning.COMPACTED, Meaning.OWN_COMPACTION]
        await unit.talk.agent_event({"hook_event_name": "SessionStart", "source": "compact"}, None)
        driver.turn_ends()
        unit.watch.tick()
        assert unit.watch.frozen is None
        clock.advance(29)
        unit.watch.tick()
        assert unit.watch.frozen is None and unit.state is UnitState.RUNNING
        clock.advance(1)
        unit.watch.tick()
        assert unit.watch.frozen is not None and unit.watch.frozen["state"] == "idle_after_compaction"
        assert unit.watch.frozen["action"] == "restart"
        row = status_row(unit, None)
        assert row["frozen"]["state"] == "idle_after_compaction" and row["sandbox"]["mode"] == "workspace-write"
        await rt.settle()
        assert freeze_records(rt) == ["freeze: idle_after_compaction"]
        cycle = [r for r in rt.cycles if r.trigger == "freeze"]
        assert cycle and cycle[0].outcome == "respawned" and unit.driver is not driver
        # before the next tick, status already shows the fresh session unfrozen (the freeze was the old one's)
        assert status_row(unit, None)["frozen"] is None
        unit.watch.tick()
        assert unit.watch.frozen is None  # the fresh session is not frozen
    asyncio.run(go())


def test_an_agent_that_goes_on_after_compaction_is_not_frozen(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False
        driver.meanings = [Meaning.COMPACTED]  # a /compact a person typed: not its own
        await unit.talk.agent_event({"hook_event_name": "SessionStart", "source": "compact"}, None)
        driver.turn_ends()
        clock.advance(100)
        unit.watch.tick()
        assert unit.watch.frozen is None
        driver.meanings = [Meaning.COMPACTED, Meaning.OWN_COMPACTION]
        driver.watcher.idle = False
        await unit.talk.agent_event({"hook_event_name": "SessionStart", "source": "compact"}, None)
        driver.turn_ends()
        driver.watcher.idle = False  # it went on: another turn
        driver.turn_ends()
        clock.advance(100)
        unit.watch.tick()
        assert unit.watch.frozen is None and freeze_records(rt) == []
    asyncio.run(go())


def test_an_approval_nobody_gives_is_named_and_the_cycle_interrupts_it(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False  # the turn waits on the prompt
        driver.screen = Blocked(BlockKind.APPROVAL, "answer it in `agentd attach`")
        unit.watch.tick()
        clock.advance(30)
        unit.watch.tick()
        assert unit.watch.frozen["state"] == "approval_wait"
        assert "blocked: approval for 30s" in unit.watch.frozen["detail"]
        await rt.settle()
        assert driver.interrupted == 1  # the cycle interrupted the waiting prompt first
        assert [r.trigger for r in rt.cycles] == ["freeze: approval_wait", "freeze"]
    asyncio.run(go())


def test_a_blocking_screen_is_shown_with_what_to_do_or_answered_when_the_unit_allows(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        driver.screen = Blocked(BlockKind.TRUST, "run `agentd trust u`")
        rt.published.clear()
        unit.watch.tick()
        assert rt.published == ["u"]  # named: the dashboard's streams are told at once, not at the next change
        unit.watch.tick()
        assert rt.published == ["u"]  # the same screen again: nothing new to tell
        clock.advance(30)
        unit.watch.tick()
        assert rt.published == ["u", "u"]  # the freeze named after [freeze] after
        unit.watch.tick()  # named once
        assert rt.published == ["u", "u"]
        from supervisor.cli.render import state_label, status_note

        row = status_row(unit, None)
        assert row["frozen"]["action"] == "notify" and state_label(row) == "running (blocked: trust)"
        assert "agentd trust u" in status_note(row)
        assert freeze_records(rt) == ["freeze: blocked_screen"] and unit.state is UnitState.RUNNING
        driver.screen = None  # someone answered it
        rt.published.clear()
        unit.watch.tick()
        assert unit.watch.frozen is None and unit.watch.blocked is None
        assert rt.published and set(rt.published) == {"u"}  # gone: told at once too
        # a screen the unit lets agentd answer is answered, never frozen
        driver.screen = Blocked(BlockKind.TRUST, "answered", Keystrokes.of((b"\r", 0.5)))
        unit.watch.tick()
        await rt.settle()
        assert driver.keys == [b"\r"] and unit.watch.frozen is None
    asyncio.run(go())


def test_stuck_above_the_hard_limit_with_checkpoints_off(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, "[wakeup]\non_start = false\n[checkpoint]\nenabled = false\n[freeze]\nafter = 30\n")
        await unit.start("start")
        unit.driver.figure = ContextFigure(950, 1000, True, "fake")
        unit.watch.tick()
        clock.advance(30)
        unit.watch.tick()
        assert unit.watch.frozen["state"] == "stuck_above_hard_limit"
        await rt.settle()
        assert [r.trigger for r in rt.cycles] == ["freeze: stuck_above_hard_limit", "freeze"]
    asyncio.run(go())


def test_an_overdue_checkpoint_is_named_and_restarted(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt, clock = make(tmp_path, QUIET + "[checkpoint]\ndeadline = 10\ngrace = 1\nready_timeout = 5\n")
        await unit.start("start")
        old = unit.driver
        hang = asyncio.Event()

        async def wedged() -> None:  # ending the old session never returns
            await hang.wait()

        unit.end_session = wedged  # type: ignore[method-assign]
        task = unit.cycles.begin(Trigger.COMMAND)
        for _ in range(50):
            await asyncio.sleep(0)
        assert unit.state in (UnitState.CHECKPOINTING, UnitState.RESPAWNING)  # on its way to the wedged end
        unit.watch.tick()
        clock.advance(10 + 1 + 2 * 1 + 5 + 30)
        unit.watch.tick()
        assert unit.watch.frozen["state"] == "checkpoint_overdue"
        await rt.settle()
        assert task.done() and unit.state is UnitState.RUNNING and unit.driver is not old
        assert "freeze: checkpoint_overdue" in freeze_records(rt)
    asyncio.run(go())


def test_the_policy_names_a_storm_a_stopped_process_and_holds_cycles_back(tmp_path: Path) -> None:
    """Issue 31 §4-5: a fresh session due within its first turn after the wakeup is a storm (named once, then
    the cycle runs after the hold); a stopped process is a freeze after [freeze] after."""
    s = spec(tmp_path, QUIET)
    high = ContextFigure(750, 1000, True, "t")
    action = watch(s, seen(context=high, first_turn=True, wakeup_tokens=600))
    assert isinstance(action, Frozen) and action.freeze is Freeze.CYCLE_STORM and not action.restart
    assert "600-token wakeup" in action.detail and "75% of a 1000-token window" in action.detail
    assert "[wakeup] budget (now 2500)" in action.detail and "checkpoint_at (now 0.7)" in action.detail
    assert watch(s, seen(context=high, first_turn=True, storm_named=True, held=True)) is None  # backing off
    assert watch(s, seen(context=high, first_turn=True, storm_named=True)) == Checkpoint(Trigger.THRESHOLD)
    assert watch(s, seen(context=high)) == Checkpoint(Trigger.THRESHOLD)  # past its first turn: a plain cycle
    # a long first turn that did more work than its wakeup holds (the demo's periodic work, an autonomous agent's
    # hour-long turn) is a plain cycle, not a storm; the edge is work == the wakeup's tokens
    assert watch(s, seen(context=high, first_turn=True, wakeup_tokens=375)) == Checkpoint(Trigger.THRESHOLD)
    assert isinstance(watch(s, seen(context=high, first_turn=True, wakeup_tokens=376)), Frozen)
    assert watch(s, seen(context=high, first_turn=True)) == Checkpoint(Trigger.THRESHOLD)  # no wakeup known
    assert watch(s, seen(context=high, held=True)) is None  # notes that cannot be written: held too
    assert [hold(n) for n in (1, 2, 3)] == [60, 120, 240] and hold(100) == 1800
    assert watch(s, seen(stopped_for=29)) is None
    stopped = watch(s, seen(stopped_for=30))
    assert isinstance(stopped, Frozen) and stopped.freeze is Freeze.STOPPED_PROCESS and not stopped.restart


def _over_the_threshold(driver: object) -> None:
    driver.figure = ContextFigure(750, 1000, True, "fake")  # type: ignore[attr-defined]


def test_a_cycle_storm_is_named_backed_off_and_says_what_to_change(tmp_path: Path) -> None:
    """Issue 31 §4: every session crosses checkpoint_at with its wakeup's answer: named, held 60 s, then 120 s."""
    async def go() -> None:
        unit, rt, clock = make(tmp_path, "[freeze]\nafter = 30\n")

        def cramped(driver: object) -> None:  # its wakeup's answer crosses, with less work than the wakeup itself
            wakeup = unit.last_wakeup.tokens if unit.last_wakeup is not None else 100
            driver.figure = ContextFigure(wakeup * 3 // 2, wakeup * 2, True, "fake")  # type: ignore[attr-defined]
        rt.script = cramped
        await unit.start("start")
        await unit.delivered()
        first = unit.driver
        assert first.turns_ended == 1  # it answered its wakeup, and is over the threshold
        unit.watch.tick()
        await rt.settle()
        frozen = status_row(unit, None)["frozen"]
        assert frozen["state"] == "cycle_storm" and frozen["action"] == "back off 60s"
        assert "first turn after" in frozen["detail"] and "[context] checkpoint_at" in frozen["detail"]
        assert unit.driver is first and not [r for r in rt.cycles if r.trigger == "threshold"]
        clock.advance(59)
        unit.watch.tick()
        await rt.settle()
        assert unit.driver is first and unit.watch.frozen["state"] == "cycle_storm"  # still held, still said
        clock.advance(1)
        unit.watch.tick()
        await rt.settle()
        assert [r.outcome for r in rt.cycles if r.trigger == "threshold"] == ["respawned"] and unit.driver is not first
        unit.watch.tick()  # the fresh session storms again: held twice as long
        await rt.settle()
        assert unit.watch.frozen["action"] == "back off 120s" and "#2 in a row" in unit.watch.frozen["detail"]
        assert freeze_records(rt) == ["freeze: cycle_storm", "freeze: cycle_storm"]
        unit.driver.watcher.turns_ended = 2  # a session that gets past its first turn ends the storm
        unit.watch.tick()
        assert unit.watch.storms == 0
    asyncio.run(go())


def test_a_stopped_process_is_named(tmp_path: Path) -> None:
    """Issue 31 §5: a SIGSTOPped agent (running, turn busy, no output) is named after [freeze] after."""
    async def go() -> None:
        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        driver = unit.driver
        driver.watcher.idle = False
        driver.sigstopped = True
        unit.watch.tick()
        clock.advance(30)
        unit.watch.tick()
        from supervisor.cli.render import state_label

        row = status_row(unit, None)
        assert row["frozen"]["state"] == "stopped_process" and row["frozen"]["action"] == "notify"
        assert "SIGSTOP" in row["frozen"]["detail"] and state_label(row) == "running (frozen: stopped_process)"
        assert freeze_records(rt) == ["freeze: stopped_process"]
    asyncio.run(go())


def test_notes_that_cannot_be_written_keep_the_session_and_back_off(tmp_path: Path) -> None:
    """Issue 31 §5: a read-only .agent/ at checkpoint: the session (the only copy of its memory) goes on, named."""
    async def go() -> None:
        import errno

        unit, rt, clock = make(tmp_path)
        await unit.start("start")
        first = unit.driver

        def read_only(reason: str, tail: str) -> None:
            raise OSError(errno.EROFS, "Read-only file system")
        rt.memory_files.write_auto = read_only  # type: ignore[method-assign]
        _over_the_threshold(first)
        unit.watch.tick()
        await rt.settle()
        (record,) = rt.cycles
        assert record.flush == "failed" and record.outcome.startswith("kept the session")
        assert unit.state is UnitState.RUNNING and unit.driver is first and first.ended == []
        frozen = status_row(unit, None)["frozen"]
        assert frozen["state"] == "memory_unwritable" and frozen["action"] == "back off 60s"
        assert "Read-only file system" in frozen["detail"]
        clock.advance(30)
        unit.watch.tick()
        await rt.settle()
        assert len(rt.cycles) == 1  # held back
        clock.advance(30)
        unit.watch.tick()
        await rt.settle()
        assert len(rt.cycles) == 2 and unit.watch.frozen["action"] == "back off 120s"
        del rt.memory_files.write_auto  # writable again: the next cycle replaces the session
        clock.advance(120)
        unit.watch.tick()
        await rt.settle()
        assert rt.cycles[-1].outcome == "respawned" and unit.driver is not first
    asyncio.run(go())


# ------------------------------------------------------------------ the real fake agent, under the real daemon
def test_an_approval_nobody_gives_in_a_real_session_is_named_and_restarted(project) -> None:
    """The fake agent shows an approval dialog and waits; the daemon names approval_wait and restarts through the cycle."""
    from tests.conftest import wait_until

    project.agentd("init")
    project.fake_unit("ask", cycle=True, freeze="after = 2")
    project.agentd("start")
    first = wait_until(lambda: (r := project.unit_status("ask")) and r["state"] == "running" and r["turn"] == "idle" and r,
                       60, what="the fake agent, idle after its wakeup")
    project.agentd("send", "ask", "ask 600")
    frozen = wait_until(lambda: [r for r in _history(project, "ask") if r["trigger"] == "freeze: approval_wait"], 60,
                        what="the freeze in history")
    assert frozen[0]["outcome"] == "restarting" and "approval" in frozen[0]["notes"][0]
    cycle = wait_until(lambda: [r for r in _history(project, "ask") if r["trigger"] == "freeze" and r["outcome"] != "running"],
                       90, what="the cycle the freeze started")[0]
    assert cycle["outcome"] == "respawned" and cycle["flush"] == "verified", cycle
    assert any("interrupted a running turn" in n for n in cycle["notes"])
    old = (project.state / "transcripts" / "ask" / f"{first['session']}.txt").read_text()
    assert "Would you like to run the following command?" in old
    assert "declined" in old  # the interrupt answered the dialog before the checkpoint
    row = project.wait_state("ask", "running", 60)
    assert row["session"] != first["session"] and not row.get("frozen")
    project.agentd("stop")


def _history(project, unit: str) -> list[dict]:
    import json

    out = project.agentd("history", unit, "--json", check=False).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]
