"""Issue 13 item 7: ``agentd decide`` killed with -9 at random points, while the daemon supervises a unit.

Every ``decide`` that returned keeps its decision, no two decisions share a
snapshot id, each decision's snapshot exists and records it, and no line of
the decision log is torn (``agentd doctor``, part of the final checks).
(The memory store's own test, tests/memory/test_killed_decide.py, kills a
library loop; this one kills the real command line.)
"""

from __future__ import annotations

import os
import random
import signal
import time

from supervisor.memory import AgentPaths, decisions, snapshots
from tests.conftest import Project

from .conftest import final_checks
from .cycles import background, finish, pause

ROUNDS = 16


def test_decide_killed_at_random_points(project: Project) -> None:
    rng = random.Random(int(os.environ.get("FAULT_SEED", "1307")))
    project.fake_unit("bystander")
    project.agentd("start")
    project.wait_state("bystander", "running")
    # how long one decide takes here: the kills land between half of that and a little after it
    started = time.monotonic()
    code, _out, err = finish(background(project, "decide", "fault decision first", "--why", "because it is timed, so "
                                        "the kills land inside the next ones"))
    took = time.monotonic() - started
    assert code == 0, err
    kept = ["fault decision first"]
    for rnd in range(ROUNDS):
        text = f"fault decision {rnd}"
        proc = background(project, "decide", text, "--why", "because a kill may come at any moment, so ids survive it",
                          *(["--global"] if rnd % 2 else ["--module", "bystander"]))
        pause(rng, 0.5 * took, 1.1 * took)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        code, _out, err = finish(proc)
        if code == 0:
            kept.append(text)
        else:
            assert code == -signal.SIGKILL, err
    paths = AgentPaths(project.root)
    entries = [e for module in (None, "bystander") for e in decisions.iter_all(paths, module)]
    assert all(isinstance(e, decisions.Entry) for e in entries), entries
    ids = [e.decision.snapshot for e in entries]
    assert len(ids) == len(set(ids)), f"decisions share snapshot ids: {ids}"
    for e in entries:
        assert snapshots.load_id(paths, e.decision.snapshot)["decision"] == e.decision.decision
    final_checks(project, ["bystander"], decisions=kept)
