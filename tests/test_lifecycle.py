"""Restart policy and the state table, replayed as histories without processes."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from supervisor.daemon.lifecycle import (
    TRANSITIONS,
    ExitInfo,
    GiveUp,
    IllegalTransition,
    Restart,
    RestartConfig,
    RestartTracker,
    StayDown,
    UnitState,
    check_transition,
)

FAIL = ExitInfo(code=1)


def test_every_state_has_a_row_and_illegal_moves_raise() -> None:
    assert set(TRANSITIONS) == set(UnitState)
    check_transition(UnitState.INACTIVE, UnitState.STARTING)
    with pytest.raises(IllegalTransition):
        check_transition(UnitState.INACTIVE, UnitState.RUNNING)
    with pytest.raises(IllegalTransition):
        check_transition(UnitState.STOPPING, UnitState.BACKOFF)
    with pytest.raises(IllegalTransition):
        check_transition(UnitState.FAILED, UnitState.RUNNING)


def test_any_state_falls_into_error_and_a_start_or_a_stop_leaves_it() -> None:
    """Issue 31 §1: what handling a unit raises names the unit's error state; the table stays strict."""
    for state in UnitState:
        if state is not UnitState.ERROR:
            check_transition(state, UnitState.ERROR)
    assert TRANSITIONS[UnitState.ERROR] == {UnitState.INACTIVE, UnitState.STARTING}
    with pytest.raises(IllegalTransition):  # the storm's stale reactions are still bugs at the table
        check_transition(UnitState.INACTIVE, UnitState.BACKOFF)
    with pytest.raises(IllegalTransition):
        check_transition(UnitState.BACKOFF, UnitState.BACKOFF)
    with pytest.raises(IllegalTransition):
        check_transition(UnitState.ERROR, UnitState.RUNNING)
    check_transition(UnitState.CHECKPOINTING, UnitState.RUNNING)  # notes that cannot be written keep the session


def test_backoff_grows_and_is_capped() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=1, multiplier=2, max_delay=10, burst=100, interval=1000))
    delays = []
    now = 0.0
    for _ in range(7):
        tracker.record_start(now)
        decision = tracker.on_exit(FAIL, uptime=0.5, now=now)
        assert isinstance(decision, Restart)
        delays.append(decision.delay)
        now += decision.delay
    assert delays == [1, 2, 4, 8, 10, 10, 10]


def test_backoff_resets_after_a_stable_run() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=1, multiplier=2, reset_after=60, burst=100, interval=1000))
    for i in range(3):
        tracker.record_start(float(i))
        tracker.on_exit(FAIL, uptime=1, now=float(i))
    tracker.record_start(10)
    decision = tracker.on_exit(FAIL, uptime=61, now=71)
    assert decision == Restart(1)


def test_start_limit_ends_in_failed_with_reason() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=0.1, burst=3, interval=60))
    decisions = []
    now = 0.0
    for _ in range(3):
        tracker.record_start(now)
        decisions.append(tracker.on_exit(ExitInfo(signal=9), uptime=0.1, now=now + 0.1))
        now += 1
    assert isinstance(decisions[0], Restart) and isinstance(decisions[1], Restart)
    assert isinstance(decisions[2], GiveUp)
    assert "start limit" in decisions[2].reason and "SIGKILL" in decisions[2].reason


def test_starts_outside_the_window_do_not_count() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=0.1, burst=3, interval=10))
    now = 0.0
    for _ in range(10):
        tracker.record_start(now)
        assert isinstance(tracker.on_exit(FAIL, uptime=0.1, now=now), Restart)
        now += 6  # only two starts ever fall inside a 10 s window


@pytest.mark.parametrize(
    ("policy", "exit", "expected"),
    [
        ("no", FAIL, StayDown),
        ("no", ExitInfo(code=0), StayDown),
        ("on-failure", ExitInfo(code=0), StayDown),
        ("on-failure", FAIL, Restart),
        ("on-failure", ExitInfo(signal=15), Restart),
        ("always", ExitInfo(code=0), Restart),
    ],
)
def test_policies(policy: str, exit: ExitInfo, expected: type) -> None:
    tracker = RestartTracker(RestartConfig(policy=policy))
    tracker.record_start(0)
    assert isinstance(tracker.on_exit(exit, uptime=1, now=1), expected)


@given(st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=40))
def test_delays_never_exceed_the_cap_and_never_shrink_without_a_stable_run(uptimes: list[float]) -> None:
    cfg = RestartConfig(initial_delay=0.5, multiplier=3, max_delay=7, reset_after=10, burst=1000, interval=1e9)
    tracker = RestartTracker(cfg)
    now, last = 0.0, 0.0
    for uptime in uptimes:
        tracker.record_start(now)
        decision = tracker.on_exit(FAIL, uptime=uptime, now=now + uptime)
        assert isinstance(decision, Restart)
        assert cfg.initial_delay <= decision.delay <= cfg.max_delay
        assert decision.delay >= last
        last = decision.delay
        now += uptime + decision.delay


def test_exit_info_describes_codes_and_signals() -> None:
    assert ExitInfo(code=3).describe() == "exit 3"
    assert ExitInfo(signal=9).describe() == "signal SIGKILL"
    assert ExitInfo(code=0).success and not ExitInfo(signal=15).success


def test_state_names_are_the_words_status_and_history_show() -> None:
    assert [s.value for s in UnitState] == ["inactive", "starting", "running", "stopping", "backoff", "failed",
                                            "checkpointing", "respawning", "waiting", "error"]
    assert UnitState("backoff") is UnitState.BACKOFF and UnitState.RUNNING == "running"


def test_the_policy_defaults_are_the_unit_files_defaults() -> None:
    from supervisor.config.units import RestartSection

    section = RestartSection()
    assert RestartConfig() == RestartConfig.of(section)
    assert RestartConfig.of(section.model_copy(update={"burst": 9, "policy": "always"})) == RestartConfig(policy="always",
                                                                                                         burst=9)


def test_a_start_exactly_interval_seconds_ago_still_counts_and_record_start_drops_older_ones() -> None:
    tracker = RestartTracker(RestartConfig(burst=2, interval=10))
    tracker.record_start(0)
    tracker.record_start(10)  # 10 s after the first: both inside the window
    assert list(tracker.starts) == [0, 10]
    assert isinstance(tracker.on_exit(FAIL, uptime=0, now=10), GiveUp)
    tracker = RestartTracker(RestartConfig(burst=3, interval=10))
    tracker.record_start(0)
    tracker.record_start(10.5)  # the first is now 10.5 s old: out of the window
    assert list(tracker.starts) == [10.5]


def test_the_window_is_trimmed_at_the_exit_too() -> None:
    tracker = RestartTracker(RestartConfig(burst=2, interval=10, reset_after=1e9))
    tracker.record_start(0)
    tracker.record_start(1)
    # the session ran long but not long enough to reset: at its exit both starts are out of the window
    assert tracker.on_exit(FAIL, uptime=99, now=100) == Restart(1.0)


def test_a_session_up_exactly_reset_after_resets_the_backoff_and_the_start_limit() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=1, multiplier=2, reset_after=60, burst=2, interval=1000))
    tracker.record_start(0)
    assert tracker.on_exit(FAIL, uptime=1, now=1) == Restart(1.0)
    tracker.record_start(2)
    # two starts in the window would hit the limit: a stable run clears them and the backoff
    assert tracker.on_exit(FAIL, uptime=60, now=62) == Restart(1.0)
    assert tracker.consecutive_failures == 1 and list(tracker.starts) == []


def test_clean_exits_say_why_they_stay_down() -> None:
    tracker = RestartTracker(RestartConfig())
    tracker.record_start(0)
    assert tracker.on_exit(ExitInfo(code=0), uptime=1, now=1) == StayDown(
        "exited cleanly (exit 0); restart policy is 'on-failure'")
    assert RestartTracker(RestartConfig(policy="no")).on_exit(ExitInfo(signal=9), 1, 1) == StayDown(
        "signal SIGKILL; restart policy is 'no'")
    assert tracker.consecutive_failures == 0  # a clean exit is not a failure


def test_a_spawn_error_is_a_failure_with_no_uptime_unless_the_policy_is_no() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=1, multiplier=2, reset_after=0.5, burst=2, interval=100))
    tracker.record_start(0)
    assert tracker.on_spawn_error("no such command", now=0) == Restart(1.0)
    tracker.record_start(1)
    # no uptime, so the backoff does not reset even with reset_after 0.5; the second start hits the limit
    decision = tracker.on_spawn_error("no such command", now=1)
    assert isinstance(decision, GiveUp) and decision.reason.endswith("last exit 127")
    assert tracker.consecutive_failures == 2 and tracker.next_delay() == 2.0
    never = RestartTracker(RestartConfig(policy="no"))
    assert never.on_spawn_error("no such command", now=0) == StayDown("no such command")
    assert never.consecutive_failures == 0


def test_reset_forgets_starts_and_failures() -> None:
    tracker = RestartTracker(RestartConfig(initial_delay=1, multiplier=2, burst=100, interval=100))
    for now in range(3):
        tracker.record_start(now)
        tracker.on_exit(FAIL, uptime=0, now=now)
    assert tracker.next_delay() == 4.0
    tracker.reset()
    assert list(tracker.starts) == [] and tracker.consecutive_failures == 0 and tracker.next_delay() == 1.0


def test_the_start_limit_reason_names_count_window_and_burst() -> None:
    tracker = RestartTracker(RestartConfig(burst=2, interval=30))
    tracker.record_start(0)
    tracker.record_start(1)
    assert tracker.on_exit(ExitInfo(code=4), uptime=0, now=1) == GiveUp(
        "start limit hit: 2 starts within 30s (burst 2); last exit 4")
