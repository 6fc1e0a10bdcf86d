"""A whole night of a plan, replayed in milliseconds: the runner with fake units, fake git and checks, a fake clock.

The house way (tests/test_unit_supervisor.py): the rules are proved by
replaying events into the real :class:`~supervisor.plan.runner.PlanRunner`
and :mod:`supervisor.plan.policy`, with the world (units, the repository, the
checks) faked and time moved by hand.  The real thing, end to end, is
tests/test_plan_e2e.py.
"""

from __future__ import annotations

import asyncio
import itertools
import textwrap
from pathlib import Path
from typing import Any

import pytest

from supervisor.plan import policy
from supervisor.plan.integrate import Candidate
from supervisor.plan.planfile import parse_plan
from supervisor.plan.runner import PlanRunner, UnitLook
from supervisor.plan.spec import PlanSpec, TaskSpec
from supervisor.plan.state import PlanState, PlanStore, RunStatus, Status, TaskState

START = 1_800_000_000.0  # a fixed epoch: no wall clock in tests

PLAN = """
[plan]
deadline = "8h"
tokens = 1_000_000

[defaults]
max_attempts = 3
tokens = 50_000

[spinning]
turns = 20
same_failure = 3
tokens_without_diff = 400_000

[[task]]
id = "a1"
unit = "a"
ask = "first of a"
done_when = ["check a1"]

[[task]]
id = "a2"
unit = "a"
ask = "second of a"
done_when = ["check a2"]

[[task]]
id = "a3"
unit = "a"
ask = "spins"
done_when = ["check a3"]

[[task]]
id = "b1"
unit = "b"
ask = "first of b"
done_when = ["check b1"]

[[task]]
id = "b2"
unit = "b"
ask = "second of b"
done_when = ["check b2"]

[[task]]
id = "b3"
unit = "b"
ask = "after the spinner"
done_when = ["check b3"]
after = ["a3"]
"""


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class FakeUnits:
    """Units as the runner sees them: sessions, turns, context; what was typed and stopped."""

    def __init__(self) -> None:
        self.looks: dict[str, UnitLook] = {}
        self.ids = itertools.count(1)
        self.typed: dict[str, list[str]] = {}
        self.launches: list[tuple[str, str]] = []
        self.stops: list[tuple[str, bool]] = []

    def look(self, name: str) -> UnitLook | None:
        return self.looks.get(name, UnitLook("inactive", None, 0, True, None))

    async def fresh_session(self, name: str, why: str) -> str | None:
        self.launches.append((name, why))
        self.looks[name] = UnitLook("running", f"s{next(self.ids)}", 0, True, 0)
        return None

    async def stop(self, name: str, why: str, checkpoint: bool) -> None:
        self.stops.append((name, checkpoint))
        self.looks[name] = UnitLook("inactive", None, 0, True, None, reason=why)

    def tell(self, name: str, text: str) -> bool:
        self.typed.setdefault(name, []).append(text)
        return self.looks.get(name) is not None and self.looks[name].state == "running"

    def turn(self, name: str, context: int) -> None:
        look = self.looks[name]
        self.looks[name] = UnitLook(look.state, look.session, look.turns + 1, True, context)


class FakeWork:
    """The repository and the checks: each unit's scope is a version counter; checks follow a script."""

    def __init__(self, outcomes: dict[str, list[bool]]) -> None:
        self.scope: dict[str, int] = {"a": 0, "b": 0}
        self.outcomes = outcomes
        self.checked: list[tuple[str, int, str]] = []
        self.commits: list[tuple[str, str, str]] = []  # (commit, parent, tree)
        self.tasks: dict[str, str] = {}
        self.kept: list[str] = []

    async def snapshot(self, unit: str) -> str:
        return f"{unit}@{self.scope[unit]}"

    async def candidate(self, unit: str, tip: str, base: str, claimed: str) -> Candidate:
        return Candidate(f"{tip}+{base}->{claimed}", changed=(f"{unit}/file",))

    async def check(self, task: TaskSpec, attempt: int, tree: str) -> list[dict[str, Any]]:
        self.checked.append((task.id, attempt, tree))
        ok = self.outcomes[task.id][min(attempt, len(self.outcomes[task.id])) - 1]
        return [{"command": task.done_when[0], "exit": 0 if ok else 1, "ok": ok, "timed_out": False,
                 "seconds": 0.1, "tail": "" if ok else f"AssertionError in {task.id}: expected fixed"}]

    async def commit(self, expected: str, tree: str, message: str) -> str:
        commit = f"c{len(self.commits) + 1}"
        self.commits.append((commit, expected, tree))
        return commit

    async def find_commit(self, since: str, task: str, tree: str | None) -> str | None:
        return next((c for c, parent, t in self.commits if parent == since and t == tree), None)

    async def diffstat(self, commit: str) -> dict[str, Any]:
        return {"files": 1, "insertions": 1, "deletions": 0, "paths": ["x"]}

    async def keep(self, task: str, unit: str, tip: str, base: str | None, work: str) -> str | None:
        self.kept.append(task)
        return f"refs/agentd/plans/night/parked/{task}"

    async def write_task(self, unit: str, text: str, state_line: str) -> None:
        self.tasks[unit] = text

    async def report(self, spec: PlanSpec, state: PlanState) -> str | None:
        return ".agent/reports/night.md"


class Night:
    """One replayed run: the runner and its fakes."""

    def __init__(self, tmp: Path, outcomes: dict[str, list[bool]], plan: str = PLAN) -> None:
        path = tmp / "plans" / "night.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(plan)
        self.spec = parse_plan(path)
        self.clock = Clock()
        self.store = PlanStore(tmp / "state", "night")
        self.store.begin(self.spec.source)
        self.state = new_state(self.spec, self.clock.now)
        self.units = FakeUnits()
        self.work = FakeWork(outcomes)
        self.events: list[dict[str, Any]] = []
        self.runner = self.make()

    def make(self) -> PlanRunner:
        return PlanRunner(self.spec, self.state, self.store, self.units, self.work, self.events.append,
                          asyncio.ensure_future, self.clock)

    def current(self, unit: str) -> TaskState | None:
        return self.state.of_unit(unit)

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def tick(self, seconds: float = 1.0) -> None:
        self.clock.now += seconds
        await self.runner.tick()
        await self.settle()

    async def work_and_claim(self, unit: str, context: int = 1000, edit: bool = True) -> dict[str, Any]:
        """The agent edits its scope, ends a turn and claims its task."""
        if edit:
            self.work.scope[unit] += 1
        self.units.turn(unit, context)
        await self.runner.observe(unit)
        task = self.current(unit)
        assert task is not None
        answer = await self.runner.claim(unit, self.units.looks[unit].session, task.id, "test")
        await self.settle()
        return answer

    def names(self, event: str) -> list[str]:
        return [e.get("task") or e.get("unit") or "" for e in self.events if e["event"] == event]


def new_state(spec: PlanSpec, now: float) -> PlanState:
    return PlanState(name=spec.name, branch=spec.branch, started_at=now, deadline=spec.deadline(now),
                     wind_down_at=spec.deadline(now) - 60, tokens_budget=spec.model.plan.tokens, base_commit="c0",
                     tip="c0", tasks={t.id: TaskState(t.id, t.unit) for t in spec.tasks})


OUTCOMES = {"a1": [True], "a2": [False, True], "a3": [True], "b1": [True], "b2": [True], "b3": [True]}


def test_a_night_of_six_tasks_on_two_units_ends_with_four_commits_one_parked_one_blocked(tmp_path: Path) -> None:
    async def night() -> Night:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()
        # each unit got its first ready task, in a fresh session, with the task in its task file
        assert [u for u, _ in n.units.launches] == ["a", "b"]
        assert "[plan night / task a1 / attempt 1 of 3]" in n.work.tasks["a"] and "TASK DONE: a1" in n.work.tasks["a"]
        assert (await n.work_and_claim("a"))["checking"] == "a1"
        assert (await n.work_and_claim("b"))["checking"] == "b1"
        assert n.state.tasks["a1"].status is Status.DONE and n.state.tasks["b1"].status is Status.DONE
        assert [c[0] for c in n.work.commits] == ["c1", "c2"] and n.work.commits[1][1] == "c1"  # one after the other
        await n.tick()  # the next tasks: fresh sessions again
        assert n.current("a").id == "a2" and n.current("b").id == "b2"
        assert len(n.units.launches) == 4
        await n.work_and_claim("a")  # a2 fails its first check: the tail is typed to the agent
        a2 = n.state.tasks["a2"]
        assert a2.status is Status.ACTIVE and a2.attempts == 1
        told = n.units.typed["a"][-1]
        assert "attempt 1 FAILED" in told and "AssertionError in a2: expected fixed" in told
        assert "[plan night / task a2 / attempt 2 of 3]" in told
        assert "The last check failed" in n.work.tasks["a"]  # and the task file keeps it for a fresh session
        await n.work_and_claim("a")
        assert a2.status is Status.DONE and a2.attempts == 2
        await n.work_and_claim("b")
        await n.tick()
        assert n.current("a").id == "a3"
        # b has nothing ready (b3 waits for a3): it is released
        assert ("b", False) in n.units.stops and n.current("b") is None
        # a3 spins: turns, tokens, no edit, no claim; each turn end is followed by a reminder
        for _ in range(12):
            n.units.turn("a", 9000)
            await n.runner.observe("a")
            await n.tick(policy.NUDGE_AFTER)
            if n.state.tasks["a3"].settled:
                break
        a3 = n.state.tasks["a3"]
        assert a3.status is Status.PARKED and a3.kind == "tokens", a3
        assert a3.tokens >= 50_000 and a3.parked_ref == "refs/agentd/plans/night/parked/a3"
        assert any("Task a3 is still open" in t for t in n.units.typed["a"])
        await n.tick()
        b3 = n.state.tasks["b3"]
        assert b3.status is Status.BLOCKED and b3.blocked_by == ["a3"]
        await n.runner.ended.wait()
        return n

    n = asyncio.run(night())
    assert n.state.status is RunStatus.ENDED and n.state.end_reason == "every task is done, parked or blocked"
    assert len(n.work.commits) == 4 and [n.state.tasks[t].commit for t in ("a1", "b1", "a2", "b2")] == ["c1", "c2", "c3", "c4"]
    assert n.names("task_parked") == ["a3"] and n.names("task_blocked") == ["b3"]
    assert [e["event"] for e in n.events][-1] == "plan_ended"
    assert n.events[-1]["tasks"] == {"done": 4, "parked": 1, "blocked": 1} and n.events[-1]["commits"] == 4
    # every check ran on the tip it was committed on
    for _commit, parent, tree in n.work.commits:
        assert tree.startswith(parent + "+")
    assert PlanStore(tmp_path / "state", "night").load().as_dict() == n.state.as_dict()  # durable, whole


def test_the_deadline_winds_the_run_down_with_checkpoints_and_names_what_was_unfinished(tmp_path: Path) -> None:
    async def night() -> Night:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()
        n.clock.now = n.state.wind_down_at - 0.5
        await n.tick(0.2)
        assert n.state.status is RunStatus.RUNNING
        await n.tick(0.5)
        await n.runner.ended.wait()
        return n

    n = asyncio.run(night())
    assert n.state.status is RunStatus.ENDED and "deadline" in (n.state.end_reason or "")
    assert sorted(n.units.stops) == [("a", True), ("b", True)]  # every unit checkpoints and stops
    assert n.state.tasks["a1"].reason.startswith("unfinished: the deadline")
    assert n.state.tasks["a2"].reason.startswith("not started: the deadline")
    assert n.events[-1]["event"] == "plan_ended" and n.events[-1]["kind"] == "deadline"
    assert not n.work.commits


def test_the_same_failure_three_times_is_spinning_and_max_attempts_parks_otherwise(tmp_path: Path) -> None:
    plan = PLAN.replace("max_attempts = 3", "max_attempts = 5")

    async def night() -> Night:
        n = Night(tmp_path, {**OUTCOMES, "a1": [False] * 5}, plan)
        await n.runner.step()
        for _ in range(3):
            await n.work_and_claim("a")
        return n

    n = asyncio.run(night())
    a1 = n.state.tasks["a1"]
    assert a1.status is Status.PARKED and a1.kind == "spinning" and "same way 3 times" in a1.reason
    assert a1.attempts == 3


def test_no_productive_edit_in_n_turns_is_spinning(tmp_path: Path) -> None:
    plan = PLAN.replace("turns = 20", "turns = 4")

    async def night() -> Night:
        n = Night(tmp_path, OUTCOMES, plan)
        await n.runner.step()
        for _ in range(4):
            n.units.turn("a", 10)
            await n.runner.observe("a")
        return n

    n = asyncio.run(night())
    a1 = n.state.tasks["a1"]
    assert a1.status is Status.PARKED and a1.kind == "spinning" and "no productive edit in 4 turns" in a1.reason


def test_a_time_budget_parks_the_task_and_the_plan_budget_ends_the_run(tmp_path: Path) -> None:
    plan = PLAN.replace("tokens = 50_000", 'tokens = 50_000\ntime = "10m"')

    async def night() -> Night:
        n = Night(tmp_path, OUTCOMES, plan)
        await n.runner.step()
        await n.tick(599)
        assert n.state.tasks["a1"].status is Status.ACTIVE
        await n.tick(2)
        assert n.state.tasks["a1"].status is Status.PARKED and n.state.tasks["a1"].kind == "time"
        return n

    asyncio.run(night())
    budget = PLAN.replace("tokens = 1_000_000", "tokens = 20_000")

    async def spent() -> Night:
        n = Night(tmp_path / "two", OUTCOMES, budget)
        await n.runner.step()
        n.units.turn("b", 25_000)
        await n.runner.observe("b")
        await n.tick()
        await n.runner.ended.wait()
        return n

    n = asyncio.run(spent())
    assert "token budget is spent" in (n.state.end_reason or "") and n.events[-1]["kind"] == "budget"


def test_claims_for_another_task_or_an_old_session_are_not_checked(tmp_path: Path) -> None:
    async def night() -> tuple[Night, list[dict[str, Any]]]:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()
        answers = [await n.runner.claim("a", "s-old", "a1", "test"), await n.runner.claim("a", None, "a2", "test"),
                   await n.runner.claim("c", None, None, "test")]
        await n.settle()
        return n, answers

    n, answers = asyncio.run(night())
    assert all("ignored" in a for a in answers), answers
    assert not n.work.checked and n.state.tasks["a1"].status is Status.ACTIVE


def test_a_resume_rechecks_a_check_in_flight_and_finds_a_commit_already_made(tmp_path: Path) -> None:
    async def first() -> Night:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()
        await n.work_and_claim("a")  # a1 done: c1
        # b1 claimed; the daemon dies before its check ran (the state says checking)
        b1 = n.state.tasks["b1"]
        b1.status, b1.claimed = Status.CHECKING, "b@1"
        n.runner.save()
        # and a2 passed, its commit made, the daemon died before the state said done
        a2 = n.state.tasks["a2"]
        a2.status, a2.base, a2.claimed, a2.tree = Status.INTEGRATING, "a@1", "a@2", "c1+a@1->a@2"
        a2.checks.append({"attempt": 1, "passed": True, "results": [{"command": "check a2", "exit": 0, "seconds": 0.1}]})
        n.work.commits.append(("c2", "c1", "c1+a@1->a@2"))
        n.runner.save()
        return n

    n = asyncio.run(first())
    reloaded = n.store.load()
    assert reloaded is not None

    async def second() -> Night:
        n.state = reloaded
        n.units = FakeUnits()  # the old daemon's sessions are gone
        n.runner = n.make()
        await n.runner.resume()
        await n.settle()
        return n

    n = asyncio.run(second())
    assert n.state.tasks["a2"].status is Status.DONE and n.state.tasks["a2"].commit == "c2"
    assert [c[0] for c in n.work.commits] == ["c1", "c2", "c3"]  # a2 not committed twice; b1 checked again, on c2
    assert n.state.tasks["b1"].status is Status.DONE and n.work.commits[2][1] == "c2"
    assert [t for t, _, _ in n.work.checked].count("a2") == 0


@pytest.mark.parametrize("text,expected", [
    ("all good\nTASK DONE: a1", "a1"), ("TASK DONE", None), ("done.\n\n  TASK DONE: x.y-2  \n", "x.y-2"),
])
def test_the_claim_is_the_last_line_of_the_agents_message(text: str, expected: str | None) -> None:
    claim = policy.claim_in({"last-assistant-message": text})
    assert claim is not None and claim.task == expected
    assert policy.claim_in({"last_assistant_message": text}) == claim


@pytest.mark.parametrize("text", ["I will say TASK DONE: a1 when finished.", "TASK DONE: a1\nbut not yet", "", "task done"])
def test_quoting_the_claim_line_is_no_claim(text: str) -> None:
    assert policy.claim_in({"last-assistant-message": text}) is None
    assert policy.claim_in({"type": "agent-turn-complete"}) is None


def test_a_signature_ignores_what_varies_between_runs() -> None:
    def result(tail: str) -> list[dict[str, Any]]:
        return [{"command": "pytest", "exit": 1, "ok": False, "tail": tail}]

    one = policy.signature(result("FAILED test_x - assert 3 == 4 in 0.12s at /tmp/pytest-of-root/p1 0xdeadbeef"))
    two = policy.signature(result("FAILED test_x - assert 5 == 4 in 0.31s at /tmp/pytest-of-root/p7 0xfeedface"))
    other = policy.signature(result("FAILED test_y - assert 3 == 4 in 0.12s"))
    assert one == two and one != other


def test_texts_name_the_plan_the_task_and_the_attempt() -> None:
    spec = TaskSpec("t1", "u", "Make it work.", ("pytest -q", ("ruff", "check", "src")), (), 3, None, None, 60.0)
    text = policy.task_text("night", spec, 2, "$ pytest -q  (exited 1)\nboom")
    assert text.startswith("[plan night / task t1 / attempt 2 of 3]\nMake it work.")
    assert "  $ pytest -q\n  $ ruff check src\n" in text and "\nTASK DONE: t1\n" in text and text.endswith("boom")
    assert textwrap.dedent(policy.retry_text("night", spec, 1, "tail")).startswith("[plan night / task t1 / attempt 2 of 3]")


def test_a_cycle_mid_task_is_counted_and_its_new_session_may_claim_at_once(tmp_path: Path) -> None:
    async def night() -> tuple[Night, dict[str, Any]]:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()
        # the continuity cycle gives unit a fresh session (not one the runner started), whose agent claims at once
        n.units.looks["a"] = UnitLook("running", "s-cycle", 0, True, 0)
        n.work.scope["a"] += 1
        n.units.turn("a", 100)
        answer = await n.runner.claim("a", "s-cycle", "a1", "test")
        await n.settle()
        return n, answer

    n, answer = asyncio.run(night())
    assert answer == {"checking": "a1", "attempt": 1}
    a1 = n.state.tasks["a1"]
    assert a1.status is Status.DONE and a1.sessions == 2 and a1.cycles == 1 and a1.turns == 1


class SlowUnits(FakeUnits):
    """Units whose fresh sessions take until ``go`` is set (a real start takes seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()

    async def fresh_session(self, name: str, why: str) -> str | None:
        await self.go.wait()
        return await super().fresh_session(name, why)


def test_a_resume_parks_nothing_while_it_gives_the_tasks_their_sessions_again(tmp_path: Path) -> None:
    async def night() -> Night:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()  # a1 on a, b1 on b: both active
        n.state = n.store.load()  # the daemon died; a new one resumes, whose units have no session yet
        n.units = SlowUnits()
        n.runner = n.make()
        resume = asyncio.ensure_future(n.runner.resume())
        await n.settle()
        for unit in ("a", "b"):  # ticks while the resume waits for a1's session: both units look inactive
            await n.runner.observe(unit)
        n.units.go.set()
        await resume
        return n

    n = asyncio.run(night())
    assert [t.status for t in n.state.tasks.values()][:4] == [Status.ACTIVE, Status.PENDING, Status.PENDING,
                                                               Status.ACTIVE]
    assert [u for u, _ in n.units.launches] == ["a", "b"]


def test_while_a_resume_relaunches_no_step_assigns_so_no_task_is_launched_twice(tmp_path: Path) -> None:
    async def night() -> Night:
        n = Night(tmp_path, OUTCOMES)
        await n.runner.step()
        await n.work_and_claim("b")  # b1 done; b2 not yet assigned when the daemon dies
        n.state = n.store.load()
        n.state.tasks["b2"].status = Status.PENDING
        n.units = SlowUnits()
        n.runner = n.make()
        resume = asyncio.ensure_future(n.runner.resume())
        await n.settle()
        ticks = [asyncio.ensure_future(n.runner.step()) for _ in range(3)]  # the ticker and the bus meanwhile
        await n.settle()
        assert n.units.launches == [] and n.state.tasks["b2"].status is Status.PENDING
        n.units.go.set()
        await resume
        await asyncio.gather(*ticks)
        return n

    n = asyncio.run(night())
    assert n.units.launches == [("a", "plan night: resuming task a1 after a daemon restart"), ("b", "plan night: task b2")]
