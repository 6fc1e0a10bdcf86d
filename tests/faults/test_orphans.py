"""Issue 13 item 6: a setsid grandchild started late in a session, then orphaned, does not survive.

The grandchild is started more than 2 s into the session (after the early
record of the session's tree) and escapes the process group (``setsid``).
Then its parent goes away: the agent crashes right after starting it (the
crash loop), or the daemon is killed with -9 (the next start must end it).
Only containment (a cgroup per session, or the daemon as a child subreaper)
finds it; the process tree recorded every 30 s does not.

The daemon's containment (:mod:`supervisor.daemon.confinement`) does.
"""

from __future__ import annotations

import os
import re
import signal

from tests.conftest import Project, alive, wait_until

from .conftest import final_checks


def _grandchildren(project: Project, unit: str) -> set[str]:
    """Every grandchild pid any session of ``unit`` printed."""
    texts = (p.read_text(errors="replace") for p in (project.state / "transcripts" / unit).glob("*.txt"))
    return {pid for text in texts for pid in re.findall(r"grandchild (\d+)", text)}


def _late_grandchild(project: Project, unit: str, then: str) -> int:
    """Start a setsid grandchild 3 s or more into the session; ``then`` is typed right after it."""
    wait_until(lambda: (r := project.unit_status(unit))["state"] == "running" and (r["uptime"] or 0) >= 3, 60,
               what="a session older than its early tree record")
    seen = _grandchildren(project, unit)
    project.agentd("send", unit, "spawn-setsid")
    project.agentd("send", unit, then)  # queued: typed at the turn end, right after the spawn
    found = wait_until(lambda: _grandchildren(project, unit) - seen, 30, what="the grandchild's pid")
    return int(found.pop())


def test_a_late_setsid_grandchild_is_ended_when_orphaned(project: Project) -> None:
    argv = '["python", "-m", "supervisor.fakeagent", "--ignore-sighup"]'
    project.unit("loop", f'[agent]\ncommand = {argv}\nprompt = "fake> $"\n[restart]\nstop_timeout = 2\n'
                         'initial_delay = 0.2\nburst = 1000\n[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n')
    project.agentd("start")
    # the agent crashes right after starting it: the crash restart must end it
    kid = _late_grandchild(project, "loop", "crash 3")
    wait_until(lambda: project.unit_status("loop")["restarts"] >= 1, 60, what="the crash restart")
    project.wait_state("loop", "running")
    wait_until(lambda: not alive(kid), 30, what=f"the orphaned grandchild {kid} to be ended after the crash")
    # the daemon is killed right after it starts one: the next start must end it
    kid = _late_grandchild(project, "loop", "echo next")
    daemon = project.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 30, what="the daemon to die")
    project.agentd("start")
    project.wait_state("loop", "running")
    wait_until(lambda: not alive(kid), 30, what=f"the grandchild {kid} left by the killed daemon to be ended")
    final_checks(project, ["loop"])
