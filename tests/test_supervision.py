"""Supervision claims of the README, end to end: the real daemon, the `agentd` CLI, the fake agent.

Only what the product exposes is observed: ``status --json``, exit codes,
``history``, transcripts, the event log and the processes themselves.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

from tests.conftest import CONSTRAINT, TASK, Project, alive, processes_of, wait_until


def sigterm_ignored(pid: int) -> bool:
    """Whether ``pid`` ignores SIGTERM (its SigIgn mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    raise AssertionError(f"no SigIgn line for pid {pid}")


def when(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def test_a_generic_agent_killed_with_sigkill_restarts_from_the_wakeup(project: Project) -> None:
    project.init_memory()
    project.fake_unit("worker", cycle=True, restart="initial_delay = 0.2")
    project.agentd("start")
    old = project.wait_state("worker", "running")
    wait_until(lambda: len(project.inputs("worker")) == 1, 60, what="the first session's wakeup")
    os.kill(old["pid"], signal.SIGKILL)
    new = wait_until(lambda: (r := project.unit_status("worker"))["state"] == "running"
                     and r["session"] != old["session"] and r, 60, what="the restarted session")
    assert new["restarts"] == 1 and "SIGKILL" in (new["last_exit"] or ""), new
    assert not alive(old["pid"])
    wait_until(lambda: len(project.inputs("worker")) == 2, 60, what="the restarted session's wakeup")
    wakeup = project.inputs("worker")[1][0]
    assert wakeup == project.agentd("wakeup", "worker").stdout  # the briefing, exactly as `agentd wakeup` prints it
    assert CONSTRAINT in wakeup and TASK in wakeup
    crash = [e for e in project.events("unit_state", "worker") if e["new"] == "backoff"]
    assert len(crash) == 1 and "SIGKILL" in crash[0]["reason"]


def test_a_term_ignoring_agent_and_its_escaped_grandchild_are_gone_by_stop_timeout_plus_1s(project: Project) -> None:
    timeout = 2.0
    project.fake_unit("stubborn", "--ignore-sigterm", "--spawn-setsid-grandchild", stop_timeout=timeout)
    project.agentd("start")
    row = project.wait_state("stubborn", "running")
    (kid,) = project.grandchildren("stubborn", 1)
    # preconditions: both ignore SIGTERM, and the grandchild escaped the agent's session and group
    assert sigterm_ignored(row["pid"]) and sigterm_ignored(kid)
    assert os.getsid(kid) == kid != os.getsid(row["pid"])

    project.agentd("stop", "--now", "stubborn")  # returns once the unit is down

    assert not alive(row["pid"]) and not alive(kid)
    assert processes_of(project.root) == []  # nothing of the unit is left (the daemon does not count)
    stopping = next(e for e in reversed(project.events("unit_state", "stubborn")) if e["new"] == "stopping")
    (killed,) = project.events("stop_timeout", "stubborn")  # logged once the SIGKILLed tree is gone
    assert {row["pid"], kid} <= set(killed["pids"])
    # by the daemon's own clock: TERM was not enough (it waited the stop timeout), KILL ended it all at once
    assert timeout <= when(killed) - when(stopping) <= timeout + 1.0, (stopping, killed)


def test_status_of_a_unit_that_is_not_running_exits_3(project: Project) -> None:
    project.fake_unit("up")
    project.fake_unit("down", unit="enabled = false")
    project.agentd("start")
    project.wait_state("up", "running")
    assert project.agentd("status", "up", check=False).returncode == 0
    down = project.agentd("status", "down", check=False)
    assert down.returncode == 3 and "inactive" in down.stdout
    assert project.agentd("status", "up", "down", check=False).returncode == 3  # every named unit must run
    assert project.agentd("status", "down", "--json", check=False).returncode == 3
    project.agentd("stop", "up")
    assert project.agentd("status", "up", check=False).returncode == 3
    assert project.agentd("status", check=False).returncode == 0  # the daemon itself still runs
    project.agentd("stop")
    assert project.agentd("status", "up", check=False).returncode == 3


def test_sighup_reloads_the_unit_files(project: Project) -> None:
    project.fake_unit("same")
    project.fake_unit("changed")
    project.agentd("start")
    same = project.wait_state("same", "running")
    changed = project.wait_state("changed", "running")
    daemon = project.daemon_pid()
    project.fake_unit("changed", "--banner", "banner after SIGHUP")
    project.fake_unit("added")
    assert daemon is not None
    os.kill(daemon, signal.SIGHUP)
    project.wait_state("added", "running")
    new = wait_until(lambda: (r := project.unit_status("changed"))["state"] == "running"
                     and r["pid"] != changed["pid"] and r, 30, what="the changed unit to restart")
    wait_until(lambda: "banner after SIGHUP" in project.transcript("changed", new["session"]), 30, what="the new banner")
    assert project.unit_status("same")["pid"] == same["pid"] and alive(same["pid"])
    assert project.daemon_pid() == daemon and alive(daemon)  # reloaded in place, not restarted
    (reloaded,) = project.events("reloaded")
    assert reloaded["started"] == ["added"] and reloaded["restarted"] == ["changed"] and "same" in reloaded["kept"]
