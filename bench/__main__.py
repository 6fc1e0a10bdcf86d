"""agentd against supervisord: ``python -m bench [--short|--full]``.

Installs supervisord from PyPI into its own virtual environment
(``bench/.work/venv``; never the project's: the PyPI package is called
``supervisor`` like ours), then runs every scenario of issue 8 for both
supervisors on the same child program (:mod:`bench.child`), alternating which
goes first, several repetitions, and writes ``bench/results.json`` (raw) and
``bench/RESULTS.md`` (medians, min/max, ratios).

Only the supervisor's own process is measured: user+system CPU from
``/proc/PID/stat`` (not its children), peak RSS from ``VmHWM``.  agentd runs
as the real daemon (``agentd start --foreground``) in a temporary project,
one ``generic`` unit per child, wakeup typing and checkpoints off, transcripts
(redaction, clean text, context estimate) on.  supervisord captures each
child's stdout through a pipe into its own log file.

``--short`` (< 3 minutes): fewer and shorter runs, for a quick look.
``--full`` (default): the durations of the issue (20 s streams, 60 s idle),
2 repetitions of the streams, 3 of the flood.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work"
VENV = WORK / "venv"
PY = sys.executable  # the project's interpreter: runs agentd and every child
AGENTD_CMD = [str(Path(PY).with_name("agentd"))]  # [PY, "-m", "supervisor"] with --committed
# With --committed, PYTHONPATH for agentd and the fake agent only: supervisord's own
# interpreter must never see it (its package is also called ``supervisor``).
AGENTD_ENV: dict[str, str] = {}
CHILD = str(HERE / "child.py")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SUPERVISOR_VERSION = "4.3.0"


# ---------------------------------------------------------------- install
def ensure_supervisord() -> str:
    """supervisord in bench/.work/venv (created on first use); returns its version."""
    exe = VENV / "bin" / "supervisord"
    if not exe.exists():
        print(f"installing supervisor=={SUPERVISOR_VERSION} into {VENV} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", f"supervisor=={SUPERVISOR_VERSION}"], check=True)
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


# ---------------------------------------------------------------- /proc
def cpu_seconds(pid: int) -> float:
    """user + system CPU of ``pid`` itself (children excluded)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_split(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for ln in fh:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    return 0


def wait_until(predicate, timeout: float, poll: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()


# ---------------------------------------------------------------- supervisors
class Run:
    """A temporary directory with the children's ready/count files and a go file."""

    def __init__(self, tag: str) -> None:
        WORK.mkdir(exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=WORK))
        (self.dir / "ready").mkdir()
        (self.dir / "count").mkdir()
        self.go = self.dir / "go"

    def child_argv(self, name: str, *extra: str) -> list[str]:
        return [PY, CHILD, "--ready", str(self.dir / "ready" / name), "--go", str(self.go),
                "--count", str(self.dir / "count" / name), *extra]

    def ready(self) -> int:
        return len(list((self.dir / "ready").iterdir()))

    def counts(self) -> dict[str, dict]:
        result = {}
        for path in (self.dir / "count").iterdir():
            if path.suffix != ".tmp":
                result[path.name] = json.loads(path.read_text())
        return result

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class Agentd:
    name = "agentd"

    def __init__(self, run: Run, programs: dict[str, list[str]], *, unit_extra: str = "", prompt: str | None = None,
                 supervise_only: bool = True) -> None:
        self.run = run
        self.project = run.dir / "agentd"
        units = self.project / "units"
        units.mkdir(parents=True)
        for name, argv in programs.items():
            lines = [
                "[unit]", "enabled = true", "", "[agent]", 'kind = "generic"',
                f"command = {json.dumps(argv)}", 'workdir = "."', "rows = 40", "cols = 120",
            ]
            if prompt:
                lines.append(f"prompt = {json.dumps(prompt)}")
            lines += ["", "[scope]", f'module = "{name.replace("-", "_")}"', "", "[restart]", 'policy = "no"',
                      "stop_timeout = 5.0", "", "[context]", "window = 100000000"]
            if supervise_only:
                lines += ["", "[wakeup]", "on_start = false", "", "[checkpoint]", "enabled = false"]
            (units / f"{name}.toml").write_text("\n".join(lines) + "\n" + unit_extra)
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")} | AGENTD_ENV
        self.out = open(self.run.dir / "agentd.out", "wb")
        self.proc = subprocess.Popen([*AGENTD_CMD, "--root", str(self.project), "start", "--foreground"],
                                     cwd=self.project, env=env, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        sock = self.project / ".agentd" / "agentd.sock"
        if not wait_until(sock.exists, 60):
            raise RuntimeError(f"agentd did not start: {(self.run.dir / 'agentd.out').read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def captured(self, name: str) -> int:
        return sum(p.stat().st_size for p in (self.project / ".agentd" / "transcripts" / name).glob("*.log"))

    @staticmethod
    def expected(count: dict) -> int:
        return count["bytes"] + count["lines"]  # the PTY turns every \n into \r\n

    def status_cmd(self) -> list[str]:
        return [*AGENTD_CMD, "status"]

    def stop(self) -> None:
        _end(self.proc, self.out)


def _end(proc: subprocess.Popen[bytes] | None, out: Any) -> None:
    """SIGTERM a supervisor, SIGKILL it after 60 s, close its output file."""
    if proc is None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    out.close()


class Supervisord:
    name = "supervisord"

    def __init__(self, run: Run, programs: dict[str, list[str]]) -> None:
        self.run = run
        self.base = run.dir / "supervisord"
        (self.base / "logs").mkdir(parents=True)
        self.conf = self.base / "supervisord.conf"
        sock = self.base / "supervisor.sock"
        parts = [
            "[unix_http_server]", f"file={sock}", "",
            "[supervisord]", "nodaemon=true", f"logfile={self.base / 'supervisord.log'}", f"pidfile={self.base / 'supervisord.pid'}",
            f"childlogdir={self.base / 'logs'}", "logfile_maxbytes=0", "",
            "[rpcinterface:supervisor]", "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface", "",
            "[supervisorctl]", f"serverurl=unix://{sock}", "",
        ]
        for name, argv in programs.items():
            parts += [
                f"[program:{name}]", "command=" + " ".join(argv), f"directory={self.base}", "autostart=true",
                "autorestart=false", "startsecs=0", "stopasgroup=true", "killasgroup=true", "stopwaitsecs=5",
                "redirect_stderr=true", f"stdout_logfile={self.base / 'logs' / (name + '.log')}",
                "stdout_logfile_maxbytes=0", "stdout_logfile_backups=0", "",
            ]
        self.conf.write_text("\n".join(parts))
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.out = open(self.run.dir / "supervisord.out", "wb")
        self.proc = subprocess.Popen([str(VENV / "bin" / "supervisord"), "-c", str(self.conf)],
                                     cwd=self.base, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_until((self.base / "supervisor.sock").exists, 60):
            raise RuntimeError("supervisord did not start")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def captured(self, name: str) -> int:
        path = self.base / "logs" / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    @staticmethod
    def expected(count: dict) -> int:
        return count["bytes"]

    def status_cmd(self) -> list[str]:
        return [str(VENV / "bin" / "supervisorctl"), "-c", str(self.conf), "status"]

    def stop(self) -> None:
        _end(self.proc, self.out)


SUPERVISORS = {"agentd": Agentd, "supervisord": Supervisord}


def kill_leftovers(run: Run) -> None:
    """End any child of this run that outlived its supervisor (by the pid in its ready file)."""
    for path in (run.dir / "ready").iterdir():
        try:
            pid = int(path.read_text() or 0)
        except ValueError:
            continue
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def order(rep: int) -> list[str]:
    """Alternate which supervisor goes first."""
    return ["agentd", "supervisord"] if rep % 2 == 0 else ["supervisord", "agentd"]


# ---------------------------------------------------------------- scenario 1 and 2
def stream_once(kind: str, n: int, child_args: list[str], settle: float = 1.0, drain_timeout: float = 30.0,
                flood: bool = False) -> dict:
    run = Run(f"s-{kind}-{n}")
    names = [f"c{i:02d}" for i in range(n)]
    sup = SUPERVISORS[kind](run, {name: run.child_argv(name, *child_args) for name in names})
    try:
        sup.start()
        if not wait_until(lambda: run.ready() >= n, 120):
            raise RuntimeError(f"{kind}: only {run.ready()} of {n} children started")
        time.sleep(settle)
        cpu0 = cpu_seconds(sup.pid)
        u0, s0 = cpu_split(sup.pid)
        t0 = time.monotonic()
        run.go.touch()
        wait_until(lambda: len(run.counts()) >= n, 600, 0.02 if flood else 0.1)
        counts = run.counts()
        expected = {name: sup.expected(counts[name]) for name in names}

        def complete() -> bool:
            return all(sup.captured(name) >= expected[name] for name in names)

        complete_in_time = wait_until(complete, drain_timeout, 0.002 if flood else 0.05)
        t1 = time.monotonic()
        cpu1 = cpu_seconds(sup.pid)
        u1, s1 = cpu_split(sup.pid)
        hwm = status_kb(sup.pid, "VmHWM")
        rss = status_kb(sup.pid, "VmRSS")
        captured = {name: sup.captured(name) for name in names}
    finally:
        sup.stop()
        kill_leftovers(run)
    written = sum(c["bytes"] for c in counts.values())
    lost = sum(max(0, expected[name] - captured[name]) for name in names)
    result = {
        "children": n, "cpu_s": cpu1 - cpu0, "user_s": u1 - u0, "sys_s": s1 - s0, "peak_rss_mb": hwm / 1024, "rss_mb": rss / 1024,
        "written_bytes": written, "expected_bytes": sum(expected.values()), "captured_bytes": sum(captured.values()),
        "lost_bytes": lost, "complete": complete_in_time, "seconds": t1 - t0,
        "child_seconds": max(c["end"] for c in counts.values()) - min(c["start"] for c in counts.values()),
    }
    if flood:
        result["mb_per_s"] = written / (t1 - t0) / 1e6
        result["mb_per_cpu_s"] = written / max(cpu1 - cpu0, 1e-9) / 1e6
    run.cleanup()
    return result


def scenario_streams(reps: int, duration: float, counts: list[int]) -> dict:
    out: dict = {}
    for n in counts:
        key = f"{n} children"
        out[key] = {"agentd": [], "supervisord": []}
        for rep in range(reps):
            for kind in order(rep):
                r = stream_once(kind, n, ["--rate", "20000", "--duration", str(duration)])
                out[key][kind].append(r)
                print(f"  [1] {n:2d} children {kind:11s} rep {rep + 1}: cpu {r['cpu_s']:.2f}s "
                      f"peak {r['peak_rss_mb']:.1f} MB lost {r['lost_bytes']}", flush=True)
    return out


def scenario_flood(reps: int, size: int) -> dict:
    out: dict = {"agentd": [], "supervisord": []}
    for rep in range(reps):
        for kind in order(rep):
            r = stream_once(kind, 1, ["--flood", str(size)], flood=True)
            out[kind].append(r)
            print(f"  [2] flood {kind:11s} rep {rep + 1}: {r['mb_per_s']:.1f} MB/s wall, "
                  f"{r['mb_per_cpu_s']:.1f} MB per CPU-s, lost {r['lost_bytes']}", flush=True)
    return out


# ---------------------------------------------------------------- scenario 3 and 4
def timed_command(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the command and its children) and exit code."""
    env = os.environ | AGENTD_ENV if argv[:len(AGENTD_CMD)] == AGENTD_CMD else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def idle_once(kind: str, n: int, window: float, status_runs: int) -> tuple[dict, dict]:
    run = Run(f"i-{kind}")
    names = [f"a{i:02d}" for i in range(n)]
    sup = SUPERVISORS[kind](run, {name: run.child_argv(name, "--idle") for name in names})
    try:
        sup.start()
        if not wait_until(lambda: run.ready() >= n, 120):
            raise RuntimeError(f"{kind}: only {run.ready()} of {n} children started")
        run.go.touch()
        wait_until(lambda: len(run.counts()) >= n, 60)
        time.sleep(3.0)  # let start-up work settle
        cpu0 = cpu_seconds(sup.pid)
        t0 = time.monotonic()
        time.sleep(window)
        cpu1 = cpu_seconds(sup.pid)
        t1 = time.monotonic()
        idle = {"children": n, "cpu_s": cpu1 - cpu0, "seconds": t1 - t0,
                "core_percent": (cpu1 - cpu0) / (t1 - t0) * 100,
                "rss_mb": status_kb(sup.pid, "VmRSS") / 1024, "peak_rss_mb": status_kb(sup.pid, "VmHWM") / 1024}
        cwd = sup.project if kind == "agentd" else sup.base
        timed_command(sup.status_cmd(), cwd)  # warm the page cache
        walls, cpus, codes = [], [], []
        for _ in range(status_runs):
            wall, cpu, code = timed_command(sup.status_cmd(), cwd)
            walls.append(wall)
            cpus.append(cpu)
            codes.append(code)
        status = {"wall_s": walls, "cpu_s": cpus, "exit_codes": codes}
    finally:
        sup.stop()
        kill_leftovers(run)
    run.cleanup()
    return idle, status


def scenario_idle(reps: int, n: int, window: float, status_runs: int) -> tuple[dict, dict]:
    idle: dict = {"agentd": [], "supervisord": []}
    status: dict = {"agentd": [], "supervisord": []}
    for rep in range(reps):
        for kind in order(rep):
            i, s = idle_once(kind, n, window, status_runs)
            idle[kind].append(i)
            status[kind].append(s)
            print(f"  [3] idle {kind:11s} rep {rep + 1}: {i['core_percent']:.2f}% of a core, rss {i['rss_mb']:.1f} MB; "
                  f"[4] status median {statistics.median(s['wall_s']) * 1000:.0f} ms", flush=True)
    return idle, status


# ---------------------------------------------------------------- scenario 5
def _events(log: Path) -> list[dict]:
    out = []
    for ln in log.read_text().splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            continue
    return out


def _ts(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def restart_agentd(cycles: int) -> dict:
    run = Run("r-agentd")
    fake = [PY, "-m", "supervisor.fakeagent"]
    sup = Agentd(run, {"fake": fake}, prompt="fake> $", supervise_only=False,
                 unit_extra="\n[checkpoint]\ndeadline = 30\ngrace = 2\nready_timeout = 30\n")
    # enabled checkpoints and wakeups: the unit file must not say otherwise
    try:
        sup.start()
        log = sup.project / ".agentd" / "agentd.log"
        wait_until(lambda: log.exists() and any(e.get("event") == "wakeup_delivered" for e in _events(log)), 60)
        walls = []
        for _ in range(cycles):
            wall, _cpu, code = timed_command([*AGENTD_CMD, "checkpoint", "fake"], sup.project)
            if code != 0:
                raise RuntimeError("agentd checkpoint failed")
            walls.append(wall)
        events = _events(log)
        hist = subprocess.run([*AGENTD_CMD, "history", "fake", "--json"], cwd=sup.project, capture_output=True, text=True,
                              env=os.environ | AGENTD_ENV)
        steps = [json.loads(ln).get("steps", {}) for ln in hist.stdout.splitlines() if ln.strip()]
    finally:
        sup.stop()
    latencies = []
    for i, e in enumerate(events):
        if e.get("event") == "checkpoint_flush":
            nxt = next((f for f in events[i + 1:] if f.get("event") == "wakeup_delivered" and f.get("session") != e.get("session")), None)
            if nxt is not None:
                latencies.append(_ts(nxt) - _ts(e))
    run.cleanup()
    flushes = [e.get("flush") for e in events if e.get("event") == "checkpoint_flush"]
    return {"latency_s": latencies, "command_wall_s": walls, "flush": flushes, "steps": steps}


def restart_supervisord(cycles: int) -> dict:
    """The nearest supervisord equivalent: ``supervisorctl restart`` until the new agent shows its prompt."""
    run = Run("r-supervisord")
    sup = Supervisord(run, {"fake": [PY, "-m", "supervisor.fakeagent"]})
    if AGENTD_ENV:
        sup.conf.write_text(sup.conf.read_text().replace(
            "[program:fake]\n", f"[program:fake]\nenvironment=PYTHONPATH=\"{AGENTD_ENV['PYTHONPATH']}\"\n"))
    log = sup.base / "logs" / "fake.log"
    latencies = []
    try:
        sup.start()
        wait_until(lambda: log.exists() and log.read_bytes().count(b"fake> ") >= 1, 30)
        for _ in range(cycles):
            before = log.read_bytes().count(b"fake> ")
            t = time.perf_counter()
            subprocess.run(sup.status_cmd()[:-1] + ["restart", "fake"], capture_output=True, check=True)
            wait_until(lambda: log.read_bytes().count(b"fake> ") > before, 30, 0.002)
            latencies.append(time.perf_counter() - t)
    finally:
        sup.stop()
    run.cleanup()
    return {"latency_s": latencies}


def scenario_restart(cycles: int) -> dict:
    a = restart_agentd(cycles)
    print(f"  [5] agentd checkpoint->wakeup median {statistics.median(a['latency_s']):.2f}s", flush=True)
    s = restart_supervisord(cycles)
    print(f"  [5] supervisord restart->prompt median {statistics.median(s['latency_s']):.2f}s", flush=True)
    return {"agentd": a, "supervisord": s}


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


def write_report(data: dict, path: Path) -> None:
    m = data["machine"]
    L = [
        "# agentd vs supervisord: benchmark results", "",
        f"Produced by `python -m bench --{data['mode']}{' --committed' if data['source'] != 'the working tree' else ''}` "
        f"on {data['date']} (the committed script, this machine; agentd from {data['source']}). "
        "Every figure is the median of the repetitions, with (min–max); ratio = agentd / supervisord medians. "
        "CPU is user+system of the supervisor's own process only (from /proc), peak RSS is its VmHWM.", "",
        "## Machine", "",
        f"- CPU: {m['cpu']}, {m['cores']} cores (shared with other work during the run: load average at start "
        f"{', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}), {m['mem_total_mb']} MB RAM, Linux {m['kernel']}",
        f"- Python {m['python']}; agentd {m['agentd']} (pexpect {m['pexpect']}, psutil {m['psutil']}, pyte {m['pyte']}); "
        f"{data['supervisord_version_line']}",
        "- children: `bench/child.py` (100-byte lines in bursts every 20 ms), identical under both; supervisord reads "
        "them through pipes into one log file per program, agentd through PTYs into transcripts (raw `.log` with "
        "redaction + clean `.txt` + context estimate), one `generic` unit per child, wakeup typing and checkpoints off.",
        "",
    ]
    s1 = data["scenarios"]["1_streams"]
    dur = data["params"]["stream_seconds"]
    L += [f"## 1. N children × 20 KB/s for {dur:g} s", "",
          "| children | agentd CPU-s | supervisord CPU-s | CPU ratio | agentd peak RSS MB | supervisord peak RSS MB | bytes lost agentd / supervisord |",
          "|---|---|---|---|---|---|---|"]
    for key, runs in s1.items():
        a, s = runs["agentd"], runs["supervisord"]
        L.append(f"| {key.split()[0]} | {span([r['cpu_s'] for r in a])} | {span([r['cpu_s'] for r in s])} | "
                 f"{ratio([r['cpu_s'] for r in a], [r['cpu_s'] for r in s])} | {span([r['peak_rss_mb'] for r in a], 1)} | "
                 f"{span([r['peak_rss_mb'] for r in s], 1)} | {sum(r['lost_bytes'] for r in a)} / {sum(r['lost_bytes'] for r in s)} |")
    written = [r["written_bytes"] for runs in s1.values() for r in runs["agentd"]]
    L += ["", f"Bytes lost are summed over all repetitions (written per run: up to {max(written) / 1e6:.1f} MB); "
          "for the PTY the expected transcript size counts `\\n` as `\\r\\n`.", ""]
    s2 = data["scenarios"]["2_flood"]
    L += [f"## 2. One child flooding ({data['params']['flood_mb']} MB as fast as it can)", "",
          "| | MB/s (wall, to the last byte on disk) | MB per supervisor CPU-second | bytes lost |", "|---|---|---|---|"]
    for kind in ("agentd", "supervisord"):
        rs = s2[kind]
        L.append(f"| {kind} | {span([r['mb_per_s'] for r in rs], 1)} | {span([r['mb_per_cpu_s'] for r in rs], 1)} | "
                 f"{sum(r['lost_bytes'] for r in rs)} |")
    L += ["", "agentd's path is a PTY (the kernel hands over at most ~4 KiB per read); supervisord's is a pipe. "
          "Wall-clock MB/s depends on what else the two cores do; MB per CPU-second is the supervisor's own cost.", ""]
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
    L += ["", f"Ratio (wall, medians): {ratio(aw, sw)}. The wall time includes the daemon's side (agentd samples "
          "CPU and RSS of all 50 process trees for every `status`).", ""]
    s5 = data["scenarios"]["5_restart"]
    a5, s5s = s5["agentd"], s5["supervisord"]
    L += ["## 5. Restart latency", "",
          "| | median s | max s | n |", "|---|---|---|---|",
          f"| agentd: checkpoint verified → new session has received its wakeup | {fmt(statistics.median(a5['latency_s']))} | {fmt(max(a5['latency_s']))} | {len(a5['latency_s'])} |",
          f"| supervisord: `supervisorctl restart` → new process shows its prompt (no checkpoint, no wakeup) | {fmt(statistics.median(s5s['latency_s']))} | {fmt(max(s5s['latency_s']))} | {len(s5s['latency_s'])} |",
          ""]
    if a5.get("steps"):
        keys = sorted({k for st in a5["steps"] for k in st})
        L.append("agentd cycle steps (medians over the cycles, seconds): " + ", ".join(
            f"{k} {statistics.median([st[k] for st in a5['steps'] if k in st]):.2f}" for k in keys) + ".")
        L.append("")
    L += ["agentd's figure covers: quitting the old fake agent (its quit command; Ctrl-D only if it is still there "
          "after `QUIT_PAUSE`), ending its tree, spawning the new one, waiting until its prompt has been on screen for the "
          "debounce (0.15 s), typing the wakeup and waiting for the agent's answer turn. Flushes: "
          f"{', '.join(sorted(set(a5['flush'])))}. supervisord has no checkpoint or wakeup; its row is the nearest "
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
    begin, end = "<!-- events: begin -->", "<!-- events: end -->"  # bench/events.py's section stays
    if begin in old and end in old:
        L += [old[old.index(begin):old.index(end) + len(end)], ""]
    path.write_text("\n".join(L))


def targets(data: dict) -> list[str]:
    out = []
    s1 = data["scenarios"]["1_streams"]
    key = max(s1, key=lambda k: int(k.split()[0]))
    a = statistics.median([r["cpu_s"] for r in s1[key]["agentd"]])
    s = statistics.median([r["cpu_s"] for r in s1[key]["supervisord"]])
    lost = sum(r["lost_bytes"] for r in s1[key]["agentd"])
    ok = a <= 0.4 * s and lost == 0
    out.append(f"{'MET' if ok else 'NOT MET'}: CPU at {key} ≤ 0.4 × supervisord with zero loss — "
               f"{a / s:.2f}× ({a:.2f} vs {s:.2f} CPU-s), {lost} bytes lost")
    f = data["scenarios"]["2_flood"]["agentd"]
    mbps = statistics.median([r["mb_per_s"] for r in f])
    cpu_mbps = statistics.median([r["mb_per_cpu_s"] for r in f])
    lost = sum(r["lost_bytes"] for r in f)
    out.append(f"{'MET' if mbps >= 50 and lost == 0 else 'NOT MET'}: one-child flood ≥ 50 MB/s through a PTY, zero loss — "
               f"{mbps:.1f} MB/s wall ({cpu_mbps:.1f} MB per daemon CPU-second), {lost} bytes lost")
    i = data["scenarios"]["3_idle"]["agentd"]
    pct = statistics.median([r["core_percent"] for r in i])
    rss = max(r["rss_mb"] for r in i)
    out.append(f"{'MET' if pct < 0.5 else 'NOT MET'}: 50 idle agents < 0.5 % of a core — {pct:.3f} %")
    out.append(f"{'MET' if rss < 80 else 'NOT MET'}: 50 idle agents < 80 MB RSS — {rss:.1f} MB (largest)")
    st = data["scenarios"]["4_status"]
    aw = statistics.median([w for r in st["agentd"] for w in r["wall_s"]])
    sw = statistics.median([w for r in st["supervisord"] for w in r["wall_s"]])
    out.append(f"{'MET' if aw <= sw else 'NOT MET'}: `agentd status` ≤ 1.0 × `supervisorctl status` — "
               f"{aw / sw:.2f}× ({aw * 1000:.0f} vs {sw * 1000:.0f} ms)")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description="agentd against supervisord (issue 8)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--short", action="store_true", help="a quick look (< 3 minutes)")
    g.add_argument("--full", action="store_true", help="the issue's durations, 3 repetitions (default)")
    p.add_argument("--committed", action="store_true",
                   help="run agentd from `git archive HEAD` (bench/.work/tree), not the working tree")
    p.add_argument("--only", help="comma-separated scenario numbers to run (for profiling; no report)")
    p.add_argument("--out", type=Path, default=HERE, help="directory for RESULTS.md and results.json")
    args = p.parse_args(argv)
    short = args.short
    version = ensure_supervisord()
    source = "the working tree"
    if args.committed:
        tree = WORK / "tree"
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        archive = subprocess.run(["git", "archive", "HEAD", "supervisor"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        AGENTD_ENV["PYTHONPATH"] = str(tree)  # the daemon, the CLI and the fake agent import from it
        AGENTD_CMD[:] = [PY, "-m", "supervisor"]
        source = f"commit {commit} (`git archive HEAD`)"
    params = ({"reps": 1, "stream_seconds": 5.0, "counts": [1, 10, 50], "flood_mb": 15, "flood_reps": 2,
               "idle_children": 50, "idle_seconds": 8.0, "idle_reps": 1, "status_runs": 5, "restart_cycles": 2}
              if short else
              {"reps": 2, "stream_seconds": 20.0, "counts": [1, 10, 50], "flood_mb": 200, "flood_reps": 3,
               "idle_children": 50, "idle_seconds": 60.0, "idle_reps": 1, "status_runs": 15, "restart_cycles": 5})
    only = set(args.only.split(",")) if args.only else None
    data: dict = {"mode": "short" if short else "full", "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
                  "machine": machine(), "supervisord_version_line": f"supervisord {version} (PyPI `supervisor`, own venv)",
                  "params": params, "source": source, "scenarios": {}}
    started = time.monotonic()
    sc = data["scenarios"]
    if only is None or "1" in only:
        print("[1] streams", flush=True)
        sc["1_streams"] = scenario_streams(params["reps"], params["stream_seconds"], params["counts"])
    if only is None or "2" in only:
        print("[2] flood", flush=True)
        sc["2_flood"] = scenario_flood(params["flood_reps"], params["flood_mb"] * 1_000_000)
    if only is None or "3" in only or "4" in only:
        print("[3, 4] idle and status", flush=True)
        sc["3_idle"], sc["4_status"] = scenario_idle(params["idle_reps"], params["idle_children"],
                                                     params["idle_seconds"], params["status_runs"])
    if only is None or "5" in only:
        print("[5] restart latency", flush=True)
        sc["5_restart"] = scenario_restart(params["restart_cycles"])
    if only is None or "6" in only:
        print("[6] wakeup", flush=True)
        from bench import wakeup

        sc["6_wakeup"] = wakeup.run(short)
    data["elapsed_s"] = time.monotonic() - started
    print(f"done in {data['elapsed_s']:.0f} s", flush=True)
    if only is not None:
        print(json.dumps(sc, indent=1, default=str)[:20000])
        return 0
    data["targets"] = targets(data)
    data["notes"] = NOTES
    (args.out / "results.json").write_text(json.dumps(data, indent=1))
    write_report(data, args.out / "RESULTS.md")
    print("\n".join(data["targets"]))
    return 0


NOTES: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
