"""The plan's rules as pure functions: a state, a time, the decisions (no runner, no process, no file)."""

from __future__ import annotations

from pathlib import Path

from supervisor.plan import policy
from supervisor.plan.planfile import parse_plan
from supervisor.plan.spec import PlanSpec
from supervisor.plan.state import PlanState, RunStatus, Status, TaskState

NOW = 1_800_000_000.0

PLAN = """
[plan]
deadline = "8h"
tokens = 100_000

[defaults]
tokens = 10_000
time = "30m"

[spinning]
turns = 3
same_failure = 2
tokens_without_diff = 5_000

[[task]]
id = "a"
unit = "u"
ask = "first"
done_when = ["true"]

[[task]]
id = "b"
unit = "v"
ask = "waits for a, on another unit"
done_when = ["true"]
after = ["a"]

[[task]]
id = "c"
unit = "v"
ask = "waits for b"
done_when = ["true"]
after = ["b"]

[[task]]
id = "d"
unit = "v"
ask = "free"
done_when = ["true"]
max_attempts = 4
"""


def plan(tmp: Path) -> tuple[PlanSpec, PlanState]:
    path = tmp / "plans" / "p.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PLAN)
    spec = parse_plan(path)
    state = PlanState(name="p", branch="agentd/p", started_at=NOW, deadline=NOW + 8 * 3600,
                      wind_down_at=NOW + 8 * 3600 - 300, tokens_budget=100_000, base_commit="c0", tip="c0",
                      tasks={t.id: TaskState(t.id, t.unit) for t in spec.tasks})
    return spec, state


def kinds(decisions: list[policy.Decision]) -> list[str]:
    out = []
    for d in decisions:
        name = type(d).__name__
        out.append(f"{name}:{getattr(d, 'task', None) or getattr(d, 'unit', '')}" if name != "WindDown" else f"WindDown:{d.kind}")
    return out


def test_each_unit_gets_its_first_ready_task_and_an_after_on_another_unit_waits(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    assert kinds(policy.reconcile(spec, state, NOW)) == ["Assign:a", "Assign:d"]
    state.tasks["a"].status = Status.DONE
    state.tasks["d"].status = Status.ACTIVE
    assert kinds(policy.reconcile(spec, state, NOW)) == []  # b is ready but v is busy with d
    state.tasks["d"].status = Status.DONE
    assert kinds(policy.reconcile(spec, state, NOW)) == ["Assign:b"]


def test_a_parked_task_blocks_what_comes_after_it_link_by_link(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    state.tasks["a"].status = Status.PARKED
    assert kinds(policy.reconcile(spec, state, NOW)) == ["Block:b", "Assign:d"]
    state.tasks["b"].status, state.tasks["b"].blocked_by = Status.BLOCKED, ["a"]
    assert kinds(policy.reconcile(spec, state, NOW))[:1] == ["Block:c"]


def test_a_unit_with_a_session_and_nothing_ready_is_released_and_the_end_is_when_all_settle(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    for t in ("a", "b", "c"):
        state.tasks[t].status = Status.DONE
    state.tasks["d"].status = Status.PARKED
    assert kinds(policy.reconcile(spec, state, NOW, running=frozenset({"u", "v"}))) == ["Release:u", "Release:v"]
    assert policy.finished(state)


def test_the_deadline_and_the_total_budget_are_hard(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    assert kinds(policy.reconcile(spec, state, state.wind_down_at - 0.001))[:1] == ["Assign:a"]
    assert kinds(policy.reconcile(spec, state, state.wind_down_at)) == ["WindDown:deadline"]
    state.tasks["a"].tokens = 100_000
    assert kinds(policy.reconcile(spec, state, NOW)) == ["WindDown:budget"]
    state.status = RunStatus.WINDING_DOWN
    assert policy.reconcile(spec, state, NOW) == []


def test_the_time_budget_counts_the_stretch_under_way(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    a = state.tasks["a"]
    a.status, a.seconds, a.span_from = Status.ACTIVE, 1000.0, NOW
    assert "Park:a" not in kinds(policy.reconcile(spec, state, NOW + 799))
    parked = [d for d in policy.reconcile(spec, state, NOW + 800) if isinstance(d, policy.Park)]
    assert parked and parked[0].kind == "time" and "30m00s" in parked[0].reason


def test_a_reminder_only_for_a_quiet_unit_after_a_pause(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    a = state.tasks["a"]
    a.status, a.span_from = Status.ACTIVE, NOW
    assert policy.turn_ended(spec, state, "a", 100, True, NOW) is None and a.turn_ended_at == NOW
    quiet = frozenset({"u"})
    assert "Tell:a" not in kinds(policy.reconcile(spec, state, NOW + policy.NUDGE_AFTER - 0.1, quiet=quiet))
    assert "Tell:a" not in kinds(policy.reconcile(spec, state, NOW + policy.NUDGE_AFTER))  # busy, or text queued
    told = [d for d in policy.reconcile(spec, state, NOW + policy.NUDGE_AFTER, quiet=quiet) if isinstance(d, policy.Tell)]
    assert told and told[0].why == "nudge" and "Task a is still open: first" in told[0].text
    policy.turn_ended(spec, state, "a", 100, True, NOW + 5, claimed=True)
    assert a.turn_ended_at is None  # a claim is no reason to remind


def test_spinning_turns_tokens_and_budget(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    a = state.tasks["a"]
    a.status = Status.ACTIVE
    assert policy.turn_ended(spec, state, "a", 10, False, NOW) is None
    assert policy.turn_ended(spec, state, "a", 10, True, NOW) is None  # an edit resets the count
    assert policy.turn_ended(spec, state, "a", 10, False, NOW) is None
    assert policy.turn_ended(spec, state, "a", 10, False, NOW) is None
    park = policy.turn_ended(spec, state, "a", 10, False, NOW)
    assert park is not None and park.kind == "spinning" and "no productive edit in 3 turns" in park.reason
    spec, state = plan(tmp_path / "two")
    park = None
    for _ in range(2):
        park = park or policy.turn_ended(spec, state, "a", 3_000, False, NOW)
    assert park is not None and "6000 tokens spent with no change" in park.reason
    spec, state = plan(tmp_path / "three")
    park = policy.turn_ended(spec, state, "a", 10_000, True, NOW)
    assert park is not None and park.kind == "tokens"  # the budget first, even with edits


def test_verdicts(tmp_path: Path) -> None:
    spec, state = plan(tmp_path)
    ok = [{"command": "true", "exit": 0, "ok": True, "tail": ""}]
    bad = [{"command": "pytest", "exit": 1, "ok": False, "tail": "E   assert 1 == 2"}]
    other = [{"command": "pytest", "exit": 1, "ok": False, "tail": "E   NameError: x"}]
    assert isinstance(policy.verdict(spec, state, "d", True, ok, NOW), policy.Integrate)
    retry = policy.verdict(spec, state, "d", False, bad, NOW)
    assert isinstance(retry, policy.Tell) and retry.why == "retry"
    assert "attempt 2 FAILED" in retry.text and "$ pytest  (exited 1)\nE   assert 1 == 2" in retry.text
    retry = policy.verdict(spec, state, "d", False, other, NOW)  # a different failure is progress
    assert isinstance(retry, policy.Tell)
    park = policy.verdict(spec, state, "d", False, other, NOW)
    assert isinstance(park, policy.Park) and park.kind == "spinning" and state.tasks["d"].attempts == 4
    spec, state = plan(tmp_path / "two")
    for tail in ["one", "two", "three"]:
        decision = policy.verdict(spec, state, "a", False, [{"command": "x", "exit": 1, "ok": False, "tail": tail}], NOW)
    assert isinstance(decision, policy.Park) and decision.kind == "attempts" and "3 checks failed" in decision.reason
