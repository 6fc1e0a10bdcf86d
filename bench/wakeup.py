"""Wakeup time as the decision log grows, against a plain shell wakeup.

``python -m bench.wakeup [--short]`` builds ``.agent/`` stores with 10, 1,000
and 100,000 decisions (rolled into 50-decision epochs as agentd writes them,
plus one 100,000-line hand-written log) and 1,000 snapshots in a temporary
git repository, then times :func:`supervisor.continuity.wakeup.build_wakeup` (median of
several runs) and a plain shell wakeup (``cat`` task and constraints,
``tail -5`` the log, ``find | head -30``) on the same directory.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from supervisor.memory import init_store
from supervisor.memory.decisions import EPOCH_SIZE
from supervisor.memory.store import AgentPaths, snapshot_id
from supervisor.continuity.wakeup import build_wakeup

SHELL = "cat .agent/current-task.md .agent/constraints.md; tail -5 {log}; find . -path ./.git -prune -o -print | head -30"


def _line(i: int) -> str:
    minute = i % 60
    hour = (i // 60) % 24
    return (f"[2026-11-30 {hour:02d}:{minute:02d}] [arch] decision: decision {i} about module parsing | "
            f"why: because case {i} came up, so we handled it | files: src/core/f{i % 40}.py | "
            f"snapshot: {snapshot_id(i + 1)}")


def build_store(root: Path, decisions: int, *, single_file: bool = False, snapshots: int = 1000) -> str:
    """Create a project with ``decisions`` decisions in module ``core``; return the live log's path."""
    (root / "src" / "core").mkdir(parents=True)
    for i in range(40):
        (root / "src" / "core" / f"f{i}.py").write_text(f"value = {i}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "add", "src"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"], cwd=root, check=True)
    init_store(root)
    paths = AgentPaths(root)
    paths.constraints.write_text("# Hard constraints\n\n- Never break the public API.\n")
    paths.current_task.write_text("# Current task\n\nFix parsing in src/core/f3.py\n\nState at interruption: tests red\n")
    lines = [_line(i) for i in range(decisions)]
    epochs = 0
    if single_file:
        paths.decisions("core").write_text("\n".join(lines) + "\n")
    else:
        live = len(lines) % EPOCH_SIZE
        cut = len(lines) - live
        for start in range(0, cut, EPOCH_SIZE):
            epochs += 1
            paths.epoch("core", epochs).write_text("\n".join(lines[start : start + EPOCH_SIZE]) + "\n")
        paths.decisions("core").write_text("".join(ln + "\n" for ln in lines[cut:]))
    files = {f"src/core/f{i}.py": "0" * 40 for i in range(40)}
    for seq in range(max(1, decisions - snapshots + 1), decisions + 1):
        data = {"id": snapshot_id(seq), "seq": seq, "decision": f"decision {seq - 1}", "files": files,
                "complete": seq > decisions - 20, "changed": {"modified": ["src/core/f1.py"]}}
        paths.snapshot(seq).write_text(json.dumps(data))
    state = {"version": 1, "snapshot_seq": decisions, "fact_seq": 0, "last_snapshot": snapshot_id(decisions),
             "last_snapshot_by_module": {"core": decisions}, "logs": {"decisions-core": {"epochs": epochs}},
             "thinned_upto": max(0, decisions - 20)}
    paths.state.write_text(json.dumps(state))
    return str(paths.rel(paths.decisions("core")))


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(short: bool = False) -> dict:
    """Run the benchmark; return {case: {"wakeup_ms", "shell_ms", "ratio"}}."""
    cases = [("10", 10, False), ("1,000", 1000, False), ("100,000", 100_000, False),
             ("100,000 one file", 100_000, True)]
    runs = 3 if short else 7
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, count, single in cases:
            root = Path(tmp) / f"p{count}{'s' if single else ''}"
            log = build_store(root, count, single_file=single, snapshots=min(1000, count))
            build_wakeup(root, "core", ["src/core"])  # warm caches
            py = _median(lambda: build_wakeup(root, "core", ["src/core"]), runs)
            shell = _median(
                lambda: subprocess.run(["bash", "-c", SHELL.format(log=log)], cwd=root, capture_output=True, check=True),
                runs,
            )
            results[name] = {"wakeup_ms": py * 1000, "shell_ms": shell * 1000, "ratio": py / shell}
    return results


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    results = run(short="--short" in argv)
    print(f"{'decisions':>18} {'build_wakeup ms':>16} {'shell ms':>10} {'ratio':>7}")
    for name, r in results.items():
        print(f"{name:>18} {r['wakeup_ms']:>16.1f} {r['shell_ms']:>10.1f} {r['ratio']:>7.2f}")


if __name__ == "__main__":
    main()
