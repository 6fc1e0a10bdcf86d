"""The flood (scenario 2) as an A/B run: the floor and two versions of agentd, alternating, in one run.

``python -m bench.flood_ab [--mb 50] [--reps 3] [--before REV] [--after REV] [--index on|off|default]``

Each rotation runs the floor (:mod:`bench.floor`), agentd from ``git archive
REV`` (default ``main``) and agentd from the working tree (or ``--after REV``:
a snapshot, so editing the tree during a run changes nothing), one child flooding
``--mb`` MB each, in an order that turns every rotation.  Each agentd figure is
printed as a ratio against the floor *of the same rotation*: on a machine
shared with other work, only ratios measured side by side mean anything.
The targets of issue 29: MB/s >= 0.9x the floor's, CPU per MB <= 1.5x.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from bench import __main__ as suite
from bench.contenders import AGENTD_CMD, AGENTD_ENV, PY, ROOT, WORK

_DEFAULT_CMD = list(AGENTD_CMD)


def archive(rev: str) -> Path:
    """``git archive REV`` unpacked under bench/.work (reused when already there)."""
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    tree = WORK / f"ab-{sha}"
    if not (tree / "supervisor").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        tar = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=tar, check=True)
    return tree


def use(tree: Path | None, index: str) -> None:
    """Run agentd from ``tree`` (None: the working tree, as installed)."""
    AGENTD_ENV.clear()
    if tree is None:
        AGENTD_CMD[:] = _DEFAULT_CMD
    else:
        AGENTD_ENV["PYTHONPATH"] = str(tree)
        AGENTD_CMD[:] = [PY, "-m", "supervisor"]
    if index != "default":
        AGENTD_ENV["AGENTD_EVENT_INDEX"] = "true" if index == "on" else "false"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=50)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--before", default="main", help="the revision to compare with")
    p.add_argument("--after", help="a revision instead of the working tree")
    p.add_argument("--index", choices=("on", "off", "default"), default="default", help="the daemon's event indexer")
    args = p.parse_args(argv)
    before = archive(args.before)
    after = archive(args.after) if args.after else None
    kinds = {"floor": None, f"agentd {args.before}": before, f"agentd {args.after or '(tree)'}": after}
    size = args.mb * 1_000_000
    ratios: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds if k != "floor"}
    for rep in range(args.reps):
        names = list(kinds)
        names = names[rep % len(names):] + names[:rep % len(names)]
        got: dict[str, dict] = {}
        for name in names:
            if name == "floor":
                got[name] = suite.stream_once("floor", 1, ["--flood", str(size)], flood=True)
            else:
                use(kinds[name], args.index)
                got[name] = suite.stream_once("agentd", 1, ["--flood", str(size)], flood=True)
            r = got[name]
            print(f"  rep {rep + 1} {name:16s} {r['mb_per_s']:6.1f} MB/s  {r['mb_per_cpu_s']:6.1f} MB per CPU-s  "
                  f"lost {r['lost_bytes']}", flush=True)
        floor = got["floor"]
        for name in ratios:
            r = got[name]
            ratios[name].append((r["mb_per_s"] / floor["mb_per_s"], floor["mb_per_cpu_s"] / r["mb_per_cpu_s"]))
    use(None, "default")
    print("ratios against the floor of the same rotation (median; targets: MB/s >= 0.90x, CPU per MB <= 1.50x)")
    for name, rs in ratios.items():
        speed = [s for s, _ in rs]
        cpu = [c for _, c in rs]
        print(f"  {name:16s} MB/s {statistics.median(speed):.2f}x ({', '.join(f'{s:.2f}' for s in speed)})  "
              f"CPU per MB {statistics.median(cpu):.2f}x ({', '.join(f'{c:.2f}' for c in cpu)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
