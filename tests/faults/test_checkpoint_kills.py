"""Issue 13: the agent killed with -9 at random points of a checkpoint; the cycle still ends in a fresh session.

Each round runs ``agentd checkpoint`` on an agent that takes its time over
the checkpoint (``--on-checkpoint slow:2``) and kills the agent after a random
delay: while agentd waits for the turn end, while the agent writes its notes,
during the flush grace, while the old session quits or after the new one has
started.  Whatever the point, the command answers, the unit runs a fresh
session that took the wakeup, the cycle is recorded with a verified or an
automatic flush, and what verified cycles wrote is kept.
"""

from __future__ import annotations

import os
import random
import signal

from tests.conftest import Project, wait_until

from .conftest import final_checks
from .cycles import background, cycle_unit, finish, history, pause, ready

ROUNDS = 4


def test_agent_killed_at_random_points_of_a_checkpoint(project: Project) -> None:
    rng = random.Random(int(os.environ.get("FAULT_SEED", "1313")))
    inputs = cycle_unit(project, "fragile", "--on-checkpoint", "slow:2")
    project.agentd("start")
    sessions = 1
    for rnd in range(ROUNDS):
        old = ready(project, "fragile", inputs, sessions)
        proc = background(project, "checkpoint", "fragile")
        # the random point is counted from the checkpoint's start (the command itself may be slow to arrive)
        wait_until(lambda: project.unit_status("fragile")["state"] != "running" or proc.poll() is not None, 60,
                   what="the checkpoint to begin")
        delay = pause(rng, 0.0, 5.0)
        try:
            os.kill(old["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass  # the cycle had already replaced it: a kill after the cycle
        code, out, err = finish(proc)
        assert code == 0, f"round {rnd} (kill after {delay:.2f} s): {err}"
        record = history(project, "fragile")[-1]
        assert record["outcome"] == "respawned" and record["flush"] in ("verified", "auto"), (rnd, delay, record)
        row = wait_until(lambda: (r := project.unit_status("fragile")) and r["state"] == "running"
                         and r["pid"] != old["pid"] and r, 90, what="a fresh session")
        assert row["pid"] != old["pid"]
        # the cycle's fresh session and, when the kill came after it, the crash restart each took a wakeup
        sessions = len({r["session"] for r in _sessions(project, "fragile")})
    cycles = history(project, "fragile")
    verified = [c["old_session"] for c in cycles if c["flush"] == "verified"]
    assert len(cycles) == ROUNDS
    if any(c["flush"] == "auto" for c in cycles):
        assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()
    final_checks(project, ["fragile"], decisions=[f"fakeagent session {s} checkpoint" for s in verified])


def _sessions(project: Project, unit: str) -> list[dict]:
    import json

    out = project.agentd("history", unit, "--json", "--sessions").stdout
    return [r for r in map(json.loads, filter(None, out.splitlines())) if r["kind"] == "session"]
