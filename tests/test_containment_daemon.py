"""Containment in the real daemon (issue 13 item 6): a setsid grandchild started late ends with its session.

Each test runs in both modes: ``cgroup`` (this machine: root, cgroup2 at
/sys/fs/cgroup/unified) and ``subreaper`` (forced with ``AGENTD_CONTAINMENT``).
The grandchild is started more than 2 s into the session, when the old
daemon's only record of the tree had already been taken.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.conftest import Project, alive, clean_env, wait_until

MODES = ("cgroup", "subreaper")


def _env(mode: str) -> dict[str, str]:
    return clean_env(AGENTD_CONTAINMENT="auto" if mode == "cgroup" else "subreaper")


def _start(project: Project, mode: str, *flags: str, **sections: str) -> dict:
    project.fake_unit("u", *flags, **sections)
    project.agentd("start", env=_env(mode))
    return project.wait_state("u", "running")


def _late_grandchild(project: Project, count: int = 1) -> psutil.Process:
    """Start a setsid grandchild once the session is more than 2 s old; its process."""
    wait_until(lambda: (project.unit_status("u") or {}).get("uptime", 0) > 2.5, 30, what="a session older than 2 s")
    project.agentd("send", "u", "spawn-setsid")
    pid = project.grandchildren("u", count)[-1]
    proc = psutil.Process(pid)
    assert os.getsid(pid) == pid, "precondition: the grandchild runs in a session of its own"
    return proc


def _in_group(pid: int, group: str) -> bool:
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if x.startswith("0::"))
    return group.endswith(line[3:])


def _gone(proc: psutil.Process) -> bool:
    return not alive(proc.pid, proc.create_time())


@pytest.mark.parametrize("mode", MODES)
def test_status_shows_the_mode_and_each_units_cpu_and_memory(project: Project, mode: str) -> None:
    row = _start(project, mode, resources='memory_max = "256M"\ncpu_weight = 50')
    status = project.status()
    assert status["daemon"]["containment"]["mode"] == mode
    # the figures are of a sample up to 3 status intervals old (StatsSampler): one taken as the session began
    # may show no CPU yet; a later one does
    row = wait_until(lambda: (r := project.unit_status("u")) and r["cpu_seconds"] is not None and r["cpu_seconds"] > 0
                     and r, 30, what="a sample with the session's CPU")
    assert row["containment"] == mode
    assert row["memory_bytes"] and row["memory_bytes"] > 1 << 20
    assert row["memory_source"] in ("memory.current", "rss")
    # the limits are either applied or each named as unavailable (here: no memory/cpu controller in cgroup v2)
    limits = row["limits"]
    assert len(limits["applied"]) + len(limits["unavailable"]) == 2, limits
    if mode == "cgroup":
        assert row["cgroup"] and _in_group(row["pid"], row["cgroup"])
    else:
        assert row["cgroup"] is None and all("no cgroup" in why for why in limits["unavailable"])
    text = project.agentd("status").stdout
    assert f"containment: {status['daemon']['containment']['detail']}" in text and "MEM" in text


@pytest.mark.parametrize("mode", MODES)
def test_a_late_setsid_grandchild_ends_when_the_agent_is_killed(project: Project, mode: str) -> None:
    row = _start(project, mode)
    kid = _late_grandchild(project)
    if mode == "cgroup":
        assert _in_group(kid.pid, project.unit_status("u")["cgroup"])
    os.kill(row["pid"], signal.SIGKILL)
    wait_until(lambda: _gone(kid), 30, what="the grandchild to be ended with the killed agent's session")
    new = project.wait_state("u", "running", timeout=60)  # the unit restarts (on-failure)
    assert new["pid"] != row["pid"]


@pytest.mark.parametrize("mode", MODES)
def test_a_late_setsid_grandchild_ends_at_stop(project: Project, mode: str) -> None:
    _start(project, mode)
    kid = _late_grandchild(project)
    project.agentd("stop", "u")
    assert _gone(kid), "stop returned while the grandchild still runs"
    assert project.unit_status("u")["state"] == "inactive"


@pytest.mark.parametrize("mode", MODES)
def test_a_late_setsid_grandchild_ends_when_the_daemon_is_killed_and_started_again(project: Project, mode: str) -> None:
    row = _start(project, mode, "--ignore-sighup")
    kid = _late_grandchild(project)
    agent = psutil.Process(row["pid"])
    daemon = project.daemon_pid()
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 10, what="the daemon to die")
    assert not _gone(kid) and agent.is_running(), "precondition: the agent and its grandchild outlived the daemon"
    project.agentd("start", env=_env(mode))
    new = project.wait_state("u", "running")
    assert new["pid"] != row["pid"]
    wait_until(lambda: _gone(kid) and not alive(agent.pid, agent.create_time()), 30,
               what="the old agent and its grandchild to be ended")
    assert project.events("containment_leftovers_ended")
    assert new["containment"] == mode
