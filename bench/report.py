"""The report of ``python -m bench``: medians, min–max, ratios, RESULTS.md and the targets."""

from __future__ import annotations

import os
import platform
import statistics
from pathlib import Path

# ---------------------------------------------------------------- report
def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def machine() -> dict:
    model = ""
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from supervisor import __version__

    def pkg(name: str) -> str:
        from importlib.metadata import version
        return version(name)

    return {
        "cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
        "agentd": __version__, "pexpect": pkg("pexpect"), "psutil": pkg("psutil"), "pyte": pkg("pyte"),
        "loadavg_at_start": os.getloadavg(),
        "mem_total_mb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20),
    }


def fmt(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}f}"


def span(values: list[float], digits: int = 2) -> str:
    s = stats(values)
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


def ratio(a: list[float], b: list[float]) -> str:
    mb = statistics.median(b)
    return f"{statistics.median(a) / mb:.2f}×" if mb else "–"


def _med_max(values: list[float]) -> str:
    """``median | max`` cells, or ``– | –`` when no cycle was measured (the report says so, it does not crash)."""
    return f"{fmt(statistics.median(values))} | {fmt(max(values))}" if values else "– (none measured) | –"


def write_report(data: dict, path: Path) -> None:
    m = data["machine"]
    L = [
        "# agentd vs supervisord: benchmark results", "",
        f"Produced by `python -m bench --{data['mode']}{' --committed' if data['source'] != 'the working tree' else ''}` "
        f"on {data['date']} (the committed script, this machine; agentd from {data['source']}). "
        "Every figure is the median of the repetitions, with (min–max); ratio = agentd / supervisord medians. "
        "CPU is user+system of the supervisor's process, all its threads and the helper processes it ran and reaped "
        "(git and the like: `utime + stime + cutime + cstime` of /proc/PID/stat), from the start of the output until "
        "agentd's event indexer has read every transcript to its end and the supervisor's CPU is back at idle (the "
        "same rule for every contender: `bench/contenders.py`, `settle`); peak RSS is its VmHWM.", "",
        "## Machine", "",
        f"- CPU: {m['cpu']}, {m['cores']} cores (shared with other work during the run: load average at start "
        f"{', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}"
        + (f"; at the end {', '.join(f'{x:.2f}' for x in data['loadavg_at_end'])}" if data.get("loadavg_at_end") else "")
        + f"), {m['mem_total_mb']} MB RAM, Linux {m['kernel']}",
        f"- Python {m['python']}; agentd {m['agentd']} (pexpect {m['pexpect']}, psutil {m['psutil']}, pyte {m['pyte']}); "
        f"{data['supervisord_version_line']}",
        "- children: `bench/child.py` (100-byte lines in bursts every 20 ms), identical under every contender; "
        "supervisord reads them through pipes into one log file per program, agentd through PTYs into transcripts (raw "
        "`.log` with redaction + clean `.txt` + context estimate), one `generic` unit per child, wakeup typing and "
        "checkpoints off; the floor (`bench/floor.py`, scenarios 1 and 2) through PTYs straight into one log per child.",
        "",
    ]
    s1 = data["scenarios"]["1_streams"]
    dur = data["params"]["stream_seconds"]
    L += [f"## 1. N children × 20 KB/s for {dur:g} s", "",
          "Three contenders, run in rotation in the same run: agentd, the bare PTY reader (the floor: "
          "`bench/floor.py`, one selector, `os.read`, one `os.write` per read, no redaction, no clean text) and "
          "supervisord. Ratios are agentd's median over the other's median.", "",
          "| children | agentd CPU-s | floor CPU-s | supervisord CPU-s | agentd / floor | agentd / supervisord | "
          "agentd peak RSS MB | floor peak RSS MB | supervisord peak RSS MB | bytes lost agentd / floor / supervisord |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for key, runs in s1.items():
        a, f, s = (runs.get(k, []) for k in ("agentd", "floor", "supervisord"))
        cpu = {k: [r["cpu_s"] for r in v] for k, v in (("a", a), ("f", f), ("s", s))}
        L.append(f"| {key.split()[0]} | {span(cpu['a'])} | {span(cpu['f'])} | {span(cpu['s'])} | "
                 f"{ratio(cpu['a'], cpu['f'])} | {ratio(cpu['a'], cpu['s'])} | {span([r['peak_rss_mb'] for r in a], 1)} | "
                 f"{span([r['peak_rss_mb'] for r in f], 1)} | {span([r['peak_rss_mb'] for r in s], 1)} | "
                 f"{sum(r['lost_bytes'] for r in a)} / {sum(r['lost_bytes'] for r in f)} / {sum(r['lost_bytes'] for r in s)} |")
    written = [r["written_bytes"] for runs in s1.values() for r in runs["agentd"]]
    L += ["", f"Bytes lost are summed over all repetitions (written per run: up to {max(written) / 1e6:.1f} MB); "
          "for a PTY (agentd, the floor) the expected log size counts `\\n` as `\\r\\n`.", ""]
    s2 = data["scenarios"]["2_flood"]
    L += [f"## 2. One child flooding ({data['params']['flood_mb']} MB as fast as it can)", "",
          "| | MB/s (wall, to the last byte on disk) | MB per supervisor CPU-second | bytes lost |", "|---|---|---|---|"]
    for kind in ("agentd", "floor", "supervisord"):
        rs = s2.get(kind, [])
        L.append(f"| {kind} | {span([r['mb_per_s'] for r in rs], 1)} | {span([r['mb_per_cpu_s'] for r in rs], 1)} | "
                 f"{sum(r['lost_bytes'] for r in rs)} |")
    fl = flood_ratios(s2)
    L += ["", f"agentd against the floor (medians of the same run): {fl['mbps_vs_floor']:.2f}× its MB/s and "
          f"{fl['cpu_per_mb_vs_floor']:.2f}× its CPU per MB; against supervisord: {fl['mbps_vs_supervisord']:.2f}× its "
          f"MB/s and {fl['cpu_per_mb_vs_supervisord']:.2f}× its CPU per MB.", "",
          "agentd's and the floor's path is a PTY (the kernel hands over at most ~4 KiB per read); supervisord's is a "
          "pipe. Wall-clock MB/s depends on what else the two cores do; MB per CPU-second is the supervisor's own cost.", ""]
    s3 = data["scenarios"]["3_idle"]
    L += [f"## 3. {data['params']['idle_children']} idle agents for {data['params']['idle_seconds']:g} s", "",
          "| | % of one core | CPU-s | RSS MB | peak RSS MB |", "|---|---|---|---|---|"]
    for kind in ("agentd", "supervisord"):
        rs = s3[kind]
        L.append(f"| {kind} | {span([r['core_percent'] for r in rs], 3)} | {span([r['cpu_s'] for r in rs])} | "
                 f"{span([r['rss_mb'] for r in rs], 1)} | {span([r['peak_rss_mb'] for r in rs], 1)} |")
    s4 = data["scenarios"]["4_status"]
    L += ["", f"## 4. `agentd status` vs `supervisorctl status`, {data['params']['idle_children']} units/programs", "",
          "| | median wall ms (min–max) | median CPU ms of the command |", "|---|---|---|"]
    for kind in ("agentd", "supervisord"):
        walls = [w * 1000 for r in s4[kind] for w in r["wall_s"]]
        cpus = [c * 1000 for r in s4[kind] for c in r["cpu_s"]]
        L.append(f"| {kind} | {span(walls, 0)} | {span(cpus, 0)} |")
    aw = [w for r in s4["agentd"] for w in r["wall_s"]]
    sw = [w for r in s4["supervisord"] for w in r["wall_s"]]
    L += ["", f"Ratio (wall, medians): {ratio(aw, sw)}. The wall time includes the daemon's side (agentd answers "
          "from a CPU/RSS sample of the 50 process trees under 3 status intervals old, and takes the next one in "
          "the background). `agentd status` is answered by "
          "`supervisor/cli/fast.py` (standard library only: no click, tabulate, asyncio or pydantic); with "
          "`--committed` agentd runs as `python -m supervisor` with the archive on PYTHONPATH.", ""]
    s5 = data["scenarios"]["5_restart"]
    a5, s5s = s5["agentd"], s5["supervisord"]
    L += ["## 5. Restart latency", "",
          "| | median s | max s | n |", "|---|---|---|---|",
          f"| agentd: checkpoint verified → new session has received its wakeup | {_med_max(a5['latency_s'])} | {len(a5['latency_s'])} |",
          f"| supervisord: `supervisorctl restart` → new process shows its prompt (no checkpoint, no wakeup) | {_med_max(s5s['latency_s'])} | {len(s5s['latency_s'])} |",
          ""]
    if a5.get("steps"):
        keys = sorted({k for st in a5["steps"] for k in st})
        L.append("agentd cycle steps (medians over the cycles, seconds): " + ", ".join(
            f"{k} {statistics.median([st[k] for st in a5['steps'] if k in st]):.2f}" for k in keys) + ".")
        L.append("")
    L += ["agentd's figure is the cycle's own step `verified_to_wakeup` (continuity/cycle.py, monotonic clock): from "
          "the flush verified to the new session's wakeup delivered. It covers keeping the old session's trail (`keep`), "
          "quitting the old fake agent (Ctrl-D) and ending its tree (`stop_session`), building the wakeup, spawning the "
          "new one, waiting until its prompt has been on screen for the debounce (adaptive: 0.05 s for an agent whose "
          "output shows no pause, at most 0.15 s), typing the wakeup and waiting for the agent's answer turn to end. "
          "The flush itself (`wait_flush`: the fake agent runs `agentd note`, `agentd decide` and `agentd task-state`, "
          "three CLI processes) comes before it. Flushes: "
          f"{', '.join(sorted(set(a5['flush']))) or 'none'}. supervisord has no checkpoint or wakeup; its row is the nearest "
          "equivalent (stop + start + first prompt).", ""]
    s6 = data["scenarios"]["6_wakeup"]
    L += ["## 6. Wakeup build time (1,000 snapshots)", "",
          "| decisions | agentd `build_wakeup` ms | plain shell wakeup ms | ratio |", "|---|---|---|---|"]
    for name, r in s6.items():
        L.append(f"| {name} | {r['wakeup_ms']:.1f} | {r['shell_ms']:.1f} | {r['ratio']:.2f}× |")
    L += ["", "supervisord has no wakeup; the comparison is the plain shell script of `bench/wakeup.py` "
          "(`cat` task and constraints, `tail -5` the log, `find | head -30`).", ""]
    L += ["## Targets", ""] + [f"- {t}" for t in data["targets"]] + [""]
    if data.get("notes"):
        L += ["## Notes", ""] + [f"- {n}" for n in data["notes"]] + [""]
    old = path.read_text() if path.exists() else ""
    for kind in ("events", "scale", "storm"):  # the sections of bench/events.py, scale.py and storm.py stay
        begin, end = markers(kind)
        if begin in old and end in old:
            L += [old[old.index(begin):old.index(end) + len(end)], ""]
    path.write_text("\n".join(L))


def markers(kind: str) -> tuple[str, str]:
    """The comments around a section of RESULTS.md that another bench module writes (``events``, ``scale``)."""
    return f"<!-- {kind}: begin -->", f"<!-- {kind}: end -->"


def write_section(kind: str, text: str, path: Path) -> None:
    """Put ``text`` (a whole section, its markers included) in place of the old one, or at the end."""
    begin, end = markers(kind)
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        new = old[:old.index(begin)] + text + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


def flood_ratios(s2: dict) -> dict:
    """agentd's flood MB/s and CPU per MB over the floor's and supervisord's (medians)."""
    med = {k: (statistics.median([r["mb_per_s"] for r in v]), statistics.median([r["mb_per_cpu_s"] for r in v]))
           for k, v in s2.items() if v}
    out = {}
    for other in ("floor", "supervisord"):
        if other in med and "agentd" in med:
            out[f"mbps_vs_{other}"] = med["agentd"][0] / med[other][0]
            out[f"cpu_per_mb_vs_{other}"] = med[other][1] / med["agentd"][1]  # CPU per MB is 1 / (MB per CPU-s)
        else:
            out[f"mbps_vs_{other}"] = out[f"cpu_per_mb_vs_{other}"] = float("nan")
    return out


def targets(data: dict) -> list[str]:
    """Issue 29's targets, each against the floor and supervisord of the same run."""
    out = []
    s1 = data["scenarios"]["1_streams"]
    key = max(s1, key=lambda k: int(k.split()[0]))
    med = {k: statistics.median([r["cpu_s"] for r in s1[key][k]]) for k in ("agentd", "floor", "supervisord")}
    lost = sum(r["lost_bytes"] for r in s1[key]["agentd"])
    vf, vs = med["agentd"] / med["floor"], med["agentd"] / med["supervisord"]
    out.append(f"{'MET' if vf <= 1.3 and vs <= 0.3 and lost == 0 else 'NOT MET'}: CPU at {key} ≤ 1.3 × the floor and "
               f"≤ 0.3 × supervisord, zero loss — {vf:.2f}× the floor, {vs:.2f}× supervisord "
               f"({med['agentd']:.2f} / {med['floor']:.2f} / {med['supervisord']:.2f} CPU-s), {lost} bytes lost")
    s2 = data["scenarios"]["2_flood"]
    fl = flood_ratios(s2)
    lost = sum(r["lost_bytes"] for r in s2["agentd"])
    ok = fl["mbps_vs_floor"] >= 0.9 and fl["cpu_per_mb_vs_floor"] <= 1.5 and lost == 0
    out.append(f"{'MET' if ok else 'NOT MET'}: one-child flood ≥ 0.9 × the floor's MB/s and ≤ 1.5 × its CPU per MB, "
               f"zero loss — {fl['mbps_vs_floor']:.2f}× MB/s, {fl['cpu_per_mb_vs_floor']:.2f}× CPU per MB "
               f"({fl['mbps_vs_supervisord']:.2f}× and {fl['cpu_per_mb_vs_supervisord']:.2f}× supervisord's), {lost} bytes lost")
    i = data["scenarios"]["3_idle"]["agentd"]
    pct = statistics.median([r["core_percent"] for r in i])
    rss = max(r["rss_mb"] for r in i)
    out.append(f"{'MET' if pct <= 0.3 else 'NOT MET'}: 50 idle agents ≤ 0.3 % of a core — {pct:.3f} %")
    out.append(f"{'MET' if rss <= 80 else 'NOT MET'}: 50 idle agents ≤ 80 MB RSS — {rss:.1f} MB (largest)")
    st = data["scenarios"]["4_status"]
    aw = statistics.median([w for r in st["agentd"] for w in r["wall_s"]])
    sw = statistics.median([w for r in st["supervisord"] for w in r["wall_s"]])
    out.append(f"{'MET' if aw <= 0.35 * sw else 'NOT MET'}: `agentd status` ≤ 0.35 × `supervisorctl status` — "
               f"{aw / sw:.2f}× ({aw * 1000:.0f} vs {sw * 1000:.0f} ms)")
    lat = data["scenarios"].get("5_restart", {}).get("agentd", {}).get("latency_s") or []
    if lat:
        med = statistics.median(lat)
        out.append(f"{'MET' if med <= 0.4 else 'NOT MET'}: checkpoint verified → new session has its wakeup ≤ 0.4 s "
                   f"median — {med:.2f} s over {len(lat)} cycles")
    else:
        out.append("NOT MET: checkpoint verified → new session has its wakeup ≤ 0.4 s median — none measured")
    wake = data["scenarios"].get("6_wakeup", {}).get("100,000")
    if wake:
        out.append(f"{'MET' if wake['ratio'] <= 2 else 'NOT MET'}: wakeup build at 100,000 decisions and 1,000 "
                   f"snapshots ≤ 2 × the plain shell script — {wake['ratio']:.2f}× ({wake['wakeup_ms']:.0f} vs "
                   f"{wake['shell_ms']:.0f} ms)")
    out.append("200 agents × 2 KB/s: see section 8 (`python -m bench.scale`, run apart: about 7 minutes)")
    return out
