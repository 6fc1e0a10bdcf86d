"""8 processes x 200 decides: nothing lost, nothing interleaved, snapshot ids unique and increasing."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

from supervisor.memory import AgentPaths, record_decision
from supervisor.memory import decisions, snapshots
from supervisor.memory.ids import snapshot_sort_key

WORKERS = 8
PER_WORKER = 200
WHY = "because the workers race, so the lock must hold"


def _worker(root: str, worker: int, count: int) -> list[str]:
    out = []
    for i in range(count):
        module = "core" if i % 2 else None  # exercise both the module log and the global log
        rec = record_decision(Path(root), f"w{worker} d{i}", WHY, module=module, scope_paths=["src"])
        out.append(rec.snapshot)
    return out


def _all_entries(paths: AgentPaths) -> list[decisions.Entry]:
    items = [e for m in (None, "core") for e in decisions.iter_all(paths, m)]
    assert all(isinstance(e, decisions.Entry) for e in items), [e for e in items if not isinstance(e, decisions.Entry)]
    return items  # type: ignore[return-value]


def test_eight_processes_two_hundred_decides_each(plain: Path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WORKERS) as pool:
        results = pool.starmap(_worker, [(str(plain), w, PER_WORKER) for w in range(WORKERS)])
    paths = AgentPaths(plain)
    entries = _all_entries(paths)
    total = WORKERS * PER_WORKER
    assert len(entries) == total
    assert sorted(e.decision.decision for e in entries) == sorted(
        f"w{w} d{i}" for w in range(WORKERS) for i in range(PER_WORKER)
    )
    # each worker's ids increase in its own order; all ids are unique, and each has its file
    for ids in results:
        assert ids == sorted(ids, key=snapshot_sort_key)
    all_ids = [s for ids in results for s in ids]
    assert len(set(all_ids)) == total
    assert snapshots.list_ids(paths) == sorted(all_ids, key=snapshot_sort_key)
    # every line names its own snapshot and the snapshot names the line's decision
    for e in entries[:: 97]:
        assert snapshots.load_id(paths, e.decision.snapshot)["decision"] == e.decision.decision
    # within each log, file order is snapshot order (appends happen under the lock)
    for module in (None, "core"):
        keys = [e.decision.snapshot_key for e in entries if e.module == module]
        assert keys == sorted(keys)
    assert json.loads(paths.state.read_text())["last_snapshot"] == max(all_ids, key=snapshot_sort_key)
    assert not any(p.name.endswith(".tmp") for p in paths.dir.rglob("*"))


def test_concurrent_cli_decides(repo: Path):
    agentd = Path(sys.executable).with_name("agentd")
    env = {**os.environ, "AGENTD_MODULE": "core"}
    env.pop("AGENTD_UNIT", None)
    script = (
        f"for i in $(seq 3); do {agentd} --root {repo} decide \"p$N d$i\" --why \"{WHY}\" --scope src/core"
        " >/dev/null || exit 1; done"
    )
    procs = [subprocess.Popen(["bash", "-c", script], env={**env, "N": str(n)}) for n in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    entries = _all_entries(AgentPaths(repo))
    assert sorted(e.decision.decision for e in entries) == sorted(f"p{n} d{i}" for n in range(4) for i in range(1, 4))
    assert {e.module for e in entries} == {"core"}
