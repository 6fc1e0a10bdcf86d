"""The REAL Codex CLI in a loopback-only namespace: the fixtures and helpers its test modules share.

``jail`` starts tests/codex_jail.py (the script run inside the namespace: the
fake Responses server and ``agentd start --foreground``) with ``unshare -rn``;
the test stays outside and talks to the daemon through its control socket.
``codex_bin`` finds the pinned Codex (``tests/install_codex.sh``) or skips with
the reason, which fails the test under CI (tests/conftest.py).

Used by tests/test_codex_e2e.py, tests/test_where_stopped_codex.py and
tests/test_report_codex.py; test modules import from here, never from each other.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import trail_scenario as ts
from tests.agent_clis import find_codex
from tests.conftest import (
    Project,
    clean_env,
    git,
    hold_net_namespace,
    processes_in_namespace,
    wait_until,
)

REPO = Path(__file__).resolve().parent.parent
PORT = 8080  # a fresh network namespace per test: always free


def _namespace_problem() -> str | None:
    if not shutil.which("unshare") or not shutil.which("ip"):
        return "unshare or ip is missing (util-linux, iproute2)"
    probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up && echo ok"], capture_output=True, text=True)
    if probe.stdout.strip() != "ok":
        return f"user+network namespaces are not available: {probe.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    binary, reason = find_codex()
    problem = reason if binary is None else _namespace_problem()
    if problem:
        pytest.skip(problem)
    assert binary is not None
    return binary


class Jail:
    """The namespace with the fake server and the daemon; ``call`` talks to the helper."""

    def __init__(self, project: Project, tmp: Path) -> None:
        self.project = project
        self.control = tmp / "jail.sock"
        self.log = tmp / "requests.jsonl"
        self.out = tmp / "daemon.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.namespace = ""
        self.namespace_fd = -1

    def start(self) -> None:
        argv = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "jail", sys.executable,
                str(REPO / "tests" / "codex_jail.py"), "--root", str(self.project.root), "--port", str(PORT),
                "--control", str(self.control), "--log", str(self.log), "--daemon-log", str(self.out)]
        env = clean_env(PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(argv, cwd=self.project.root, env=env, stdin=subprocess.DEVNULL)
        wait_until(lambda: self.control.exists() and self.call(op="ping"), 30, what="the jail helper")
        # unshare and sh exec'd: the helper is that pid; the fd keeps the namespace's number ours
        self.namespace, self.namespace_fd = hold_net_namespace(self.proc.pid)
        wait_until(lambda: self.project.agentd("status", check=False).returncode == 0, 60,
                   what=f"the daemon in the namespace ({self.out.read_text(errors='replace')[-2000:] if self.out.exists() else ''})")

    def call(self, **req: Any) -> dict[str, Any] | None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(str(self.control))
                sock.sendall(json.dumps(req).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            return json.loads(data)
        except OSError:
            return None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    # -- what the model server saw --------------------------------------------------
    def requests(self) -> list[dict[str, Any]]:
        """The main threads' turn requests (not the title side request), oldest first."""
        out = []
        if not self.log.exists():
            return out
        for line in self.log.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            body = item.get("body")
            if item.get("method") != "POST" or not str(item.get("path", "")).endswith("/responses") or not isinstance(body, dict):
                continue
            if ((body.get("text") or {}).get("format") or {}).get("type") == "json_schema":
                continue  # the TUI's title request
            out.append(item)
        return out

    def first_requests(self) -> list[dict[str, Any]]:
        """The first request of each Codex thread (one per session), oldest first."""
        seen: dict[str, dict[str, Any]] = {}
        for item in self.requests():
            thread = str((item.get("meta") or {}).get("thread_id") or item.get("seq"))
            seen.setdefault(thread, item)
        return list(seen.values())


@pytest.fixture
def jail(project: Project, tmp_path: Path, codex_bin: Path) -> Iterator[Jail]:
    j = Jail(project, tmp_path)
    try:
        yield j
    finally:
        project.cleanup()
        j.stop()
        try:
            leftovers = processes_in_namespace(j.namespace) if j.namespace else []
            for proc in leftovers:
                proc.kill()
            assert not leftovers, f"processes left behind in the jail: {[(p.pid, p.info['cmdline']) for p in leftovers]}"
        finally:
            if j.namespace_fd >= 0:
                os.close(j.namespace_fd)


def wait_idle(project: Project, timeout: float = 60) -> dict[str, Any]:
    return wait_until(lambda: (r := project.unit_status("cx")) and r["state"] == "running" and r["turn"] == "idle" and r,
                      timeout, interval=0.1, what="codex to be running and idle")



def setup_trail(project: Project, binary: Path) -> None:
    """A git project with tests/trail_scenario.py's files and a Codex unit ``cx`` (scope src/), committed and trusted."""
    root = project.root
    project.init_git()
    project.agentd("init")
    ts.project_files(root)
    project.unit("cx", f"""
[agent]
kind = "codex"
command = [{json.dumps(str(binary))}]
[codex]
home = "private"
model = "gpt-5.5"
base_url = "http://127.0.0.1:{PORT}/v1"
request_max_retries = 1
stream_max_retries = 1
[scope]
paths = ["src/**"]
[restart]
stop_timeout = 5
[context]
window = 200000
[checkpoint]
deadline = 60
grace = 2
""")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    # Codex 0.169.0 ignores the adapter's -c trust override in a git repository and shows "Trust this
    # folder?" (issue 15 section 6, the agents helper's): trust the project in the private CODEX_HOME.
    home = project.state / "codex" / "cx"
    home.mkdir(parents=True, exist_ok=True)
    # gpt-5.5 (a model whose metadata offers the freeform apply_patch tool) announces its successor once
    (home / "config.toml").write_text(f'[projects.{json.dumps(str(root.resolve()))}]\ntrust_level = "trusted"\n'
                                      '[notice.model_migrations]\n"gpt-5.5" = "gpt-6-sol"\n')


def log(jail: Jail) -> list[dict]:
    """Every line the fake model server logged (request and reply), oldest first."""
    out = []
    for line in jail.log.read_text().splitlines() if jail.log.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
