"""The event layer: query time at 100,000 indexed turns, and the flood with and without the indexer.

``python -m bench.events [--short] [--turns N] [--flood-mb MB] [--reps N]``

1. **Queries.**  Builds a project whose transcripts hold ``--turns`` turns
   (default 100,000; 5 units x 10 sessions, fake-agent-like output with
   identifiers and some Chinese, about 400 bytes a turn) and 1,000 decisions,
   indexes it with :meth:`EventIndex.update` (time, MB/s, database size), then
   times each query of :data:`QUERIES` (median and max of 15 runs, warm, in
   this process).  The figure of issue 16: under 100 ms.
2. **Flood.**  The flood of ``python -m bench`` (scenario 2: one child writing
   ``--flood-mb`` MB as fast as it can through a PTY), run by the real daemon
   with ``AGENTD_EVENT_INDEX=false`` and ``=true``, alternating, ``--reps``
   times each: MB/s to the last byte on disk, MB per CPU-second of the
   daemon, bytes lost, and the indexer thread's own CPU (the daemon's threads
   at nice 19) and how far it had read when the flood ended.
3. **Idle.**  50 idle agents (scenario 3 of ``python -m bench``), the
   daemon's share of a core without and with the indexer.
4. **Known answers.**  The queries of the event tests, asked again with each
   way a unit may index (``[agent] index`` "summary" and "full"):
   :mod:`bench.known_answers`.

Writes ``bench/events-results.json`` and the section between the
``<!-- events -->`` markers of ``bench/RESULTS.md`` (``python -m bench``
keeps that section when it rewrites the file).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench import known_answers
from bench.contenders import AGENTD_ENV, CLK_TCK, HERE, WORK, Agentd, Run, cpu_all, kill_leftovers, settle, wait_until
from bench.report import machine, markers, write_section
from supervisor.eventindex import EventIndex, default_db
from supervisor.eventindex.turns import marker_for
from supervisor.fakeagent import work_lines
from supervisor.memory import init_store
from supervisor.memory.store import snapshot_id

BEGIN, END = markers("events")
WORDS = ("parser cache adapter config retry timeout schema migration index token session transcript wakeup "
         "checkpoint decision snapshot module scope fence cgroup daemon socket redaction flood budget").split()
CHINESE = ("接口层采用适配器模式", "缓存放在磁盘上", "解析器配置", "重试超时", "测试通过")
#: (label, words): what is searched, and how often it occurs in the corpus.
QUERIES = [
    ("rare identifier (1 turn)", ["refresh_token_rotation_4711"]),
    ("identifier in ~1 % of turns", ["ScopeGuard.changed"]),
    ("two-character Chinese (~2 %)", ["适配"]),
    ("Chinese phrase (~2 %)", ["适配器模式"]),
    ("two words", ["Editing", "module_4711"]),
    ("common word (most turns)", ["pytest"]),
]


# ---------------------------------------------------------------- 1. queries
def build_corpus(root: Path, turns: int) -> int:
    """Transcripts with ``turns`` turns and 1,000 decisions under ``root``; returns the transcript bytes."""
    rng = random.Random(16)
    init_store(root)
    log = root / ".agent" / "decisions-core.log"
    log.write_text("".join(f"[2026-11-{1 + i % 28:02d} 12:{i % 60:02d}] [arch] decision: decision {i} about the "
                           f"{rng.choice(WORDS)} | why: because case {i}, so we did it | snapshot: {snapshot_id(i + 1)}\n"
                           for i in range(1000)))
    sessions = [(f"u{u}", f"202611{1 + s * 2:02d}T{10 + u:02d}0000-{u:02d}{s:04d}") for u in range(5) for s in range(10)]
    per = turns // len(sessions)
    total = 0
    n = 0
    for unit, session in sessions:
        path = root / ".agentd" / "transcripts" / unit / f"{session}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        chunks = []
        for _ in range(per):
            task = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
            if n % 100 == 0:
                task += " see ScopeGuard.changed"
            if n % 50 == 7:
                task += " " + rng.choice(CHINESE)
            if n == turns // 2:
                task += " refresh_token_rotation_4711"
            body = work_lines(rng.randint(2, 8), offset=n)
            chunks.append("fake> " + task + "\n" + "\n".join(body) + "\n")
            n += 1
        data = "".join(chunks)
        path.write_text(data)
        os.utime(path, (time.time() - (len(sessions) - n // per) * 3600,) * 2)
        total += len(data.encode())
    return total


def scenario_queries(turns: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="events-", dir=WORK)) / "proj"
    root.mkdir(parents=True)
    try:
        size = build_corpus(root, turns)
        marker = marker_for("generic", "fake> $")
        state = root / ".agentd"
        with EventIndex(default_db(state), root, state, markers=lambda unit: marker) as ix:
            cpu0, t0 = time.process_time(), time.perf_counter()
            ix.update(None)
            build_s, build_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            counts = ix.count()
            out: dict = {"turns": counts.get("turn", 0), "events": sum(counts.values()), "transcript_mb": size / 1e6,
                         "build_s": build_s, "build_cpu_s": build_cpu, "db_mb": _db_size(state) / 1e6, "queries": {}}
            print(f"  [q] indexed {out['turns']} turns ({size / 1e6:.1f} MB) in {build_s:.1f} s, "
                  f"db {out['db_mb']:.0f} MB", flush=True)
            for label, words in QUERIES:
                times, cpu, hits = [], [], 0
                for _ in range(15):
                    t, c = time.perf_counter(), time.thread_time()
                    hits = len(ix.search(words, limit=10))
                    times.append((time.perf_counter() - t) * 1000)
                    cpu.append((time.thread_time() - c) * 1000)
                matches = _matches(ix, words)
                out["queries"][label] = {"words": words, "median_ms": statistics.median(times), "max_ms": max(times),
                                         "cpu_ms": statistics.median(cpu), "hits": hits, "matches": matches}
                print(f"  [q] {label:32s} {statistics.median(times):7.1f} ms (max {max(times):.1f}, CPU "
                      f"{statistics.median(cpu):.1f}), {matches} matching events", flush=True)
        return out
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def _db_size(state: Path) -> int:
    return sum(p.stat().st_size for p in state.glob("events.db*"))


def _matches(ix: EventIndex, words: list[str]) -> int:
    """How many events hold every word (a scan: for the table, not timed)."""
    cond = " AND ".join("instr(lower(body), ?) > 0" for _ in words)
    return ix.conn.execute(f"SELECT count(*) FROM texts WHERE {cond}", [w.lower() for w in words]).fetchone()[0]


# ---------------------------------------------------------------- 2. flood
def niced_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s threads that run at nice 19 (the event indexer)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[16]) == 19:
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def flood_once(indexer: bool, size: int) -> dict:
    AGENTD_ENV["AGENTD_EVENT_INDEX"] = "true" if indexer else "false"
    run = Run(f"ev-{'on' if indexer else 'off'}")
    sup = Agentd(run, {"c00": run.child_argv("c00", "--flood", str(size))})
    try:
        sup.start()
        if not wait_until(lambda: run.ready() >= 1, 120):
            raise RuntimeError("the child did not start")
        time.sleep(1.0)
        cpu0 = cpu_all(sup.pid)
        t0 = time.monotonic()
        run.go.touch()
        wait_until(lambda: len(run.counts()) >= 1, 600, 0.02)
        expected = sup.expected(run.counts()["c00"])
        complete = wait_until(lambda: sup.captured("c00") >= expected, 60, 0.002)
        t1 = time.monotonic()
        read = _indexed_bytes(sup.project / ".agentd")
        settle_s = settle(sup, 1)  # the indexer's work behind the flood counts too
        cpu1 = cpu_all(sup.pid)
        index_cpu = niced_cpu(sup.pid)
        captured = sup.captured("c00")
    finally:
        sup.stop()
        kill_leftovers(run)
    written = run.counts()["c00"]["bytes"]
    run.cleanup()
    return {"indexer": indexer, "mb_per_s": written / (t1 - t0) / 1e6, "mb_per_cpu_s": written / max(cpu1 - cpu0, 1e-9) / 1e6,
            "cpu_s": cpu1 - cpu0, "indexer_cpu_s": index_cpu, "lost_bytes": max(0, expected - captured),
            "complete": complete, "indexed_bytes_at_end": read, "written_bytes": written, "settle_s": settle_s}


def _indexed_bytes(state: Path) -> int:
    """How far the indexer had read the transcripts (its ``pos``), 0 without an index."""
    db = default_db(state)
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT coalesce(sum(pos), 0) FROM sources WHERE kind = 'transcript'").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def idle_once(indexer: bool, n: int, window: float) -> dict:
    """The daemon's CPU over ``window`` seconds with ``n`` idle agents, and its indexer thread's."""
    AGENTD_ENV["AGENTD_EVENT_INDEX"] = "true" if indexer else "false"
    run = Run(f"evi-{'on' if indexer else 'off'}")
    sup = Agentd(run, {f"a{i:02d}": run.child_argv(f"a{i:02d}", "--idle") for i in range(n)})
    try:
        sup.start()
        if not wait_until(lambda: run.ready() >= n, 120):
            raise RuntimeError(f"only {run.ready()} of {n} children started")
        run.go.touch()
        wait_until(lambda: len(run.counts()) >= n, 60)
        time.sleep(3.0)  # let start-up work settle
        cpu0, niced0, t0 = cpu_all(sup.pid), niced_cpu(sup.pid), time.monotonic()
        time.sleep(window)
        cpu1, niced1, t1 = cpu_all(sup.pid), niced_cpu(sup.pid), time.monotonic()
    finally:
        sup.stop()
        kill_leftovers(run)
    run.cleanup()
    return {"indexer": indexer, "seconds": t1 - t0, "core_percent": (cpu1 - cpu0) / (t1 - t0) * 100,
            "indexer_core_percent": (niced1 - niced0) / (t1 - t0) * 100}


def scenario_idle(reps: int, n: int, window: float) -> dict:
    """The daemon's CPU with ``n`` idle agents (scenario 3 of ``python -m bench``), without and with the indexer."""
    out: dict = {"off": [], "on": []}
    for rep in range(reps):
        for indexer in ((False, True) if rep % 2 == 0 else (True, False)):
            r = idle_once(indexer, n, window)
            out["on" if indexer else "off"].append(r)
            print(f"  [i] indexer {'on ' if indexer else 'off'} rep {rep + 1}: {r['core_percent']:.3f} % of a core "
                  f"(the indexer thread {r['indexer_core_percent']:.3f} %)", flush=True)
    AGENTD_ENV.pop("AGENTD_EVENT_INDEX", None)
    return out


def scenario_flood(reps: int, mb: int) -> dict:
    out: dict = {"off": [], "on": []}
    for rep in range(reps):
        for indexer in ((False, True) if rep % 2 == 0 else (True, False)):
            r = flood_once(indexer, mb * 1_000_000)
            out["on" if indexer else "off"].append(r)
            print(f"  [f] indexer {'on ' if indexer else 'off'} rep {rep + 1}: {r['mb_per_s']:.1f} MB/s, "
                  f"{r['mb_per_cpu_s']:.1f} MB/CPU-s, indexer CPU {r['indexer_cpu_s']:.2f} s, "
                  f"indexed {r['indexed_bytes_at_end'] / 1e6:.1f} MB, lost {r['lost_bytes']}", flush=True)
    AGENTD_ENV.pop("AGENTD_EVENT_INDEX", None)
    return out


# ---------------------------------------------------------------- report
def span(values: list[float], digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def section(data: dict) -> str:
    q, f, m = data["queries"], data["flood"], data["machine"]
    L = [BEGIN, "## 7. Event index (`python -m bench.events`)", "",
         f"Produced on {data['date']} by `python -m bench.events{' --short' if data['short'] else ''}` (this machine, "
         f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}; SQLite "
         f"{sqlite3.sqlite_version}).", "",
         f"**{q['turns']:,} indexed turns** ({q['transcript_mb']:.0f} MB of clean transcript in 50 sessions, plus "
         f"1,000 decisions): indexed from scratch in {q['build_s']:.0f} s "
         f"({q['transcript_mb'] / q['build_s']:.1f} MB/s); the index takes {q['db_mb']:.0f} MB. Query time, warm, "
         "15 runs, top 10 by bm25 × time decay (wall time, and the CPU time of the query):", "",
         "| query | matching events | median ms | max ms | median CPU ms |", "|---|---|---|---|---|"]
    for label, r in q["queries"].items():
        L.append(f"| {label}: `{' '.join(r['words'])}` | {r['matches']:,} | {r['median_ms']:.1f} | "
                 f"{r['max_ms']:.1f} | {r['cpu_ms']:.1f} |")
    worst = max(r["median_ms"] for r in q["queries"].values())
    L += ["", f"Target (issue 16): 100,000 indexed turns answer in under 100 ms — "
          f"{'MET' if worst < 100 else 'NOT MET'}: the slowest query's median is {worst:.1f} ms.", "",
          "A query reads the ids of its newest 2,000 matches from FTS5 (rowid order), counts how many events "
          "hold each word on at most 2,000 of its newest matches, and scores the candidates by bm25 × decay in "
          "one SQLite statement that returns only the top rows (`supervisor/eventindex/search.py`). FTS5's own "
          "`bm25()` walked every match of each word to count them: on 2026-12-01, before this, `pytest` took "
          "46 ms of CPU and `Editing module_4711` 59 ms (its first word is in 83 % of the turns). Wall time "
          "above CPU time is the wait for a core on this shared 2-core machine (see the load average).", ""]
    on, off = f["on"], f["off"]
    L += [f"**The flood with and without the indexer** (scenario 2: one child, {data['flood_mb']} MB as fast as it "
          f"can; {len(on)} runs each, alternating; the daemon from the working tree):", "",
          "| indexer | MB/s (wall) | MB per daemon CPU-s | indexer thread CPU-s | read by the indexer at the end, MB | bytes lost |",
          "|---|---|---|---|---|---|"]
    for name, runs in (("off", off), ("on", on)):
        L.append(f"| {name} | {span([r['mb_per_s'] for r in runs])} | {span([r['mb_per_cpu_s'] for r in runs])} | "
                 f"{span([r['indexer_cpu_s'] for r in runs], 2)} | {span([r['indexed_bytes_at_end'] / 1e6 for r in runs])} | "
                 f"{sum(r['lost_bytes'] for r in runs)} |")
    ratio = statistics.median([r["mb_per_s"] for r in on]) / statistics.median([r["mb_per_s"] for r in off])
    L += ["", f"Median wall throughput with the indexer / without: {ratio:.2f}×. The indexer is a thread of the "
          "daemon at nice 19 that sleeps three times as long as it worked while a backlog remains; its CPU counts "
          "in the daemon's MB per CPU-second, measured until it has read the whole flood (MB/s: to the last byte "
          "on disk).", ""]
    idle = data["idle"]
    L += [f"**50 idle agents** (scenario 3, {idle['off'][0]['seconds']:.0f} s): the daemon uses "
          f"{span([r['core_percent'] for r in idle['off']], 3)} % of a core without the indexer, "
          f"{span([r['core_percent'] for r in idle['on']], 3)} % with it, of which the indexer thread itself "
          f"{span([r['indexer_core_percent'] for r in idle['on']], 3)} % (a pass of one `stat` per transcript and "
          "memory file, every 5 s doubling to every 30 s while nothing changes). CPU time is counted in ticks of "
          "10 ms: 0.03 % of a core over 30 s is one tick.", ""]
    L += known_section(data.get("known") or [])
    L.append(END)
    return "\n".join(L)


def known_section(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    L = ["**The known-answer queries of the event tests** (`tests/test_eventindex.py`), asked again by "
         "`bench/known_answers.py` with each way a unit may index: `[agent] index = \"summary\"` (the default: what "
         "the agent did and said; a turn's head and tail, a Codex or Claude Code session from its own record, the "
         "wakeup's echo left out) and `\"full\"` (every byte of the screen, up to 256 KiB a turn and its last part):",
         "", "| case | query | the answer | summary (default) | full |", "|---|---|---|---|---|"]

    def cell(found: bool, want: bool) -> str:
        return ("found" if found else "not found") + (" ✓" if found == want else " ✗ (the test asserts the other)")

    for r in rows:
        L.append(f"| {r['case']} | `{' '.join(r['query'])}` | {r['expected']} | "
                 f"{cell(bool(r['summary']), bool(r['want_summary']))} | {cell(bool(r['full']), bool(r['want_full']))} |")
    met = all(r["summary"] == r["want_summary"] and r["full"] == r["want_full"] for r in rows)
    L += ["", f"{'Every' if met else 'NOT every'} answer is the one the tests assert (✓)."]
    L += ["", "What the default gives up: the middle of a long turn (a build log, a file dumped to the screen: "
          "`agentd logs --at` still shows it; a unit that needs it sets `index = \"full\"`, which keeps up to "
          "256 KiB of a turn). What it gains: a Codex or Claude Code session is found by its commands and their "
          "exit status (the screen of their TUI holds neither whole), and a decision is found once, not once "
          "more per session whose wakeup quoted it."]
    return L


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.events", description=__doc__.splitlines()[0])
    p.add_argument("--short", action="store_true", help="10,000 turns, a 20 MB flood twice each")
    p.add_argument("--turns", type=int)
    p.add_argument("--flood-mb", type=int)
    p.add_argument("--reps", type=int)
    p.add_argument("--no-report", action="store_true", help="print only (do not touch RESULTS.md)")
    p.add_argument("--only", help="comma-separated parts to run: q (queries), f (flood), i (idle), k (known answers); "
                                  "implies --no-report")
    args = p.parse_args(argv)
    WORK.mkdir(exist_ok=True)
    turns = args.turns or (10_000 if args.short else 100_000)
    mb = args.flood_mb or (20 if args.short else 100)
    reps = args.reps or (2 if args.short else 4)
    data = {"date": datetime.now().strftime("%Y-%m-%d %H:%M"), "short": args.short, "machine": machine(),
            "flood_mb": mb}
    parts = set(args.only.split(",")) if args.only else {"q", "f", "i", "k"}
    if "q" in parts:
        print(f"[q] {turns} turns", flush=True)
        data["queries"] = scenario_queries(turns)
    if "f" in parts:
        print(f"[f] flood {mb} MB x {reps} each", flush=True)
        data["flood"] = scenario_flood(reps, mb)
    if "i" in parts:
        idle_s = 10.0 if args.short else 30.0
        print(f"[i] 50 idle agents, {idle_s:g} s", flush=True)
        data["idle"] = scenario_idle(1 if args.short else 2, 50, idle_s)
    if "k" in parts:
        print("[k] known answers", flush=True)
        data["known"] = known_answers.run()
        print("\n".join(known_section(data["known"])), flush=True)
    if args.only:
        return 0
    if not args.no_report:
        (HERE / "events-results.json").write_text(json.dumps(data, indent=1))
        write_section("events", section(data), HERE / "RESULTS.md")
    print(section(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
