"""Soak: one fake-agent unit through N kill / checkpoint cycles (issue 13); a storm of crash loops (issue 31).
Not part of CI.

``python -m bench.soak --cycles 1000 [--minutes 30] [--seed 13] [--keep]``
``python -m bench.soak --storm [--units 30] [--minutes 10] [--keep]``, ``python -m bench.soak --storm-report``

A temporary project runs the real daemon with one ``generic`` unit on the
fake agent (``--on-checkpoint confirm``: each checkpoint records a decision),
checkpoints and wakeups on.  Each cycle waits until the agent is idle after
its wakeup, then, at random:

* **kill** (half of the cycles): SIGKILL to the agent after a random delay:
  the restart policy must bring a fresh session that takes the wakeup;
* **checkpoint** (the other half): ``agentd checkpoint``; in a third of them
  the agent is also killed at a random point of the cycle.

Every tenth cycle the agent first starts a ``setsid`` grandchild late in its
session, which the kill or the cycle then orphans.

At the end the daemon is stopped and the report says: cycles run and the
time taken, restarts (sessions started after a crash), wakeups delivered
(sessions whose first message was the wakeup, of all sessions), decisions
kept (of the verified checkpoints, those whose decision is in the log),
orphans (grandchildren, and any other process of the project, alive after
the stop; they are then killed), and cycles that did not come back.

**The storm** (``--storm``, :mod:`bench.storm`): ``--units`` units of the fake
agent crashing a second after each start (``policy = "always"``, a 0.05 s
backoff, no start limit) for ``--minutes``; the daemon's RSS, open
descriptors, PTY masters and open sessions every 10 s; then every unit stopped
with ``--now`` in one command, 20 s of quiet, the same figures again, and the
daemon stopped.  It passes when RSS and descriptors stay within 10 % of their
value at the first minute and nothing of a session is left after the stop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from supervisor.control.client import call

from .running import agentd, of_project

PY = sys.executable
UNIT = "soak"
WAKEUP_HEAD = "# Wakeup briefing"


def setup(project: Path) -> Path:
    (project / "units").mkdir(parents=True)
    inputs = project / "inputs.jsonl"
    argv = json.dumps([PY, "-m", "supervisor.fakeagent", "--input-log", str(inputs), "--ignore-sighup"])
    (project / "units" / f"{UNIT}.toml").write_text(f"""
[agent]
command = {argv}
prompt = "fake> $"
[restart]
stop_timeout = 3
initial_delay = 0.1
max_delay = 1
burst = 1000000
[context]
window = 200000
[checkpoint]
grace = 1
deadline = 30
""")
    result = agentd(project, "init")
    if result.returncode != 0:
        raise SystemExit(f"agentd init failed: {result.stderr}")
    return inputs


def status(sock: Path) -> dict[str, Any] | None:
    try:
        rows = call(sock, "status", timeout=30, units=[UNIT])["units"]
    except Exception:  # noqa: BLE001 - the daemon between states: ask again
        return None
    return rows[0] if rows else None


def wait_ready(sock: Path, timeout: float = 120) -> dict[str, Any] | None:
    """The unit runs, took its wakeup and is idle; None at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = status(sock)
        if row and row["state"] == "running" and row["turn"] == "idle" and row["wakeup"] not in (None, "pending"):
            return row
        time.sleep(0.05)
    return None


def sessions(inputs: Path) -> list[list[str]]:
    """The messages each session received (a session's log starts at n = 1)."""
    out: list[list[str]] = []
    if inputs.exists():
        for line in inputs.read_text().splitlines():
            if line.strip():
                item = json.loads(line)
                if item["n"] == 1:
                    out.append([])
                if out:
                    out[-1].append(item["text"])
    return out


def late_grandchild(project: Path, sock: Path, row: dict[str, Any]) -> int | None:
    """A setsid grandchild started 2.5 s or more into the session; its pid."""
    while (row.get("uptime") or 0) < 2.5:
        time.sleep(0.2)
        row = status(sock) or row
    before = len(re.findall(r"grandchild (\d+)", transcript(project)))
    call(sock, "send", timeout=30, unit=UNIT, text="spawn-setsid")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.findall(r"grandchild (\d+)", transcript(project))
        if len(found) > before:
            return int(found[-1])
        time.sleep(0.05)
    return None


def transcript(project: Path) -> str:
    files = sorted((project / ".agentd" / "transcripts" / UNIT).glob("*.txt"))
    return files[-1].read_text(errors="replace") if files else ""


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def soak(cycles: int, minutes: float, seed: int, keep: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    project = Path(tempfile.mkdtemp(prefix="agentd-soak-")) / "proj"
    inputs = setup(project)
    sock = project / ".agentd" / "agentd.sock"
    started = time.monotonic()
    result = agentd(project, "start")
    if result.returncode != 0:
        raise SystemExit(f"agentd start failed: {result.stderr}")
    done = kills = checkpoints = killed_in_checkpoint = stuck = 0
    grandchildren: list[int] = []
    try:
        for i in range(cycles):
            if minutes and time.monotonic() - started > minutes * 60:
                break
            row = wait_ready(sock)
            if row is None:
                stuck += 1
                print(f"cycle {i}: the unit did not come back: {status(sock)}", file=sys.stderr, flush=True)
                continue
            if i % 10 == 9:
                kid = late_grandchild(project, sock, row)
                if kid is not None:
                    grandchildren.append(kid)
                row = wait_ready(sock) or row
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, 1.0))  # the random point of the kill
                kill(row["pid"])
                kills += 1
                _replaced(sock, row["pid"])
            else:
                checkpoints += 1
                box: dict[str, Any] = {}
                runner = threading.Thread(target=lambda: box.setdefault("r", _checkpoint(sock)))
                runner.start()
                if rng.random() < 1 / 3:
                    time.sleep(rng.uniform(0, 3.0))
                    kill(row["pid"])
                    killed_in_checkpoint += 1
                runner.join()
                _replaced(sock, row["pid"])
            done += 1
            if done % 50 == 0:
                print(f"{done} cycles, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        wait_ready(sock)
        last = status(sock) or {}
    finally:
        agentd(project, "stop", "--now")
    duration = time.monotonic() - started
    time.sleep(1.0)
    orphans = [pid for pid in grandchildren if psutil.pid_exists(pid) and _alive(pid)]
    others = [p.pid for p in of_project(project) if p.pid not in orphans]
    for pid in orphans + others:
        kill(pid)
    history = [json.loads(ln) for ln in agentd(project, "history", UNIT, "--json", "--sessions", "-n", "1000000")
               .stdout.splitlines() if ln.strip()]
    cycles_rec = [h for h in history if h["kind"] == "cycle"]
    starts = [h for h in history if h["kind"] == "session"]
    verified = [c for c in cycles_rec if c["flush"] == "verified"]
    logs = "".join(p.read_text(errors="replace") for p in (project / ".agent").glob("decisions*.log"))
    kept = [c for c in verified if f"fakeagent session {c['old_session']} checkpoint" in logs]
    got = sessions(inputs)
    report = {
        "cycles": done, "duration_s": round(duration, 1), "seed": seed,
        "kills": kills, "checkpoints": checkpoints, "agent_killed_in_checkpoint": killed_in_checkpoint,
        "restarts": sum(1 for s in starts if s["why"] == "crash"), "restarts_status": last.get("restarts"),
        "sessions": len(starts), "wakeups_delivered": sum(1 for s in got if s and s[0].startswith(WAKEUP_HEAD)),
        "sessions_with_input": len(got),
        "checkpoint_cycles": len(cycles_rec), "flush_verified": len(verified),
        "flush_auto": sum(1 for c in cycles_rec if c["flush"] == "auto"),
        "decisions_kept": len(kept), "decisions_expected": len(verified),
        "grandchildren": len(grandchildren), "orphans": len(orphans), "other_leftovers": len(others),
        "stuck_cycles": stuck, "project": str(project),
    }
    if not keep:
        shutil.rmtree(project.parent, ignore_errors=True)
    return report


def _replaced(sock: Path, pid: int, timeout: float = 120) -> None:
    """Wait until the daemon has seen the session ``pid`` end (so the next cycle never acts on a stale row)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = status(sock)
        if row is not None and row["pid"] != pid:
            return
        time.sleep(0.02)


def _checkpoint(sock: Path) -> Any:
    try:
        return call(sock, "checkpoint", timeout=None, unit=UNIT)
    except Exception as exc:  # noqa: BLE001 - a refusal (the agent was just killed) is part of the soak
        return str(exc)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no limit)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--keep", action="store_true", help="keep the temporary project")
    parser.add_argument("--storm", action="store_true", help="crash-looping units instead (issue 31)")
    parser.add_argument("--units", type=int, default=30, help="--storm: how many units")
    parser.add_argument("--storm-report", action="store_true",
                        help="write bench/RESULTS.md's storm section from bench/storm-results.json")
    parser.add_argument("--no-index", action="store_true", help="--storm: without the event index (to compare)")
    args = parser.parse_args(argv)
    if args.storm or args.storm_report:
        from .storm import main_storm

        return main_storm(args.units, args.minutes or 10, args.keep, report_only=args.storm_report,
                          index=not args.no_index)
    report = soak(args.cycles, args.minutes, args.seed, args.keep)
    print(json.dumps(report, indent=2))
    return 0 if not report["stuck_cycles"] and report["decisions_kept"] == report["decisions_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
