"""Issue 13 item 7: `decide` killed with SIGKILL at random points never makes two decisions share a snapshot.

A worker process records decisions in a loop (global and module logs, in a
real git repository so each decide also runs git) and is killed with -9 after
a random delay, many times.  Afterwards every decision line must name its own
snapshot: the ids are unique, and each snapshot file exists and records that
decision.  (Before the fix the line was appended before the counter was
saved, so a kill between the two made the next decide reuse the id and
overwrite the earlier decision's snapshot.)
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from supervisor.memory import AgentPaths, decisions, record_decision, snapshots

from ..conftest import wait_until

ROUNDS = 30
WHY = "because the worker may die at any moment, so ids must survive it"
WORKER = """
import sys
from pathlib import Path
from supervisor.memory import record_decision
root, rnd = Path(sys.argv[1]), sys.argv[2]
print("ready", flush=True)
i = 0
while True:
    record_decision(root, f"round {rnd} decision {i}", sys.argv[3], module="core" if i % 2 else None,
                    scope_paths=["src"])
    i += 1
"""


def _entries(paths: AgentPaths) -> list[decisions.Entry]:
    items = [item for module in (None, "core") for item in decisions.iter_all(paths, module)]
    bad = [item for item in items if not isinstance(item, decisions.Entry)]
    assert not bad, bad
    return items  # type: ignore[return-value]


def test_decide_killed_at_random_points_keeps_ids_unique(repo: Path):
    rng = random.Random(1307)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for rnd in range(ROUNDS):
        proc = subprocess.Popen([sys.executable, "-c", WORKER, str(repo), str(rnd), WHY],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            before = len(_entries(AgentPaths(repo)))
            # let it get into its loop (at least one decision), then kill it at a random point
            wait_until(lambda: len(_entries(AgentPaths(repo))) > before, 30, 0.005, "a first decision")
            _pause(rng.uniform(0.0, 0.15))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()  # type: ignore[union-attr]
    # a decide after all the crashes still gets a fresh id
    last = record_decision(repo, "after the crashes", WHY, scope_paths=["src"])
    paths = AgentPaths(repo)
    entries = _entries(paths)
    assert len(entries) > ROUNDS
    ids = [e.decision.snapshot for e in entries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"decisions share snapshot ids: {dupes}"
    assert last.snapshot in ids
    for e in entries:
        data = snapshots.load_id(paths, e.decision.snapshot)
        assert data["id"] == e.decision.snapshot
        assert data["decision"] == e.decision.decision, (e.decision.snapshot, data["decision"], e.decision.decision)


def _pause(seconds: float) -> None:
    """The random point of the kill: fault injection, not synchronisation."""
    import time

    time.sleep(seconds)
