"""50 units ending at once: the CPU of agentd's git work when every unit's session ends together (issue 29).

Run ``python -m bench.git_bench [--units 50] [--rounds 3] [--before 75de735]``.

Each measurement is a fresh process (``--worker``) that builds projects of
``--units`` modules (``mods/mNN/``, 20 committed files each, every module with
two files changed, one added and one deleted, as an agent leaves them), then
does what the daemon does when all those sessions end at once, all started
together on a thread pool the size of asyncio's default executor (what
``asyncio.to_thread`` uses): on one project the WIP saves alone (agentd's git
work), on another the whole :class:`~supervisor.continuity.keeper.UnitKeeper`
keep of each unit (its trail read, the WIP commit of its scope, where it
stopped, the report's blob hashes of the files its trail touched).  The CPU counted
is the worker's own (user + system), **every child process it waited for**
(``RUSAGE_CHILDREN``: the git processes of the code before libgit2) and the
daemon's git helper (``supervisor.memory.gitworker``, read from ``/proc``),
from before the first keep to after the last; imports, a first repository
read and the helper's start happen before, as in a daemon that has been
running.

``--before REV`` is the code to compare with, taken from this repository with
``git archive`` into ``bench/.work/``; the two run alternately, each round in
the other order, on the same machine, so the ratio holds on a loaded machine
where the absolute figures do not.  The result is printed as JSON and a line
per contender (median CPU-s, and the ratio after/before).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
WORK = HERE / ".work"
FILES_PER_MODULE = 20
TARGET_CPU_S = 1.0


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.com"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=300)


def build_project(root: Path, units: int) -> None:
    """``units`` modules of committed files, then each module's uncommitted work."""
    for n in range(units):
        mod = root / "mods" / f"m{n:02d}"
        mod.mkdir(parents=True)
        for i in range(FILES_PER_MODULE):
            (mod / f"f{i:02d}.py").write_text("".join(f"value_{i}_{k} = {k}\n" for k in range(60)))
    (root / "README.md").write_text("bench\n")
    _git(root.parent, "init", "-q", str(root))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    for n in range(units):
        mod = root / "mods" / f"m{n:02d}"
        for i in (0, 1):
            with (mod / f"f{i:02d}.py").open("a") as fh:
                fh.write("changed = True\n")
        (mod / "new.py").write_text("new = 1\n")
        (mod / f"f{FILES_PER_MODULE - 1:02d}.py").unlink()


def _cpu_of(pid: int | None) -> float:
    """User + system CPU-s of a live process (``/proc/PID/stat``), 0 without one."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _window(fn, helper_pid) -> dict[str, float]:
    """Run ``fn``; the CPU it took in this process, in every child process waited for, and in the daemon's
    long-lived git helper (read from /proc: it is not waited for), and the wall time."""
    pid = helper_pid()
    self0, child0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    helper0 = _cpu_of(pid)
    wall0 = time.monotonic()
    fn()
    wall = time.monotonic() - wall0
    self1, child1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    if helper_pid() != pid:
        raise SystemExit("the git helper was replaced during the window: its CPU cannot be counted")
    own = (self1.ru_utime - self0.ru_utime) + (self1.ru_stime - self0.ru_stime)
    children = (child1.ru_utime - child0.ru_utime) + (child1.ru_stime - child0.ru_stime) + _cpu_of(pid) - helper0
    return {"cpu_s": own + children, "own_cpu_s": own, "children_cpu_s": children, "wall_s": wall}


def worker(units: int) -> dict[str, dict[str, float]]:
    """Two fresh projects: on one, every unit's WIP save at once (the git work alone); on the other, every
    unit's whole keep at once (trail, WIP, where it stopped, the report's hashes)."""
    from supervisor.continuity.keeper import Moment, UnitKeeper
    from supervisor.memory import init_store
    from supervisor.memory.gitfiles import in_git, list_files
    from supervisor.memory.wip import save_wip
    from supervisor.trail.model import Action, Kind, Trail

    def trail_of(n: int) -> Trail:
        mod = f"mods/m{n:02d}"
        return Trail(source="bench", actions=[
            Action(Kind.READ, "Read", reads=(f"{mod}/f02.py", f"{mod}/f03.py")),
            Action(Kind.EDIT, "Edit", edits=(f"{mod}/f00.py", f"{mod}/f01.py", f"{mod}/new.py")),
            Action(Kind.COMMAND, "Bash", command="pytest -q", exit_code=0, ok=True),
        ])

    threads = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor (what asyncio.to_thread uses)
    try:  # the daemon does its git work in a helper process (code before it: in its own threads)
        from supervisor.memory.gitworker import isolate

        helper = isolate()
        helper_pid = lambda: helper.pid  # noqa: E731
    except ImportError:
        helper_pid = lambda: None  # noqa: E731
    out = {}
    base = Path(tempfile.mkdtemp(prefix="agentd-git-bench-"))
    try:
        for phase in ("wip", "keep"):
            root = base / phase
            build_project(root, units)
            init_store(root)
            assert in_git(root)  # the first repository read (and libgit2's import) happen before the window
            list_files(root, ["README.md"])  # so does the daemon's first request to its git helper (it starts it)
            if phase == "wip":
                def run(n: int, root: Path = root) -> bool:
                    return save_wip(root, f"u{n:02d}", [f"mods/m{n:02d}/**"], moment="stop", session=f"s-{n}") is not None
            else:
                keepers = [UnitKeeper(root, f"u{n:02d}", f"m{n:02d}", [f"mods/m{n:02d}/**"]) for n in range(units)]

                def run(n: int, keepers: list[UnitKeeper] = keepers) -> bool:
                    return bool(keepers[n].keep(Moment.STOP, f"s-{n}", lambda: trail_of(n)).wip)
            done: list[bool] = []
            with ThreadPoolExecutor(max_workers=threads) as pool:
                out[phase] = _window(lambda: done.extend(pool.map(run, range(units))), helper_pid)
            if sum(done) != units:
                raise SystemExit(f"{phase}: only {sum(done)} of {units} WIP commits were saved")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out


def checkout(rev: str) -> Path:
    """The package as of ``rev`` (``git archive``), for the comparison."""
    dest = WORK / f"git-bench-{rev}"
    if not (dest / "supervisor").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "supervisor"], cwd=PROJECT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def measure(code: Path, units: int) -> dict[str, float]:
    # the package from ``code`` (the working directory comes first on sys.path), this bench from the project
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["PYTHONPATH"] = f"{code}{os.pathsep}{PROJECT}"
    out = subprocess.run([sys.executable, "-m", "bench.git_bench", "--worker", "--units", str(units)], cwd=code,
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"the worker for {code} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.git_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", default="75de735", help="the code to compare with (a commit of this repository)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.units)))
        return 0
    contenders = {"before": checkout(args.before), "after": PROJECT}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in contenders}
    for n in range(args.rounds):
        order = list(contenders) if n % 2 == 0 else list(reversed(contenders))
        for name in order:
            runs[name].append(measure(contenders[name], args.units))
    summary = {name: {phase: {key: statistics.median(r[phase][key] for r in items) for key in items[0][phase]}
                      for phase in items[0]} for name, items in runs.items()}
    ratios = {phase: summary["after"][phase]["cpu_s"] / summary["before"][phase]["cpu_s"] for phase in summary["after"]}
    print(json.dumps({"units": args.units, "rounds": args.rounds, "before": args.before, "median": summary,
                      "after_over_before": ratios, "runs": runs}, indent=1))
    for phase, what in (("wip", "WIP saves alone"), ("keep", "whole keeps (trail, WIP, stopped, report)")):
        print(f"{args.units} units ending at once, {what}, median of {args.rounds}:")
        for name in contenders:
            fig = summary[name][phase]
            print(f"  {name:>6}: {fig['cpu_s']:.2f} CPU-s ({fig['own_cpu_s']:.2f} agentd's process, "
                  f"{fig['children_cpu_s']:.2f} its git processes or helper), {fig['wall_s']:.2f} s wall")
        print(f"  after/before: {ratios[phase]:.3f}")
    keep = summary["after"]["keep"]["cpu_s"]
    print(f"target <= {TARGET_CPU_S:g} CPU-s for the whole keeps: {'met' if keep <= TARGET_CPU_S else 'NOT met'} ({keep:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
