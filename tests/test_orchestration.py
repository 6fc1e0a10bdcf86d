"""Several units on one project: order, requires, global decisions, tasks, schedules, limits, stalls."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.conftest import Project, clean_env, wait_until
from tests.test_continuity import history, sessions_inputs


def fake(project: Project, name: str, *, unit: str = "", extra: str = "", scope: str = "", flags: tuple[str, ...] = ()) -> Path:
    inputs = project.root / f"{name}-inputs.jsonl"
    inputs.touch()  # the test's record of what was typed: writable for a fenced agent, never its violation
    scope += f'\nwritable = ["{inputs.name}"]'
    argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(inputs), *flags])
    project.unit(name, f"""
[unit]
{unit}
[agent]
command = {argv}
prompt = "fake> $"
[restart]
stop_timeout = 3
initial_delay = 0.2
[scope]
{scope}
[checkpoint]
grace = 2
{extra}
""")
    return inputs


def test_requires_blocks_and_after_orders(project: Project) -> None:
    project.agentd("init")
    fake(project, "db", flags=("--crash-after", "0"))
    (project.root / "units" / "db.toml").write_text((project.root / "units" / "db.toml").read_text().replace(
        "initial_delay = 0.2", "initial_delay = 0.1\nburst = 1"))
    fake(project, "api", unit='requires = ["db"]')
    fake(project, "web", unit='after = ["cache"]')
    fake(project, "cache")
    project.agentd("start")
    project.wait_state("web", "running")
    project.wait_state("db", "failed")
    api = project.unit_status("api")
    assert api["state"] == "inactive" and "requires 'db'" in api["reason"] and "failed" in api["reason"]
    started = [e["unit"] for e in project.events("unit_state") if e["new"] == "starting"]
    assert started.index("cache") < started.index("web")
    assert "api" not in started


def test_global_decision_and_task_reach_the_running_units(project: Project) -> None:
    project.agentd("init")
    a = fake(project, "alpha", scope='module = "alpha"\npaths = ["alpha/**"]')
    b = fake(project, "beta", scope='module = "beta"\npaths = ["beta/**"]')
    project.agentd("start")
    for name, path in (("alpha", a), ("beta", b)):
        project.wait_state(name, "running")
        wait_until(lambda p=path: len(sessions_inputs(p)) == 1, 60, what=f"{name}'s wakeup")
    # alpha's agent records a global decision from its shell
    env = clean_env(AGENTD_UNIT="alpha", AGENTD_MODULE="alpha")
    out = project.agentd("decide", "freeze the wire format", "--why", "because both sides parse it, so it must not drift",
                         "--global", env=env).stdout
    assert "told the running units: beta" in out
    wait_until(lambda: any("global decision recorded: freeze the wire format" in m for m in sessions_inputs(b)[-1]), 60,
               what="beta to hear about the global decision")
    assert not any("global decision" in m for m in sessions_inputs(a)[-1])
    # a task switch for beta: the files, the decision, and the agent is told
    project.agentd("task", "beta", "port the parser to v2")
    assert "port the parser to v2" in (project.root / ".agent" / "tasks" / "beta.md").read_text()  # beta's own task
    assert "port the parser to v2" not in (project.root / ".agent" / "current-task.md").read_text()
    assert "task switch for beta" in (project.root / ".agent" / "decisions-beta.log").read_text()
    wait_until(lambda: any("New task from the operator: port the parser to v2" in m for m in sessions_inputs(b)[-1]), 60,
               what="beta to get its new task")
    # the timeline merges module and global logs
    timeline = project.agentd("log", "--all").stdout
    assert "[global]" in timeline and "[beta] [task]" in timeline
    # beta's wakeup holds its module's decisions and the global ones, not alpha's
    project.agentd("decide", "alpha-only choice", "--why", "because alpha, so alpha", "--module", "alpha")
    wake = project.agentd("wakeup", "beta").stdout
    assert "freeze the wire format" in wake and "task switch for beta" in wake and "alpha-only choice" not in wake


def _second(delta: float) -> int:
    return int((datetime.now(timezone.utc) + timedelta(seconds=delta)).second)


def test_scheduled_start_and_stop(project: Project) -> None:
    project.agentd("init")
    start, stop = _second(4), _second(12)
    fake(project, "night", unit="enabled = false",
         extra=f'[schedule]\nstart = "{start} * * * * *"\nstop = "{stop} * * * * *"\ngrace = 1\n')
    project.agentd("start")
    row = project.unit_status("night")
    assert row["state"] == "inactive" and row["schedule"]["start"] and row["schedule"]["stop"]
    project.wait_state("night", "running", timeout=60)
    wait_until(lambda: project.unit_status("night")["state"] == "inactive", 60, what="the scheduled stop")
    records = history(project, "night")
    assert records and records[-1]["trigger"] == "stop" and records[-1]["outcome"] == "stopped"
    fired = [(e["action"], e["missed"]) for e in project.events("schedule_fired")]
    assert fired == [("start", False), ("stop", False)]


def test_a_missed_run_fires_once(project: Project) -> None:
    project.agentd("init")
    missed = _second(-4)
    fake(project, "late", unit="enabled = false", extra=f'[schedule]\nstart = "{missed} * * * * *"\ngrace = 30\n')
    project.agentd("start")
    project.wait_state("late", "running")
    fired = project.events("schedule_fired")
    assert [(e["action"], e["missed"]) for e in fired] == [("start", True)]
    # a second daemon start does not fire the same run again
    project.agentd("stop", "--now")
    project.agentd("start")
    assert project.unit_status("late")["state"] == "inactive"
    assert len(project.events("schedule_fired")) == 1


def test_usage_limit_waits_then_resumes_with_the_wakeup(project: Project) -> None:
    project.agentd("init")
    inputs = fake(project, "quota")
    project.agentd("start")
    first = project.wait_state("quota", "running")
    wait_until(lambda: len(sessions_inputs(inputs)) == 1, 60, what="the wakeup")
    project.agentd("send", "quota", "echo Error: usage limit reached for this plan, try again in 4 seconds")
    row = project.wait_state("quota", "waiting")
    assert "usage limit" in row["reason"] and "resuming at" in row["reason"]
    assert not [e for e in project.events("unit_state") if e["unit"] == "quota" and e["new"] == "backoff"]
    again = project.wait_state("quota", "running", timeout=60)
    assert again["pid"] != first["pid"]
    wait_until(lambda: len(sessions_inputs(inputs)) == 2, 60, what="the wakeup of the resumed session")


def test_a_stalled_agent_is_checkpointed_and_restarted(project: Project) -> None:
    project.agentd("init")
    inputs = fake(project, "sleepy", extra="[schedule]\nstall_after = 4\n")
    project.agentd("start")
    first = project.wait_state("sleepy", "running")
    wait_until(lambda: any(r["trigger"] == "stall" for r in history(project, "sleepy")), 90, what="a stall cycle")
    record = next(r for r in history(project, "sleepy") if r["trigger"] == "stall")
    assert record["outcome"] == "respawned" and record["old_session"] == first["session"]
    wait_until(lambda: len(sessions_inputs(inputs)) >= 2, 60, what="the fresh session's wakeup")
    assert project.events("stalled")


def test_overlapping_scopes_are_refused_unless_shared(project: Project) -> None:
    project.agentd("init")
    fake(project, "whole", scope='paths = ["src/**"]')
    fake(project, "api", scope='paths = ["src/api/**"]')
    fake(project, "docs", scope='paths = ["docs/**"]')
    project.agentd("start")
    project.wait_state("docs", "running")
    status = project.status()
    assert {r["unit"] for r in status["units"]} == {"docs"}
    errors = [e for e in status["errors"] if "overlap" in e]
    assert len(errors) == 2
    assert any("whole.toml" in e and "'api'" in e and "src/api/" in e for e in errors)
    assert any("api.toml" in e and "'whole'" in e for e in errors)
    project.agentd("stop", "--now")
    fake(project, "whole", scope='paths = ["src/**"]\nshared = ["src/api/**"]')
    fake(project, "api", scope='paths = ["src/api/**"]\nshared = ["src/api/**"]')
    project.agentd("start")
    for name in ("whole", "api", "docs"):
        project.wait_state(name, "running")


def _git(root: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**clean_env(), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def test_scope_violations_warn_revert_and_stop(project: Project) -> None:
    root = project.root
    for d in ("w1/migrations", "w2", "w3"):
        (root / d).mkdir(parents=True)
    (root / "w2" / "tracked.txt").write_bytes(b"line one\nline two\n")
    _git(root, "init", "-q")
    _git(root, "add", "w2/tracked.txt")
    _git(root, "commit", "-q", "-m", "base")
    project.agentd("init")
    (root / ".agent" / "constraints.md").write_text("# Hard constraints\n\n- forbid: w1/migrations/**\n")
    warn_in = root / "warner-inputs.jsonl"
    for name, d, mode in (("warner", "w1", "warn"), ("reverter", "w2", "revert"), ("stopper", "w3", "stop")):
        path = project.root / "units" / f"{name}.toml"
        fake(project, name, scope=f'paths = ["{d}/src/**"]\non_violation = "{mode}"\nfence = "off"')  # the watcher
        path.write_text(path.read_text().replace("[agent]\n", f'[agent]\nworkdir = "{d}"\n', 1))
    project.agentd("start")
    for name in ("warner", "reverter", "stopper"):
        project.wait_state(name, "running")
        wait_until(lambda n=name: len(sessions_inputs(root / f"{n}-inputs.jsonl")) == 1, 60, what=f"{name}'s wakeup")
    # warn: a forbidden path (constraints.md) is named in a message typed at the next turn end
    project.agentd("send", "warner", "write migrations/001.sql DROP TABLE users;")
    wait_until(lambda: any("w1/migrations/001.sql" in m and "constraints.md" in m for m in sessions_inputs(warn_in)[-1]),
               60, what="the warning typed into warner")
    # revert: the tracked file comes back byte for byte, the agent's version is kept in quarantine
    project.agentd("send", "reverter", "write tracked.txt EVIL")
    wait_until(lambda: (root / "w2" / "tracked.txt").read_bytes() == b"line one\nline two\n"
               and any(v["unit"] == "reverter" for v in _violations(project)), 60, what="the revert")
    assert any(p.read_bytes().endswith(b"EVIL\n") for p in (project.state / "quarantine").rglob("tracked.txt"))
    # stop: a checkpoint, then the unit stops
    project.agentd("send", "stopper", "write outside.txt oops")
    wait_until(lambda: project.unit_status("stopper")["state"] == "inactive", 60, what="the stop")
    assert history(project, "stopper")[-1]["trigger"] == "stop"
    rules = {v["unit"]: v for v in _violations(project)}
    assert rules["warner"]["rule"].startswith("forbidden by constraints.md")
    assert rules["stopper"]["rule"].startswith("outside scope") and rules["stopper"]["action"] == "stop"
    assert project.unit_status("warner")["violations"] == 1
    listed = project.agentd("violations", "reverter").stdout
    assert "w2/tracked.txt" in listed and "revert" in listed and "warner" not in listed


def _violations(project: Project) -> list[dict]:
    out = project.agentd("violations", "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]
