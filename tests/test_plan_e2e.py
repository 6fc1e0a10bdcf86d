"""An overnight run end to end: the real daemon, real PTYs, the fake agent scripted per task, a real git repo.

A plan of 6 tasks on 2 units: 3 pass at their first check; 1 passes after a
failed check whose tail the agent received; 1 spins and is parked on its
token budget; 1 comes after the parked one and is reported blocked.  The
branch then holds exactly 4 task commits, each of whose checks pass when run
again on it; the report says exactly that; the ``[notify]`` command received
the park, the block and the end; nothing ran past the deadline.  The same plan
survives the daemon killed with -9 in the middle, and a deadline winds a run
down with every unit stopped by it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, alive, git, processes_of, wait_until
from tests.plan_fixtures import SCRIPT, commits, ended, notified, report, rerun_checks, setup, state

def check_the_night(project: Project, tmp: Path, notify_log: Path, base: str, typed_tail: bool = True) -> dict[str, Any]:
    """Everything the issue's "done means" asks of the 6-task night."""
    final = ended(project)
    rep = report(project)
    states = {t["id"]: t["state"] for t in rep["tasks"]}
    assert states == {"a1": "done", "a2": "done", "a3": "parked", "b1": "done", "b2": "done", "b3": "blocked"}, [
        (t["id"], t["state"], t["kind"], t["reason"], t["attempts"], t["sessions"]) for t in rep["tasks"]]
    by = {t["id"]: t for t in rep["tasks"]}
    assert by["a2"]["attempts"] == 2 and [c["passed"] for c in by["a2"]["checks"]] == [False, True]
    assert by["a3"]["kind"] == "tokens" and "token budget" in by["a3"]["reason"]
    assert by["b3"]["blocked_by"] == ["a3"] and "a3" in by["b3"]["decide"]
    assert rep["totals"]["done"] == 4 and rep["totals"]["commits"] == 4
    # exactly 4 task commits on the branch, one per done task, each passing its checks again
    found = commits(project, base)
    assert sorted(t for _, t in found) == ["a1", "a2", "b1", "b2"], found
    assert {t: c for c, t in found} == {t: by[t]["commit"] for t in ("a1", "a2", "b1", "b2")}
    for commit, task in found:
        rerun_checks(project, commit, task, tmp)
    # the parked task's work is kept for the person, off the branch
    assert by["a3"]["work"] is None or git(project.root, "rev-parse", by["a3"]["work"]).strip()
    # the failure's tail reached the agent: as its next turn, or (the daemon went down before it was typed)
    # in the wakeup of the task's next session, whose task file keeps the last failure
    inputs = [m for session in project.inputs("a") for m in session if "task a2" in m]
    # typed as a turn: the retry message itself (a wakeup may quote its first line, from the agent's own notes)
    told = [m for m in inputs if "attempt 1 FAILED" in m and not m.startswith("# Wakeup briefing")]
    if told or typed_tail:
        assert told and "$ cat a/two.txt && grep -qx fixed a/two.txt  (exited 1)\nbroken" in told[0], inputs
    else:
        woke = [m for m in inputs if "The last check failed" in m]
        assert woke and "grep -qx fixed a/two.txt  (exited 1)" in woke[0] and "broken" in woke[0], inputs
    # the notify command received the park, the block and the end (JSON on stdin)
    events = wait_until(lambda: (ev := notified(notify_log)) and ev[-1]["event"] == "plan_ended" and ev, 30,
                        what="the notify command to receive the end")
    kinds = [(e["event"], e.get("task")) for e in events]
    assert ("task_parked", "a3") in kinds and ("task_blocked", "b3") in kinds and kinds[-1][0] == "plan_ended"
    assert all(e["plan"] == "night" for e in events)
    # nothing ran past the deadline: the run ended before it, every unit is down, no check runs
    assert final["ended_at"] <= final["deadline"]
    for unit in ("a", "b"):
        assert project.unit_status(unit)["state"] == "inactive"
    assert not [p for p in processes_of(project.root) if "check-" in (p.environ().get("AGENTD_SESSION") or "")]
    # the person's branch and HEAD never moved; the Markdown report is in the memory store
    assert git(project.root, "rev-parse", "HEAD").strip() == base
    assert git(project.root, "rev-parse", "main").strip() == base
    md = (project.root / rep["report"]).read_text()
    assert "4 done, 1 parked, 1 blocked, 0 pending" in md and "## What you need to decide" in md
    return rep


def test_a_night_of_six_tasks_on_two_units(project: Project, tmp_path: Path) -> None:
    notify_log = setup(project, tmp_path)
    base = git(project.root, "rev-parse", "HEAD").strip()
    checked = project.agentd("check")
    assert "ok     plan night: 6 tasks on a, b, branch agentd/night" in checked.stdout, checked.stdout
    project.agentd("start")
    started = project.agentd("plan", "start", "night")
    assert "plan night started: 6 tasks on a, b" in started.stdout and "(created agentd/night at" in started.stdout
    # a claim that names no session (not an agent's notify) checks nothing: a1 still passes at its first check
    project.agentd("notify", "--unit", "a", json.dumps({"last_assistant_message": "TASK DONE: a1"}))
    bare = wait_until(lambda: [e for e in project.events("plan_claim") if "ignored" in e], 30, what="the bare claim")
    assert "must name the session" in bare[0]["ignored"]
    # a unit serves one plan at a time; the same plan does not start twice
    (project.root / "plans" / "other.toml").write_text((project.root / "plans" / "night.toml").read_text())
    refused = project.agentd("plan", "start", "other", check=False)
    assert refused.returncode == 1 and "unit 'a' works for plan 'night', which is running" in refused.stderr
    again = project.agentd("plan", "start", "night", check=False)
    assert again.returncode == 1 and "plan 'night' is already running" in again.stderr
    check_the_night(project, tmp_path, notify_log, base)
    table = project.agentd("plan", "report", "night").stdout
    assert "4 done, 1 parked, 1 blocked, 0 pending; 4 commits on agentd/night" in table
    assert "decide a3:" in table and "decide b3: Blocked by a3" in table


@pytest.mark.parametrize("how", ["kill -9", "agentd stop"])
def test_the_same_night_survives_the_daemon_going_down_in_the_middle(project: Project, tmp_path: Path, how: str) -> None:
    notify_log = setup(project, tmp_path)
    base = git(project.root, "rev-parse", "HEAD").strip()
    project.agentd("start")
    project.agentd("plan", "start", "night")
    # in the middle: two tasks committed, the others not yet
    wait_until(lambda: (s := state(project)) and sum(t["status"] == "done" for t in s["tasks"]) >= 2, 120, 0.05,
               "two tasks done")
    daemon = project.daemon_pid()
    assert daemon is not None
    if how == "kill -9":
        os.kill(daemon, signal.SIGKILL)
    else:
        project.agentd("stop")  # every unit checkpoints and stops; the run is left as it was, not ended
    wait_until(lambda: not alive(daemon), 60, what="the daemon to end")
    middle = state(project)
    assert middle is not None and middle["status"] == "running"
    assert not [t for t in middle["tasks"] if t["status"] in ("parked", "blocked")], middle
    project.agentd("start")
    rep = check_the_night(project, tmp_path, notify_log, base, typed_tail=False)
    # no task done twice, no commit lost: one commit per done task, and every commit the run made is in its report
    found = commits(project, base)
    assert len(found) == len({t for _, t in found}) == 4
    assert {t["commit"] for t in rep["tasks"] if t["commit"]} == {c for c, _ in found}
    assert [e["event"] for e in notified(notify_log)].count("plan_ended") == 1


def test_the_deadline_stops_every_unit_by_it_and_writes_the_report(project: Project, tmp_path: Path) -> None:
    spin = {"tasks": {t: {"every": ["work 2"]} for t in SCRIPT["tasks"]}}
    notify_log = setup(project, tmp_path, deadline="45s", extra='stop_before = "25s"', script=spin)
    project.agentd("start")
    began = time.time()
    project.agentd("plan", "start", "night")
    final = ended(project, 120)
    # the deadline is 45 s after the run started (however long the `plan start` command took under load)
    assert began <= final["started_at"] and final["deadline"] == final["started_at"] + 45
    assert final["ended_at"] <= final["deadline"]
    rep = report(project)
    assert "deadline" in rep["end_reason"] and rep["totals"]["done"] == 0
    assert {t["state"] for t in rep["tasks"]} == {"pending"}
    assert all("the deadline" in t["reason"] for t in rep["tasks"])
    for unit in ("a", "b"):
        assert project.unit_status(unit)["state"] == "inactive"
    for unit in ("a", "b"):  # each unit's last stop came before the deadline
        last = [e for e in project.events("unit_state", unit) if e.get("new") == "inactive"][-1]
        stopped = datetime.fromisoformat(last["timestamp"].replace("Z", "+00:00")).timestamp()
        assert stopped <= final["deadline"], (unit, last)
    events = wait_until(lambda: (ev := notified(notify_log)) and ev[-1]["event"] == "plan_ended" and ev, 30,
                        what="the notify command to receive the end")
    assert events[-1]["kind"] == "deadline"


def test_a_plan_started_by_its_schedule_runs_the_same_way(project: Project, tmp_path: Path) -> None:
    fire = datetime.now(timezone.utc) + timedelta(seconds=12)
    cron = f"{fire.second} {fire.minute} {fire.hour} * * *"
    notify_log = setup(project, tmp_path, sections=f'[schedule]\nstart = "{cron}"\ntimezone = "UTC"\ngrace = 5\n')
    base = git(project.root, "rev-parse", "HEAD").strip()
    project.agentd("start")
    started = wait_until(lambda: (s := state(project)) and s, 60, 0.2, "the schedule to start the plan")
    assert started["trigger"] == "schedule"
    rep = check_the_night(project, tmp_path, notify_log, base)
    assert rep["trigger"] == "schedule"


def test_a_unit_that_fails_parks_its_task_and_is_announced(project: Project, tmp_path: Path) -> None:
    crash = {"tasks": {**SCRIPT["tasks"], "b1": {"attempts": [["crash 3"]]}}}
    notify_log = setup(project, tmp_path, script=crash)
    (project.root / "units" / "b.toml").write_text((project.root / "units" / "b.toml").read_text().replace(
        "[restart]\n", "[restart]\nburst = 2\ninitial_delay = 0.2\n"))
    git(project.root, "commit", "-qam", "b gives up soon")
    project.agentd("start")
    project.agentd("plan", "start", "night")
    ended(project)
    rep = report(project)
    by = {t["id"]: t for t in rep["tasks"]}
    assert by["b1"]["state"] == "parked" and by["b1"]["kind"] == "unit" and "failed" in by["b1"]["reason"], by["b1"]
    events = wait_until(lambda: (ev := notified(notify_log)) and ev[-1]["event"] == "plan_ended" and ev, 30,
                        what="the notify command to receive the end")
    failed = [e for e in events if e["event"] == "unit_failed"]
    assert failed and failed[0]["unit"] == "b" and failed[0]["plan"] == "night" and "start limit" in failed[0]["reason"]
    assert ("task_parked", "b1") in [(e["event"], e.get("task")) for e in events]
    # the unit goes on to its next ready task (a fresh start resets the failed unit)
    assert by["b2"]["state"] == "done"


def test_an_agent_claims_its_task_through_the_memory_channel(project: Project, tmp_path: Path) -> None:
    """`agentd task-state --done` from inside the unit (its inbox) is a claim like `TASK DONE:`: agentd checks,
    the failure comes back, the second claim passes and the task's commit lands."""
    script = {"tasks": {"a1": {"attempts": [["put a/one.txt wrong", "claim-channel"],
                                            ["put a/one.txt one", "claim-channel"]]}}}
    setup(project, tmp_path, script=script)
    text = (project.root / "plans" / "night.toml").read_text()
    (project.root / "plans" / "night.toml").write_text(text[:text.index("[[task]]")] + """
[[task]]
id = "a1"
unit = "a"
ask = "Write the file of task a1."
done_when = ["grep -qx one a/one.txt"]
""")
    git(project.root, "commit", "-qam", "one task")
    base = git(project.root, "rev-parse", "HEAD").strip()
    project.agentd("start")
    project.agentd("plan", "start", "night")
    ended(project)
    by = {t["id"]: t for t in report(project)["tasks"]}
    assert by["a1"]["state"] == "done" and [c["passed"] for c in by["a1"]["checks"]] == [False, True], by["a1"]
    assert [t for _, t in commits(project, base)] == ["a1"]
    claims = [e for e in project.events("plan_task_claimed") if e.get("task") == "a1"]
    assert [e["via"] for e in claims] == ["task-state --done", "task-state --done"], claims
    # the first claim's reply reached the agent (it printed it before its second attempt); the second claim is
    # in the events above: its reply may never be printed, the plan ends and stops the unit when its check passes
    said = "".join(project.transcript("a", s.stem) for s in (project.state / "transcripts" / "a").glob("*.txt"))
    first = said.index("claimed: agentd now checks task a1 (attempt 1)")
    assert said.index("working on task a1, attempt 2") > first, said
    told = [m for session in project.inputs("a") for m in session if "attempt 1 FAILED" in m]
    assert told and "agentd task-state --done" in told[0]  # the retry says how to claim again
