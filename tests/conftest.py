"""Shared fixtures: a throw-away project with its own state directory, and a CLI runner.

Every test that starts a daemon gets it stopped at teardown, and every process
whose environment names the test project (``AGENTD_ROOT``) is killed, so a
failing test leaves nothing running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

AGENTD = [sys.executable, "-m", "supervisor"]
BIN_DIR = str(Path(sys.executable).parent)


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_") and k != "NOTIFY_SOCKET"}
    env["PATH"] = BIN_DIR + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def processes_of(root: Path) -> list[psutil.Process]:
    """Live processes started for the project at ``root`` (by their AGENTD_ROOT)."""
    found = []
    target = str(root)
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("AGENTD_ROOT") == target:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
    return found


def alive(pid: int, create_time: float | None = None) -> bool:
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.05:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Project:
    root: Path
    extra_pids: list[int] = field(default_factory=list)
    state_override: Path | None = None

    def __post_init__(self) -> None:
        (self.root / "units").mkdir(parents=True, exist_ok=True)

    @property
    def state(self) -> Path:
        return self.state_override or self.root / ".agentd"

    def unit(self, name: str, text: str) -> Path:
        path = self.root / "units" / f"{name}.toml"
        path.write_text(textwrap.dedent(text))
        return path

    def fake_unit(self, name: str, *flags: str, restart: str = "", extra: str = "", stop_timeout: float = 3,
                  cycle: bool = False) -> Path:
        """A unit running the fake agent; ``restart`` lines go into [restart], ``extra`` after it.

        Without ``cycle`` the continuity cycle is off (no wakeup typed at start, no
        checkpoints), so supervision tests see only supervision.
        """
        argv = json.dumps(["python", "-m", "supervisor.fakeagent", *flags])
        restart_lines = "\n".join(line.strip() for line in restart.strip().splitlines())
        off = "" if cycle else "[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n"
        return self.unit(
            name,
            f"[agent]\ncommand = {argv}\n[restart]\nstop_timeout = {stop_timeout}\n{restart_lines}\n{off}{textwrap.dedent(extra)}\n",
        )

    def agentd(self, *args: str, check: bool = True, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*AGENTD, "--root", str(self.root), *args],
            cwd=self.root,
            env=env or clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"agentd {' '.join(args)} exited {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}")
        return result

    def status(self) -> dict[str, Any]:
        result = self.agentd("status", "--json", check=False)
        assert result.returncode in (0, 3), result.stderr
        return json.loads(result.stdout)

    def unit_status(self, name: str) -> dict[str, Any] | None:
        for row in self.status()["units"]:
            if row["unit"] == name:
                return row
        return None

    def wait_state(self, name: str, state: str, timeout: float = 30.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            row = self.unit_status(name)
            return row if row and row["state"] == state else None

        return wait_until(check, timeout, interval=0.1, what=f"unit {name} to be {state}")

    def daemon_pid(self) -> int | None:
        try:
            return int((self.state / "agentd.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        path = self.state / "agentd.log"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if event is None or item.get("event") == event:
                out.append(item)
        return out

    def transcript(self, unit: str, suffix: str = ".txt") -> str:
        files = sorted((self.state / "transcripts" / unit).glob(f"*{suffix}"))
        return files[-1].read_text(errors="replace") if files else ""

    def cleanup(self) -> None:
        pid = self.daemon_pid()
        if pid and alive(pid):
            try:
                self.agentd("stop", "--now", check=False, timeout=60)
            except subprocess.TimeoutExpired:
                pass
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        leftovers = processes_of(self.root) + [p for p in map(_proc, self.extra_pids) if p]
        for proc in leftovers:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(leftovers, timeout=10)


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    proj = Project(tmp_path / "proj")
    try:
        yield proj
    finally:
        proj.cleanup()
