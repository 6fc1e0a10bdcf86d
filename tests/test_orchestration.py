"""Several units on one project: order, requires, global decisions, tasks, schedules, limits, stalls."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone


from tests.conftest import Project, clean_env, git, stays, wait_until

RESTART = "initial_delay = 0.2"


def test_requires_blocks_and_after_orders(project: Project) -> None:
    project.agentd("init")
    project.fake_unit("db", "--crash-after", "0", cycle=True, restart="initial_delay = 0.1\nburst = 1")
    project.fake_unit("api", cycle=True, restart=RESTART, unit='requires = ["db"]')
    project.fake_unit("web", cycle=True, restart=RESTART, unit='after = ["cache"]')
    project.fake_unit("cache", cycle=True, restart=RESTART)
    project.agentd("start")
    project.wait_state("web", "running")
    project.wait_state("db", "failed")
    api = project.unit_status("api")
    assert api["state"] == "inactive" and "requires 'db'" in api["reason"] and "failed" in api["reason"]
    started = [e["unit"] for e in project.events("unit_state") if e["new"] == "starting"]
    assert started.index("cache") < started.index("web")
    assert "api" not in started


def test_requires_starts_the_unit_once_its_requirement_runs(project: Project) -> None:
    project.init_memory()
    project.fake_unit("db", cycle=True, restart=RESTART)
    project.fake_unit("api", cycle=True, restart=RESTART, unit='requires = ["db"]')
    project.agentd("start")
    api = project.wait_state("api", "running", timeout=60)
    assert api["reason"] is None
    # api started only once db was up and had taken its wakeup ("ready")
    events = project.events()
    ready = next(i for i, e in enumerate(events) if e.get("event") == "wakeup_delivered" and e.get("unit") == "db")
    api_starts = [i for i, e in enumerate(events)
                  if e.get("event") == "unit_state" and e.get("unit") == "api" and e["new"] == "starting"]
    assert api_starts and api_starts[0] > ready
    assert project.unit_status("db")["state"] == "running"


def test_requires_pulls_in_its_requirement_and_stops_with_it(project: Project) -> None:
    """systemd's Requires=: starting a unit starts what it requires; stopping that stops the unit too."""
    project.init_memory()
    project.fake_unit("db", cycle=True, restart=RESTART, unit="enabled = false")
    project.fake_unit("api", cycle=True, restart=RESTART, unit='requires = ["db"]')
    project.agentd("start")
    db = project.wait_state("db", "running")  # not enabled, but api requires it
    project.wait_state("api", "running", timeout=60)
    assert any(e.get("unit") == "db" and e["new"] == "starting" and e["reason"] == "required by api"
               for e in project.events("unit_state"))
    project.agentd("stop", "db", "--now")
    api = project.wait_state("api", "inactive")
    assert "requires 'db'" in api["reason"], api
    starts = [e["unit"] for e in project.events("unit_state") if e["new"] == "starting"]
    project.agentd("start", "api")  # pulls db in again, and waits for it
    project.wait_state("api", "running", timeout=60)
    assert project.unit_status("db")["pid"] not in (None, db["pid"])
    later = [e["unit"] for e in project.events("unit_state") if e["new"] == "starting"][len(starts):]
    assert later == ["db", "api"]


def test_a_unit_waits_for_a_requirement_that_is_restarting(project: Project) -> None:
    """A requirement in backoff is coming up again: the unit starts once it runs, not before."""
    project.init_memory()
    flag = project.root / "db-may-run"
    project.fake_unit("db", "--crash-unless", str(flag), cycle=True, restart="initial_delay = 1\nburst = 20")
    project.fake_unit("api", cycle=True, restart=RESTART, unit='requires = ["db"]')
    project.agentd("start")
    wait_until(lambda: "waiting: requires 'db'" in (project.unit_status("api")["reason"] or ""), 60,
               what="api to wait for db")
    assert project.unit_status("api")["state"] == "inactive"
    flag.write_text("ok")
    project.wait_state("db", "running", timeout=60)
    project.wait_state("api", "running", timeout=60)


def test_reload_starts_new_units_in_order_and_a_changed_requirement_restarts_its_dependents(project: Project) -> None:
    project.init_memory()
    project.fake_unit("base")
    project.agentd("start")
    project.wait_state("base", "running")
    project.fake_unit("web", unit='after = ["api"]')
    project.fake_unit("api", unit='requires = ["base"]')
    project.agentd("reload")
    project.wait_state("web", "running")
    api = project.wait_state("api", "running")
    starts = [e["unit"] for e in project.events("unit_state") if e["new"] == "starting"]
    assert starts.index("api") < starts.index("web")
    project.fake_unit("base", "--banner", "base, changed")  # the requirement changes: api goes down and comes back
    out = project.agentd("reload").stdout
    assert "restarted: " in out and "base" in out and "api" in out
    api_again = project.wait_state("api", "running")
    assert api_again["pid"] != api["pid"]
    assert project.unit_status("web")["state"] == "running"


def test_global_decision_and_task_reach_the_running_units(project: Project) -> None:
    project.agentd("init")
    project.fake_unit("alpha", cycle=True, restart=RESTART, scope='module = "alpha"\npaths = ["alpha/**"]')
    project.fake_unit("beta", cycle=True, restart=RESTART, scope='module = "beta"\npaths = ["beta/**"]')
    project.agentd("start")
    for name in ("alpha", "beta"):
        project.wait_state(name, "running")
        wait_until(lambda n=name: len(project.inputs(n)) == 1, 60, what=f"{name}'s wakeup")
    # alpha's agent records a global decision from its shell
    env = clean_env(AGENTD_UNIT="alpha", AGENTD_MODULE="alpha")
    out = project.agentd("decide", "freeze the wire format", "--why", "because both sides parse it, so it must not drift",
                         "--global", env=env).stdout
    assert "told the running units: beta" in out
    wait_until(lambda: any("global decision recorded: freeze the wire format" in m for m in project.last_inputs("beta")), 60,
               what="beta to hear about the global decision")
    assert not any("global decision" in m for m in project.last_inputs("alpha"))
    # a task switch for beta: the files, the decision, and the agent is told
    project.agentd("task", "beta", "port the parser to v2")
    assert "port the parser to v2" in (project.root / ".agent" / "tasks" / "beta.md").read_text()  # beta's own task
    assert "port the parser to v2" not in (project.root / ".agent" / "current-task.md").read_text()
    assert "task switch for beta" in (project.root / ".agent" / "decisions-beta.log").read_text()
    wait_until(lambda: any("New task from the operator: port the parser to v2" in m for m in project.last_inputs("beta")), 60,
               what="beta to get its new task")
    # the timeline merges module and global logs
    timeline = project.agentd("log", "--all").stdout
    assert "[global]" in timeline and "[beta] [task]" in timeline
    # beta's wakeup holds its module's decisions and the global ones, not alpha's
    project.agentd("decide", "alpha-only choice", "--why", "because alpha, so alpha", "--module", "alpha")
    wake = project.agentd("wakeup", "beta").stdout
    assert "freeze the wire format" in wake and "task switch for beta" in wake and "alpha-only choice" not in wake


def _daily_at(delta: float) -> str:
    """A 6-field cron that fires once a day, ``delta`` seconds from now (UTC)."""
    t = datetime.now(timezone.utc) + timedelta(seconds=delta)
    return f"{t.second} {t.minute} {t.hour} * * *"


def test_scheduled_start_and_stop(project: Project) -> None:
    project.agentd("init")
    # every 10 s a start, 7 s later a stop: whenever the daemon is up, the next of each comes on time
    # (grace = 0: nothing counts as missed), however long the daemon took to start; a stop that comes
    # before the unit ran is waited out by the next pair
    project.fake_unit("night", cycle=True, restart=RESTART, unit="enabled = false",
                      schedule='start = "*/10 * * * * *"\nstop = "7-59/10 * * * * *"\ngrace = 0')
    project.agentd("start")
    row = project.unit_status("night")
    assert row["schedule"]["start"] and row["schedule"]["stop"]

    def stopped_after_a_start() -> list[dict] | None:
        states = [e for e in project.events("unit_state", "night")]
        ran = next((i for i, e in enumerate(states) if e["new"] == "running"), None)
        if ran is None:
            return None
        done = [e for e in states[ran:] if e["new"] == "inactive"]
        return done or None

    inactive = wait_until(stopped_after_a_start, 90, what="a scheduled start, then a scheduled stop")
    assert inactive[0]["reason"] == "scheduled stop"
    # not enabled: only the schedule ever started it (never the daemon's own start)
    starts = [e["reason"] for e in project.events("unit_state", "night") if e["new"] == "starting"]
    assert starts and all(r == "scheduled start" for r in starts), starts
    record = next(r for r in project.history("night") if r["trigger"] == "stop")
    assert record["outcome"] == "stopped"
    fired = [(e["action"], e["missed"]) for e in project.events("schedule_fired", "night")]
    first_start = fired.index(("start", False))
    assert ("stop", False) in fired[first_start:]
    assert all(not missed for _, missed in fired)


def test_a_missed_run_fires_once(project: Project) -> None:
    project.agentd("init")
    project.fake_unit("late", cycle=True, restart=RESTART, unit="enabled = false",
                      schedule=f'start = "{_daily_at(-4)}"\ngrace = 600')
    project.agentd("start")
    project.wait_state("late", "running")
    fired = project.events("schedule_fired")
    assert [(e["action"], e["missed"]) for e in fired] == [("start", True)]
    # a second daemon start does not fire the same run again; a unit added meanwhile, with a
    # missed run of its own, shows when the daemon has caught up on the missed runs
    project.agentd("stop", "--now")
    project.fake_unit("marker", unit="enabled = false", schedule=f'start = "{_daily_at(-2)}"\ngrace = 600')
    project.agentd("start")
    wait_until(lambda: project.events("schedule_fired", "marker"), 60, what="the marker's missed run to fire")
    assert stays(lambda: len(project.events("schedule_fired", "late")) == 1
                 and project.unit_status("late")["state"] == "inactive", 3.0)


def test_usage_limit_waits_then_resumes_with_the_wakeup(project: Project) -> None:
    project.agentd("init")
    project.fake_unit("quota", cycle=True, restart=RESTART)
    project.agentd("start")
    first = project.wait_state("quota", "running")
    wait_until(lambda: len(project.inputs("quota")) == 1, 60, what="the wakeup")
    project.agentd("send", "quota", "echo Error: usage limit reached for this plan, try again in 4 seconds")
    row = project.wait_state("quota", "waiting")
    assert "usage limit" in row["reason"] and "resuming at" in row["reason"]
    assert not [e for e in project.events("unit_state") if e["unit"] == "quota" and e["new"] == "backoff"]
    again = project.wait_state("quota", "running", timeout=60)
    assert again["pid"] != first["pid"]
    wait_until(lambda: len(project.inputs("quota")) == 2, 60, what="the wakeup of the resumed session")


def test_a_stalled_agent_is_checkpointed_and_restarted(project: Project) -> None:
    project.agentd("init")
    project.fake_unit("sleepy", cycle=True, restart=RESTART, schedule="stall_after = 4")
    project.agentd("start")
    first = project.wait_state("sleepy", "running")
    wait_until(lambda: any(r["trigger"] == "stall" for r in project.history("sleepy")), 90, what="a stall cycle")
    record = next(r for r in project.history("sleepy") if r["trigger"] == "stall")
    assert record["outcome"] == "respawned" and record["old_session"] == first["session"]
    wait_until(lambda: len(project.inputs("sleepy")) >= 2, 60, what="the fresh session's wakeup")
    assert project.events("stalled")


def test_overlapping_scopes_are_refused_unless_shared(project: Project) -> None:
    project.agentd("init")
    project.fake_unit("whole", cycle=True, restart=RESTART, scope='paths = ["src/**"]')
    project.fake_unit("api", cycle=True, restart=RESTART, scope='paths = ["src/api/**"]')
    project.fake_unit("docs", cycle=True, restart=RESTART, scope='paths = ["docs/**"]')
    refused = project.agentd("start", check=False)
    assert refused.returncode == 1 and "whole.toml" in refused.stderr and "api.toml" in refused.stderr
    project.wait_state("docs", "running")
    status = project.status()
    assert {r["unit"] for r in status["units"]} == {"docs"}
    errors = [e for e in status["errors"] if "overlap" in e]
    assert len(errors) == 2
    assert any("whole.toml" in e and "'api'" in e and "src/api/" in e for e in errors)
    assert any("api.toml" in e and "'whole'" in e for e in errors)
    project.agentd("stop", "--now")
    project.fake_unit("whole", cycle=True, restart=RESTART, scope='paths = ["src/**"]\nshared = ["src/api/**"]')
    project.fake_unit("api", cycle=True, restart=RESTART, scope='paths = ["src/api/**"]\nshared = ["src/api/**"]')
    project.agentd("start")
    for name in ("whole", "api", "docs"):
        project.wait_state(name, "running")


def test_scope_violations_warn_revert_and_stop(project: Project) -> None:
    root = project.root
    for d in ("w1/migrations", "w2", "w3"):
        (root / d).mkdir(parents=True)
    (root / "w2" / "tracked.txt").write_bytes(b"line one\nline two\n")
    git(root, "init", "-q")
    git(root, "add", "w2/tracked.txt")
    git(root, "commit", "-q", "-m", "base")
    project.agentd("init")
    (root / ".agent" / "constraints.md").write_text("# Hard constraints\n\n- forbid: w1/migrations/**\n")
    for name, d, mode in (("warner", "w1", "warn"), ("reverter", "w2", "revert"), ("stopper", "w3", "stop")):
        project.fake_unit(name, cycle=True, restart=RESTART, agent=f'workdir = "{d}"',
                          scope=f'paths = ["{d}/src/**"]\non_violation = "{mode}"\nfence = "off"')  # the watcher
    project.agentd("start")
    for name in ("warner", "reverter", "stopper"):
        project.wait_state(name, "running")
        wait_until(lambda n=name: len(project.inputs(n)) == 1, 60, what=f"{name}'s wakeup")
    # warn: a forbidden path (constraints.md) is named in a message typed at the next turn end
    project.agentd("send", "warner", "write migrations/001.sql DROP TABLE users;")
    wait_until(lambda: any("w1/migrations/001.sql" in m and "constraints.md" in m for m in project.last_inputs("warner")),
               60, what="the warning typed into warner")
    # revert: the tracked file comes back byte for byte, the agent's version is kept in quarantine
    project.agentd("send", "reverter", "write tracked.txt EVIL")
    wait_until(lambda: (root / "w2" / "tracked.txt").read_bytes() == b"line one\nline two\n"
               and any(v["unit"] == "reverter" for v in _violations(project)), 60, what="the revert")
    assert any(p.read_bytes().endswith(b"EVIL\n") for p in (project.state / "quarantine").rglob("tracked.txt"))
    # stop: a checkpoint, then the unit stops
    project.agentd("send", "stopper", "write outside.txt oops")
    wait_until(lambda: project.unit_status("stopper")["state"] == "inactive", 60, what="the stop")
    assert project.history("stopper")[-1]["trigger"] == "stop"
    rules = {v["unit"]: v for v in _violations(project)}
    assert rules["warner"]["rule"].startswith("forbidden by constraints.md")
    assert rules["stopper"]["rule"].startswith("outside scope") and rules["stopper"]["action"] == "stop"
    assert project.unit_status("warner")["violations"] == 1
    listed = project.agentd("violations", "reverter").stdout
    assert "w2/tracked.txt" in listed and "revert" in listed and "warner" not in listed


def _violations(project: Project) -> list[dict]:
    out = project.agentd("violations", "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_stop_and_start_say_which_dependents_and_requirements_they_took_along(project: Project) -> None:
    """Issue 27 §2: `stop api` also stopped web (which requires it) and `start web` also started api, each
    without a word."""
    project.fake_unit("api")
    project.fake_unit("web", unit='requires = ["api"]')
    project.agentd("start")
    project.wait_state("api", "running")
    project.wait_state("web", "running")
    out = project.agentd("stop", "--now", "api").stdout.splitlines()
    assert "api: inactive" in out, out
    assert "web: inactive (also stopped: requires 'api', which was stopped)" in out, out
    out = project.agentd("start", "web").stdout.splitlines()
    assert "web: running" in out and "api: running (also started: required by web)" in out, out
    out = project.agentd("stop", "--now", "web").stdout.splitlines()
    assert out == ["web: inactive"], out  # a unit nothing requires takes nothing along
