"""Helpers of the fault tests that run checkpoint cycles with the fake agent."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import psutil

from tests.conftest import AGENTD, Project, alive, clean_env, wait_until


def cycle_unit(project: Project, name: str, *flags: str, grace: float = 2) -> Path:
    """A fake-agent unit with checkpoints and wakeups on; returns its input log (what it received)."""
    if not (project.root / ".agent").exists():
        project.agentd("init")
    inputs = project.root / f"{name}-inputs.jsonl"
    argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(inputs), *flags])
    project.unit(name, f"""
[agent]
command = {argv}
prompt = "fake> $"
[restart]
stop_timeout = 3
initial_delay = 0.2
burst = 1000
[context]
window = 4000
[checkpoint]
grace = {grace}
deadline = 30
""")
    return inputs


def sessions_started(inputs: Path) -> int:
    """How many sessions received their first message (the wakeup)."""
    if not inputs.exists():
        return 0
    return sum(1 for line in inputs.read_text().splitlines() if line.strip() and json.loads(line)["n"] == 1)


def history(project: Project, unit: str) -> list[dict]:
    """The unit's checkpoint cycles (not the records of work kept when a session ended otherwise: flush skipped)."""
    out = project.agentd("history", unit, "--json").stdout
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [r for r in records if r["flush"] != "skipped"]


def background(project: Project, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*AGENTD, "--root", str(project.root), *args], env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=project.root)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def tree_of(pid: int) -> list[psutil.Process]:
    """A process and its descendants (to prove later that none survived)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def gone(procs: list[psutil.Process]) -> bool:
    return not any(alive(p.pid, p.create_time()) for p in procs)


def pause(rng: random.Random, low: float, high: float) -> float:
    """The random point of a kill: fault injection, not synchronisation."""
    delay = rng.uniform(low, high)
    time.sleep(delay)
    return delay


def ready(project: Project, unit: str, inputs: Path, sessions: int) -> dict:
    """The unit runs its ``sessions``-th session, which took its wakeup and is idle."""
    wait_until(lambda: sessions_started(inputs) >= sessions, 90, what=f"session {sessions}'s wakeup")
    return wait_until(lambda: (r := project.unit_status(unit)) and r["state"] == "running" and r["turn"] == "idle"
                      and r["wakeup"] != "pending" and r, 90, what=f"{unit} to be idle")
