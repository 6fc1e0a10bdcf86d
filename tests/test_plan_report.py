"""The morning report from a run's state alone: per task, the totals, what to decide, the Markdown file."""

from __future__ import annotations

from pathlib import Path

from supervisor.plan import report
from supervisor.plan.planfile import parse_plan
from supervisor.plan.state import PlanState, RunStatus, Status, TaskState

NOW = 1_800_000_000.0
SECRET = "sk-proj-" + "Rt5" * 12

PLAN = """
[plan]
description = "a night"
deadline = "8h"
tokens = 100_000

[[task]]
id = "done-one"
unit = "u"
ask = "Do one.\\nIn detail."
done_when = ["pytest -q tests/one"]

[[task]]
id = "parked-one"
unit = "u"
ask = "Do two."
done_when = ["pytest -q tests/two"]

[[task]]
id = "after-parked"
unit = "v"
ask = "Do three."
done_when = ["true"]
after = ["parked-one"]

[[task]]
id = "never-started"
unit = "v"
ask = "Do four."
done_when = ["true"]
"""


def night(tmp: Path) -> tuple[object, PlanState]:
    path = tmp / "plans" / "night.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PLAN)
    spec = parse_plan(path)
    tasks = {t.id: TaskState(t.id, t.unit) for t in spec.tasks}
    done = tasks["done-one"]
    done.status, done.attempts, done.seconds, done.tokens, done.turns, done.sessions, done.cycles = Status.DONE, 2, 754.0, 41_000, 9, 2, 1
    done.commit, done.diffstat = "a" * 40, {"files": 1, "insertions": 3, "deletions": 1, "paths": ["src/one.py"]}
    done.checks = [{"attempt": 1, "passed": False, "results": [
        {"command": "pytest -q tests/one", "exit": 1, "ok": False, "seconds": 1.5,
         "tail": f"E   assert 1 == 2\n```\n# escaped fence\nkey {SECRET}\n"}]},
        {"attempt": 2, "passed": True, "results": [{"command": "pytest -q tests/one", "exit": 0, "ok": True, "seconds": 1.2, "tail": "1 passed"}]}]
    parked = tasks["parked-one"]
    parked.status, parked.kind, parked.reason = Status.PARKED, "tokens", "its token budget is spent (412000 of 400000)"
    parked.parked_ref, parked.tokens = "refs/agentd/plans/night/parked/parked-one", 412_000
    blocked = tasks["after-parked"]
    blocked.status, blocked.blocked_by, blocked.reason = Status.BLOCKED, ["parked-one"], "blocked by parked-one"
    tasks["never-started"].reason = "not started: the deadline is near"
    state = PlanState(name="night", branch="agentd/night", started_at=NOW, deadline=NOW + 3600, wind_down_at=NOW + 3300,
                      tokens_budget=100_000, base_commit="b" * 40, tip="a" * 40, tasks=tasks, status=RunStatus.ENDED,
                      ended_at=NOW + 3300, end_reason="the deadline is near")
    return spec, state


def test_the_report_says_per_task_and_in_all_what_the_night_did(tmp_path: Path) -> None:
    spec, state = night(tmp_path)
    rep = report.build(spec, state)
    states = [(t["id"], t["state"]) for t in rep["tasks"]]
    assert states == [("done-one", "done"), ("parked-one", "parked"), ("after-parked", "blocked"),
                      ("never-started", "pending")]
    assert rep["totals"] == {"done": 1, "parked": 1, "blocked": 1, "pending": 1, "tasks": 4, "open": 1, "commits": 1,
                             "attempts": 2, "tokens": 453_000, "token_budget": 100_000, "seconds": 754.0,
                             "violations": 0, "freezes": 0}
    decide = {t["id"]: t["decide"] for t in rep["tasks"]}
    assert decide["done-one"] is None
    assert "refs/agentd/plans/night/parked/parked-one" in decide["parked-one"]
    assert decide["after-parked"] == "Blocked by parked-one: it runs once that is done."
    assert decide["never-started"].startswith("Not finished (not started: the deadline is near)")
    headers, rows = report.rows(rep)
    assert rows[0][:8] == ["done-one", "u", "done", "2/3", "12m34s", "41k", "1", "a" * 10]
    assert rows[0][8] == "passed attempt 2; 1 file +3 -1"


def test_the_markdown_keeps_the_agents_output_inside_its_fence_and_no_secret(tmp_path: Path) -> None:
    spec, state = night(tmp_path)
    (tmp_path / ".agent").mkdir()
    rel = report.write(tmp_path, spec, state)
    text = (tmp_path / rel).read_text()
    assert rel.startswith(".agent/reports/night-") and rel.endswith(".md")
    assert "1 done, 1 parked, 1 blocked, 1 pending; 1 commits on agentd/night" in text
    assert "## What you need to decide" in text and "- **after-parked** (v): Blocked by parked-one" in text
    assert SECRET not in text and "[REDACTED]" in text
    fences = [ln for ln in text.splitlines() if ln.strip() == "```"]
    assert len(fences) == 2 and "    '''" in text  # the agent's ``` became ''' inside the one fence
    # written again (a resume) it keeps its file; another run the same day gets a file of its own
    state.report = rel
    assert report.write(tmp_path, spec, state) == rel
    state.report = None
    second = report.write(tmp_path, spec, state)
    assert second == rel.removesuffix(".md") + "-2.md" and (tmp_path / rel).exists()
