"""The storm soak (issue 31): many crash-looping units for a long time.  ``python -m bench.soak --storm``.

A temporary project runs the real daemon with ``units`` units of the fake
agent that exits a second after each start, restarted at once (``policy =
"always"``, ``initial_delay = 0.05``, ``multiplier = 1``, no start limit), for
``minutes``.  Every :data:`EVERY` seconds it samples the daemon process: RSS,
open descriptors, PTY masters (descriptors on ``/dev/ptmx``), open sessions
(``status``: sessions that still hold their PTY) and the restarts so far.
Then every unit is stopped with ``--now`` in one command (timed), 20 s of quiet
pass, the same figures are taken, and the daemon is stopped (timed).

It passes when, after the first minute, RSS and descriptors stay within
:data:`FLAT` of their value in the minute after it (each minute's median), and after the stop no PTY
master and no open session is left, and no process of the project runs.
Figures go to ``bench/storm-results.json``; ``--storm-report`` writes the
storm section of ``bench/RESULTS.md`` from them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from supervisor.control.client import call

from .running import agentd, of_project

EVERY = 10.0
FLAT = 0.10
QUIET = 20.0
RESULTS = Path(__file__).resolve().parent / "storm-results.json"
UNIT = """
[agent]
command = ["{python}", "-m", "supervisor.fakeagent", "--crash-after", "1"]
prompt = "fake> $"
[restart]
policy = "always"
initial_delay = 0.05
multiplier = 1
burst = 1000000
interval = 1
stop_timeout = 3
[checkpoint]
enabled = false
[wakeup]
on_start = false
"""


def _ptys(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in ("/dev/ptmx", "/dev/pts/ptmx"):
                count += 1
        except OSError:
            continue
    return count


def _transcripts(project: Path) -> int:
    """Sessions' transcripts on disk: one more per restart, each of them in every pass of the event index."""
    return sum(1 for unit in (project / ".agentd" / "transcripts").iterdir() if unit.is_dir()
               for f in os.scandir(unit) if f.name.endswith(".txt"))


def sample(daemon: psutil.Process, project: Path, started: float) -> dict[str, Any]:
    try:
        status = call(project / ".agentd" / "agentd.sock", "status", timeout=60)
    except Exception:  # noqa: BLE001 - a busy daemon: the figures without status
        status = {}
    units = status.get("units") or []
    return {"t": round(time.monotonic() - started, 1), "rss_mb": round(daemon.memory_info().rss / 2**20, 1),
            "fds": daemon.num_fds(), "ptys": _ptys(daemon.pid),
            "open_sessions": (status.get("daemon") or {}).get("open_sessions"),
            "restarts": sum(u.get("restarts") or 0 for u in units),
            "transcripts": _transcripts(project)}


def at(curve: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """The sample closest to ``seconds`` into the run."""
    return min(curve, key=lambda s: abs(s["t"] - seconds))


def drift(curve: list[dict[str, Any]], key: str) -> float:
    """The largest relative distance of a later minute's median from the second minute's (the first
    minute after the start), so that a sample taken while many units happen to be between two
    restarts (three descriptors fewer each) is not a trend."""
    minutes: dict[int, list[float]] = {}
    for s in curve:
        if s["t"] >= 60:
            minutes.setdefault(int(s["t"] // 60), []).append(s[key])
    medians = [statistics.median(v) for _, v in sorted(minutes.items())]
    if not medians or not medians[0]:
        return 0.0
    return max(abs(m - medians[0]) / medians[0] for m in medians)


def storm(units: int, minutes: float, keep: bool, index: bool = True) -> dict[str, Any]:
    project = Path(tempfile.mkdtemp(prefix="agentd-storm-")) / "proj"
    (project / "units").mkdir(parents=True)
    names = [f"c{i:02d}" for i in range(1, units + 1)]
    for name in names:
        (project / "units" / f"{name}.toml").write_text(UNIT.format(python=sys.executable))
    sock = project / ".agentd" / "agentd.sock"
    result = agentd(project, "start", **({} if index else {"EVENT_INDEX": "false"}))
    if result.returncode != 0:
        raise SystemExit(f"agentd start failed: {result.stderr}")
    daemon = psutil.Process(int((project / ".agentd" / "agentd.pid").read_text().split()[0]))
    started = time.monotonic()
    curve: list[dict[str, Any]] = []
    try:
        while time.monotonic() - started < minutes * 60:
            curve.append(sample(daemon, project, started))
            print(json.dumps(curve[-1]), file=sys.stderr, flush=True)
            time.sleep(max(0.0, EVERY - (time.monotonic() - started) % EVERY))
        curve.append(sample(daemon, project, started))
        t = time.monotonic()
        stopped = agentd(project, "stop", "--now", *names)
        stop_units_s = time.monotonic() - t
        states = {u["unit"]: u["state"] for u in call(sock, "status", timeout=60)["units"]}
        time.sleep(QUIET)
        after = sample(daemon, project, started)
    finally:
        t = time.monotonic()
        agentd(project, "stop", "--now")
        stop_daemon_s = time.monotonic() - t
    time.sleep(1.0)
    leftovers = of_project(project)
    for proc in leftovers:
        proc.kill()
    minute = at(curve, 60)
    report = {
        "units": units, "minutes": minutes, "event_index": index, "restarts": curve[-1]["restarts"],
        "restarts_per_minute": round(curve[-1]["restarts"] / (curve[-1]["t"] / 60), 1) if curve[-1]["t"] else 0,
        "at_1_min": minute, "at_5_min": at(curve, 300), "at_10_min": at(curve, 600), "last": curve[-1],
        "rss_drift_after_1_min": round(drift(curve, "rss_mb"), 3), "fds_drift_after_1_min": round(drift(curve, "fds"), 3),
        "stop_units_s": round(stop_units_s, 2), "stop_rc": stopped.returncode,
        "not_inactive_after_stop": sorted(n for n, s in states.items() if s != "inactive"),
        "after_stop": after, "stop_daemon_s": round(stop_daemon_s, 2), "leftover_processes": len(leftovers),
        "curve": curve, "project": str(project),
    }
    report["passed"] = (report["rss_drift_after_1_min"] <= FLAT and report["fds_drift_after_1_min"] <= FLAT
                        and after["ptys"] == 0 and not after["open_sessions"] and not leftovers
                        and not report["not_inactive_after_stop"])
    if not keep:
        shutil.rmtree(project.parent, ignore_errors=True)
    return report


def section(data: dict[str, Any]) -> str:
    """The storm section of bench/RESULTS.md (between its markers)."""
    from .report import markers

    begin, end = markers("storm")
    one, five, ten, after = data["at_1_min"], data["at_5_min"], data["at_10_min"], data["after_stop"]
    rows = [f"| {s['t'] / 60:.0f} min | {s['rss_mb']:.1f} | {s['fds']} | {s['ptys']} | {s['restarts']} | "
            f"{s.get('transcripts', '–')} |" for s in (one, five, ten)]
    return "\n".join([
        begin, "## 9. Storm: crash-looping units for a long time (`python -m bench.soak --storm`)", "",
        f"{data['units']} units of the fake agent exiting 1 s after each start, restarted after 0.05 s, for "
        f"{data['minutes']:g} minutes: {data['restarts']} restarts ({data['restarts_per_minute']} a minute). "
        "The daemon's own process, sampled every 10 s:", "",
        "| time | RSS MB | open fds | PTY masters | restarts so far | transcripts on disk |",
        "|---|---|---|---|---|---|", *rows,
        f"| after `stop --now` of every unit and {QUIET:.0f} s of quiet | {after['rss_mb']:.1f} | {after['fds']} | "
        f"{after['ptys']} | open sessions: {after['open_sessions']} | |", "",
        f"After the first minute each minute's median RSS stayed within {data['rss_drift_after_1_min']:.1%} and its "
        f"median of descriptors within {data['fds_drift_after_1_min']:.1%} of the second minute's (target: "
        f"within {FLAT:.0%}). "
        f"Stopping every unit took {data['stop_units_s']:.1f} s, the daemon {data['stop_daemon_s']:.1f} s; "
        f"{data['leftover_processes']} processes of the project were left. "
        f"{'MET' if data['passed'] else 'NOT MET'}.", "", *_growth(one, ten, data), end])


def _growth(one: dict[str, Any], ten: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """What RSS grew with: a restart leaves a transcript on disk, and each pass of the event index lists them all."""
    files = (ten.get("transcripts") or 0) - (one.get("transcripts") or 0)
    if not data.get("event_index", True) or files <= 0:
        return []
    per = (ten["rss_mb"] - one["rss_mb"]) * 1024 / files
    return [f"Between 1 and {ten['t'] / 60:.0f} min {files} transcripts were added and RSS grew "
            f"{ten['rss_mb'] - one['rss_mb']:.1f} MB, {per:.1f} KiB per transcript: the event index's pass holds "
            "every transcript's path and stat (`eventindex/index.py: update`); with the index off "
            "(`--no-index`) the daemon's own figures level off."]


def main_storm(units: int, minutes: float, keep: bool, report_only: bool = False, index: bool = True) -> int:
    from .report import write_section

    if not report_only:
        data = storm(units, minutes, keep, index)
        # the run RESULTS.md shows; a run without the index is kept beside it, for comparison
        (RESULTS if index else RESULTS.with_name("storm-noindex-results.json")).write_text(json.dumps(data, indent=2) + "\n")
        print(json.dumps({k: v for k, v in data.items() if k != "curve"}, indent=2))
        return 0 if data["passed"] else 1
    data = json.loads(RESULTS.read_text())
    write_section("storm", section(data), Path(__file__).resolve().parent / "RESULTS.md")
    return 0
