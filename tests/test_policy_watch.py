"""The continuity policy's own rules, each at its edge: what one tick does, and when a checkpoint is due (pure).

Each test pins one rule of :mod:`supervisor.continuity.policy` where it
turns (``>=`` against ``>``, a fallback, a cap), so a wrong change to the
rule fails here in milliseconds (``python -m bench.mutation policy``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from supervisor.adapters.base import ContextFigure
from supervisor.continuity.policy import (DEFAULT_PROMPT, PERSON_IDLE, After, Checkpoint, EndSession, Freeze,
                                          Frozen, Seen, StopUnit, Trigger, checkpoint_prompt, due, watch)
from supervisor.daemon.unit import UnitSupervisor
from tests.daemon_fakes import FakeClock, FakeRuntime, spec

QUIET = "[wakeup]\non_start = false\n"
LOW = ContextFigure(100, 1000, True, "t")


def seen(**kw: object) -> Seen:
    base: dict[str, object] = dict(context=LOW, session_age=10.0, silent_for=0.0, run_age=10.0, failure=None,
                                   may_type=False)
    base.update(kw)
    return Seen(**base)  # type: ignore[arg-type]


def test_trigger_and_after_names_are_what_history_records() -> None:
    assert [t.value for t in Trigger] == ["threshold", "hard_limit", "max_session_age", "restart_every", "stall",
                                          "pre_compact", "command", "restart", "stop", "freeze"]
    assert [a.value for a in After] == ["respawn", "stop"]


def test_the_default_prompt_asks_for_notes_decisions_and_the_task_state(tmp_path: Path) -> None:
    prompt = checkpoint_prompt(spec(tmp_path, QUIET))
    assert prompt == DEFAULT_PROMPT
    for asked in ("agentd note", "--confirmed", "agentd decide", "--why", "agentd task-state", "Reply DONE"):
        assert asked in prompt
    own = spec(tmp_path, QUIET + '[checkpoint]\nprompt = "write it all down"\n')
    assert checkpoint_prompt(own) == "write it all down"


def test_a_one_token_window_still_counts(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET)
    assert due(s, ContextFigure(1, 1, True, "t"), 0.0) is Trigger.HARD_LIMIT
    assert due(s, ContextFigure(0, 0, True, "t"), 0.0) is None  # no window known: no ratio


def test_restart_every_falls_back_to_the_schedule_and_the_context_one_wins(tmp_path: Path) -> None:
    sched = spec(tmp_path, QUIET + "[schedule]\nrestart_every = 60\n")
    assert due(sched, LOW, 59.9) is None
    assert due(sched, LOW, 60.0) is Trigger.RESTART_EVERY  # at its age, not after
    assert due(sched, None, 61.0) is Trigger.RESTART_EVERY
    both = spec(tmp_path, QUIET + "[context]\nrestart_every = 30\n[schedule]\nrestart_every = 60\n")
    assert due(both, LOW, 30.0) is Trigger.RESTART_EVERY
    ctx = spec(tmp_path, QUIET + "[context]\nrestart_every = 30\n")
    assert due(ctx, LOW, 29.0) is None and due(ctx, LOW, 30.0) is Trigger.RESTART_EVERY
    assert due(spec(tmp_path, QUIET), LOW, 1e9) is None  # neither: never


def test_the_checkpoint_defaults_wait_for_the_turn_and_use_the_units_deadline() -> None:
    action = Checkpoint(Trigger.COMMAND)
    assert action.interrupt is False and action.deadline is None


def test_max_runtime_stops_at_its_time_once(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET + "[schedule]\nmax_runtime = 60\n")
    assert watch(s, seen(run_age=59.9)) is None
    assert watch(s, seen(run_age=60.0)) == StopUnit("max_runtime 60s reached")
    assert watch(s, seen(run_age=None)) is None  # it acted already


def test_a_failure_ends_the_session(tmp_path: Path) -> None:
    assert watch(spec(tmp_path, QUIET), seen(failure="the model server is unreachable")) == EndSession(
        "the model server is unreachable")


def test_a_blocking_screen_without_advice_names_only_itself(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET + "[freeze]\nafter = 0.5\n")
    assert watch(s, seen(blocked="trust")) is None  # just seen: it has not lasted yet
    assert watch(s, seen(blocked="trust", blocked_for=0.5)) == Frozen(Freeze.BLOCKED_SCREEN, "blocked: trust for 0s",
                                                                      restart=False)


def test_a_stall_interrupts_within_stall_after_even_with_checkpoints_off(tmp_path: Path) -> None:
    s = spec(tmp_path, QUIET + "[schedule]\nstall_after = 40\n[checkpoint]\ndeadline = 300\n")
    assert watch(s, seen(silent_for=39.9)) is None
    assert watch(s, seen(silent_for=40.0)) == Checkpoint(Trigger.STALL, interrupt=True, deadline=40.0)
    short = spec(tmp_path, QUIET + "[schedule]\nstall_after = 40\n[checkpoint]\ndeadline = 10\nenabled = false\n")
    assert watch(short, seen(silent_for=41.0)) == Checkpoint(Trigger.STALL, interrupt=True, deadline=10.0)


def test_stuck_above_the_hard_limit_without_a_figure_says_so(tmp_path: Path) -> None:
    off = spec(tmp_path, QUIET + "[checkpoint]\nenabled = false\n[freeze]\nafter = 5\n")
    action = watch(off, seen(context=None, above_hard_limit_for=5.0))
    assert action == Frozen(Freeze.STUCK_ABOVE_HARD_LIMIT,
                            "context at ?, at or above the hard limit (90%) for 5s", restart=True)


def test_queued_text_waits_person_idle_seconds_after_a_persons_keystroke(tmp_path: Path) -> None:
    """The one rule that reads :data:`PERSON_IDLE`: agentd types only once a person stopped that long ago."""
    async def go() -> None:
        clock = FakeClock()
        rt = FakeRuntime(clock, tmp_path)
        unit = UnitSupervisor(spec(tmp_path, QUIET), rt, object())  # type: ignore[arg-type]
        await unit.start("start")
        unit.driver.watcher.idle = False
        await unit.talk.send("run the tests")
        unit.driver.watcher.idle = True
        unit.talk.person_input()
        clock.advance(PERSON_IDLE - 0.1)
        unit.watch.tick()
        await rt.settle()
        assert unit.driver.typed == []
        clock.advance(0.1)
        unit.watch.tick()
        await rt.settle()
        assert unit.driver.typed == ["run the tests"]
    asyncio.run(go())
