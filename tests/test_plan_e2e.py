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
import subprocess
import sys
import tarfile
import io
import time
from pathlib import Path
from typing import Any

from tests.conftest import Project, alive, git, processes_of, wait_until

NOTIFIER = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read())"
SCRIPT = {"tasks": {
    "a1": {"attempts": [["put a/one.txt one", "claim"]]},
    "a2": {"attempts": [["put a/two.txt broken", "claim"], ["put a/two.txt fixed", "claim"]]},
    "a3": {"every": ["work 30"]},
    "b1": {"attempts": [["put b/one.txt one", "claim"]]},
    "b2": {"attempts": [["put b/two.txt two", "claim"]]},
    "b3": {"attempts": [["put b/three.txt three", "claim"]]},
}}
CHECKS = {
    "a1": ["grep -qx one a/one.txt"],
    "a2": ["cat a/two.txt && grep -qx fixed a/two.txt"],
    "a3": ["test -f a/three.txt"],
    "b1": ["grep -qx one b/one.txt"],
    "b2": ["grep -qx two b/two.txt", "test ! -e a/one.txt || grep -qx one a/one.txt"],
    "b3": ["test -f b/three.txt"],
}


def plan_text(notify_log: Path, deadline: str = "15m", extra: str = "") -> str:
    tasks = []
    for tid, unit, after, more in (("a1", "a", [], ""), ("a2", "a", [], ""), ("a3", "a", [], "tokens = 3000"),
                                   ("b1", "b", [], ""), ("b2", "b", [], ""), ("b3", "b", ["a3"], "")):
        tasks.append(f"""
[[task]]
id = "{tid}"
unit = "{unit}"
ask = "Write the file of task {tid}."
done_when = {json.dumps(CHECKS[tid])}
after = {json.dumps(after)}
{more}
""")
    return f"""
[plan]
description = "The e2e night: two modules, six tasks"
deadline = "{deadline}"
tokens = 5_000_000
{extra}

[defaults]
max_attempts = 3
check_timeout = "60s"

[spinning]
turns = 50
tokens_without_diff = 50_000_000

[notify]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(NOTIFIER)}, {json.dumps(str(notify_log))}]
""" + "".join(tasks)


def setup(project: Project, tmp: Path, deadline: str = "15m", extra: str = "",
          script: dict[str, Any] = SCRIPT) -> Path:
    root = project.root
    git(root.parent, "init", "-q", "-b", "main", str(root))
    project.agentd("init")
    (root / ".gitignore").write_text(".agentd/\n*-inputs.jsonl\n")
    for module in ("a", "b"):
        (root / module).mkdir()
        (root / module / "README").write_text(f"module {module}\n")
    script_path = tmp / "script.json"
    script_path.write_text(json.dumps(script))
    for unit in ("a", "b"):
        project.fake_unit(unit, "--plan-script", str(script_path), cycle=True, unit="enabled = false",
                          scope=f'paths = ["{unit}/**"]', checkpoint="deadline = 20")
    notify_log = tmp / "notify.jsonl"
    (root / "plans").mkdir()
    (root / "plans" / "night.toml").write_text(plan_text(notify_log, deadline, extra))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    return notify_log


def report(project: Project) -> dict[str, Any]:
    return json.loads(project.agentd("plan", "report", "night", "--json").stdout)


def state(project: Project) -> dict[str, Any] | None:
    path = project.state / "plans" / "night" / "state.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def ended(project: Project, timeout: float = 240) -> dict[str, Any]:
    return wait_until(lambda: (s := state(project)) and s["status"] == "ended" and s, timeout, 0.2, "the plan to end")


def notified(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def commits(project: Project, base: str) -> list[tuple[str, str]]:
    """(commit, task) of each commit on the plan's branch after ``base``, oldest first."""
    out = git(project.root, "log", "--reverse", "--format=%H %(trailers:key=Agentd-Task,valueonly,separator=)",
              f"{base}..agentd/night")
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]  # type: ignore[misc]


def rerun_checks(project: Project, commit: str, task: str, tmp: Path) -> None:
    """The task's checks, run again on the commit itself (checked out with git archive, as a person would)."""
    data = subprocess.run(["git", "archive", commit], cwd=project.root, capture_output=True, check=True).stdout
    where = tmp / f"rerun-{task}"
    where.mkdir()
    tarfile.open(fileobj=io.BytesIO(data)).extractall(where, filter="data")
    for command in CHECKS[task]:
        result = subprocess.run(["/bin/sh", "-c", command], cwd=where, capture_output=True, text=True)
        assert result.returncode == 0, (task, command, result.stdout, result.stderr)


def check_the_night(project: Project, tmp: Path, notify_log: Path, base: str) -> dict[str, Any]:
    """Everything the issue's "done means" asks of the 6-task night."""
    final = ended(project)
    rep = report(project)
    states = {t["id"]: t["state"] for t in rep["tasks"]}
    assert states == {"a1": "done", "a2": "done", "a3": "parked", "b1": "done", "b2": "done", "b3": "blocked"}, rep
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
    # the failure's tail reached the agent, as its next turn
    told = [m for s in project.inputs("a") for m in s if "attempt 1 FAILED" in m and "task a2" in m]
    assert told and "$ cat a/two.txt && grep -qx fixed a/two.txt  (exited 1)\nbroken" in told[0], told
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
    check_the_night(project, tmp_path, notify_log, base)
    table = project.agentd("plan", "report", "night").stdout
    assert "4 done, 1 parked, 1 blocked, 0 pending; 4 commits on agentd/night" in table
    assert "decide a3:" in table and "decide b3: Blocked by a3" in table


def test_the_same_night_survives_a_daemon_killed_with_minus_nine(project: Project, tmp_path: Path) -> None:
    notify_log = setup(project, tmp_path)
    base = git(project.root, "rev-parse", "HEAD").strip()
    project.agentd("start")
    project.agentd("plan", "start", "night")
    # kill it in the middle: two tasks committed, the others not yet
    wait_until(lambda: (s := state(project)) and sum(t["status"] == "done" for t in s["tasks"]) >= 2, 120, 0.05,
               "two tasks done")
    daemon = project.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 30, what="the daemon to die")
    middle = state(project)
    assert middle is not None and middle["status"] == "running"
    project.agentd("start")
    rep = check_the_night(project, tmp_path, notify_log, base)
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
    assert final["ended_at"] <= final["deadline"] and final["deadline"] - began <= 46
    rep = report(project)
    assert "deadline" in rep["end_reason"] and rep["totals"]["done"] == 0
    assert {t["state"] for t in rep["tasks"]} == {"pending"}
    assert all("the deadline" in t["reason"] for t in rep["tasks"])
    for unit in ("a", "b"):
        assert project.unit_status(unit)["state"] == "inactive"
    stops = [e for e in project.events("unit_state") if e.get("new") == "inactive"]
    assert stops and all(e["timestamp"] for e in stops)
    events = wait_until(lambda: (ev := notified(notify_log)) and ev[-1]["event"] == "plan_ended" and ev, 30,
                        what="the notify command to receive the end")
    assert events[-1]["kind"] == "deadline"
