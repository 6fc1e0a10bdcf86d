"""Scale: the daemon with 1, 10, 50 and 200 agents printing 2 KB/s each (issue 19).

``python -m bench.scale [--counts 1,10,50,200] [--seconds 60] [--no-report]``

For each count N: the real daemon (``agentd start --foreground``, one
``generic`` unit per child, transcripts, redaction, clean text, context
estimates and the event indexer on, as in ``python -m bench``) supervises N
copies of ``bench/child.py --rate 2000`` for ``--seconds``.  Measured: the
daemon's CPU-seconds over the window (from ``/proc``), CPU per agent, its
peak RSS (``VmHWM``), bytes lost (every child's count against its
transcripts), and ``agentd status`` run back to back while the agents print
(wall time of each command: median and p95).  The targets at 200 (issue 29):
0 bytes lost, status p95 <= 2 x ``python -c pass`` beside it, RSS <= 150 MB,
CPU per agent at 200 <= 1.1 x that at 50.

Writes ``bench/scale-results.json`` and the section between the
``<!-- scale -->`` markers of ``bench/RESULTS.md`` (``python -m bench`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from bench.contenders import (AGENTD_CMD, AGENTD_ENV, HERE, PY, Agentd, Run, cpu_all, kill_leftovers, settle, status_kb,
                              wait_until)
from bench.report import machine, markers, write_section

BEGIN, END = markers("scale")
RATE = 2000


#: The reference run beside each ``agentd status``: the same interpreter starting and doing nothing.  No
#: command written in Python answers faster on this machine at this moment, so ``status`` over it is what
#: agentd adds (its imports, the socket round trip, the daemon's answer), with the load taken out.
REFERENCE = [PY, "-c", "pass"]


def _timed(argv: list[str], project: Path, env: dict[str, str]) -> tuple[float, int]:
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, proc.returncode


def _status_loop(project: Path, stop: threading.Event, walls: list[float], codes: list[int],
                 reference: list[float]) -> None:
    """``agentd status`` and :data:`REFERENCE`, in turn (which goes first alternates), 0.5 s apart."""
    env = os.environ | AGENTD_ENV
    turn = 0
    while not stop.is_set():
        for which in ((0, 1) if turn % 2 == 0 else (1, 0)):
            if which == 0:
                wall, code = _timed([*AGENTD_CMD, "status"], project, env)
                walls.append(wall)
                codes.append(code)
            else:
                reference.append(_timed(REFERENCE, project, env)[0])
        turn += 1
        stop.wait(0.5)


def _p95(values: list[float]) -> float:
    return values[min(len(values) - 1, int(0.95 * len(values)))]


def one(n: int, seconds: float) -> dict:
    run = Run(f"scale-{n}")
    names = [f"s{i:03d}" for i in range(n)]
    sup = Agentd(run, {name: run.child_argv(name, "--rate", str(RATE), "--duration", str(seconds), "--burst-ms", "100")
                       for name in names})
    walls: list[float] = []
    codes: list[int] = []
    reference: list[float] = []
    try:
        t_start = time.monotonic()
        sup.start()
        if not wait_until(lambda: run.ready() >= n, 300):
            raise RuntimeError(f"only {run.ready()} of {n} children started")
        startup = time.monotonic() - t_start
        time.sleep(2.0)  # the start-up's work settles
        cpu0, t0 = cpu_all(sup.pid), time.monotonic()
        run.go.touch()
        stop = threading.Event()
        poller = threading.Thread(target=_status_loop, args=(sup.project, stop, walls, codes, reference), daemon=True)
        poller.start()
        wait_until(lambda: len(run.counts()) >= n, seconds + 120, 0.2)
        stop.set()
        poller.join()
        counts = run.counts()
        expected = {name: sup.expected(counts[name]) for name in names}
        wait_until(lambda: all(sup.captured(name) >= expected[name] for name in names), 30, 0.1)
        t1 = time.monotonic()
        settle_s = settle(sup, n)  # the indexer's work behind the output counts too
        cpu1 = cpu_all(sup.pid)
        hwm = status_kb(sup.pid, "VmHWM") / 1024
        lost = sum(max(0, expected[name] - sup.captured(name)) for name in names)
    finally:
        sup.stop()
        kill_leftovers(run)
        run.cleanup()
    walls.sort()
    reference.sort()
    return {"agents": n, "seconds": t1 - t0, "settle_s": settle_s, "cpu_s": cpu1 - cpu0, "cpu_s_per_agent": (cpu1 - cpu0) / n,
            "core_percent": (cpu1 - cpu0) / (t1 - t0 + settle_s) * 100, "peak_rss_mb": hwm, "lost_bytes": lost,
            "written_bytes": sum(c["bytes"] for c in counts.values()), "startup_s": startup,
            "status_runs": len(walls), "status_failed": sum(1 for c in codes if c != 0),
            "status_median_ms": statistics.median(walls) * 1000 if walls else None,
            "status_p95_ms": _p95(walls) * 1000 if walls else None,
            "status_max_ms": walls[-1] * 1000 if walls else None,
            "reference_median_ms": statistics.median(reference) * 1000 if reference else None,
            "reference_p95_ms": _p95(reference) * 1000 if reference else None}


def _reference(r: dict) -> str:
    """The reference's cells of a row (rows of runs before the reference existed have none)."""
    if r.get("reference_p95_ms") is None:
        return "– | –"
    ratio = r["status_p95_ms"] / r["reference_p95_ms"]
    return f"{r['reference_median_ms']:.0f} / {r['reference_p95_ms']:.0f} | {ratio:.2f}×"


def section(data: dict) -> str:
    rows = data["rows"]
    L = [BEGIN, f"## 8. The curve: 1 → {rows[-1]['agents']} agents × 2 KB/s (`python -m bench.scale`)", "",
         f"Produced on {data['date']} by `python -m bench.scale --seconds {data['seconds']:g}` (agentd from the working "
         f"tree; load average at start {', '.join(f'{x:.2f}' for x in data['machine']['loadavg_at_start'])}, at the end "
         f"{', '.join(f'{x:.2f}' for x in data['loadavg_at_end'])}). One run per count; `agentd status` ran back to back "
         "(0.5 s apart) while the agents printed, each beside a reference run, `python -c pass` with the same "
         "interpreter (which of the two goes first alternates): no Python command can answer faster on this machine "
         "at that moment, so the ratio shows what agentd adds with the machine's load taken out. The daemon runs everything it runs for real (transcripts, redaction, "
         "clean text, context estimates, the event indexer, the fence and containment of each session). Its CPU "
         "counts its threads and the helper processes it reaped, from the start of the output until its event "
         "indexer has read every transcript and it is back at idle.", "",
         "| agents | daemon CPU-s | % of one core | CPU-s per agent | peak RSS MB | bytes lost | status median ms | "
         "status p95 ms | `python -c pass` median / p95 ms | status p95 / reference p95 | status runs (failed) | "
         "start-up s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['agents']} | {r['cpu_s']:.2f} | {r['core_percent']:.1f} | {r['cpu_s_per_agent']:.4f} | "
                 f"{r['peak_rss_mb']:.1f} | {r['lost_bytes']} | {r['status_median_ms']:.0f} | {r['status_p95_ms']:.0f} | "
                 f"{_reference(r)} | {r['status_runs']} ({r['status_failed']}) | {r['startup_s']:.1f} |")
    by = {r["agents"]: r for r in rows}
    L += [""]
    if 50 in by and 200 in by:
        big, mid = by[200], by[50]
        growth = big["cpu_s"] / mid["cpu_s"]
        per = big["cpu_s_per_agent"] / mid["cpu_s_per_agent"]
        ref = big.get("reference_p95_ms")
        ok = {"lost": big["lost_bytes"] == 0, "p95": ref is not None and big["status_p95_ms"] <= 2 * ref,
              "rss": big["peak_rss_mb"] <= 150, "linear": per <= 1.1}
        L += ["Targets at 200 agents (issue 29):", "",
              f"- {'MET' if ok['lost'] else 'NOT MET'}: 0 bytes lost — {big['lost_bytes']}",
              f"- {'MET' if ok['p95'] else 'NOT MET'}: `status` p95 ≤ 2 × `python -c pass` beside it while they print — "
              f"{big['status_p95_ms']:.0f} ms" + (f" against {ref:.0f} ms ({big['status_p95_ms'] / ref:.2f}×)" if ref else ""),
              f"- {'MET' if ok['rss'] else 'NOT MET'}: daemon RSS ≤ 150 MB — {big['peak_rss_mb']:.1f} MB (peak)",
              f"- {'MET' if ok['linear'] else 'NOT MET'}: CPU per agent at 200 ≤ 1.1 × that at 50 — {per:.2f}× "
              f"({mid['cpu_s_per_agent']:.4f} → {big['cpu_s_per_agent']:.4f} CPU-s; {growth:.2f}× the CPU for 4× the "
              "agents)", ""]
    L.append(END)
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    p.add_argument("--counts", default="1,10,50,200", help="agent counts, comma-separated")
    p.add_argument("--seconds", type=float, default=60.0, help="how long each count prints")
    p.add_argument("--no-report", action="store_true", help="print only (do not touch RESULTS.md)")
    args = p.parse_args(argv)
    data: dict = {"date": datetime.now().strftime("%Y-%m-%d %H:%M"), "machine": machine(), "seconds": args.seconds,
                  "rows": []}
    for n in (int(x) for x in args.counts.split(",")):
        r = one(n, args.seconds)
        data["rows"].append(r)
        print(f"  [scale] {n:3d} agents: {r['cpu_s']:.2f} CPU-s ({r['cpu_s_per_agent']:.4f} per agent), peak "
              f"{r['peak_rss_mb']:.1f} MB, lost {r['lost_bytes']}, status median {r['status_median_ms']:.0f} ms "
              f"p95 {r['status_p95_ms']:.0f} ms over {r['status_runs']}", flush=True)
    data["loadavg_at_end"] = os.getloadavg()
    if args.no_report:
        print(json.dumps(data, indent=1))
        return 0
    (HERE / "scale-results.json").write_text(json.dumps(data, indent=1))
    write_section("scale", section(data), HERE / "RESULTS.md")
    print(section(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
