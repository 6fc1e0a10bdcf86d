"""The REAL Claude Code CLI in a loopback-only namespace: the fixtures and helpers its test modules share.

``jail`` runs the daemon and the fake Messages API (tests/fake_anthropic.py)
inside a user + network namespace that has only loopback (``unshare -rn``);
the test stays outside and talks to the daemon through its control socket.
``claude_bin`` finds the pinned Claude Code (``tests/install_claude.sh``) or
skips with the reason, which fails the test under CI (tests/conftest.py).

Used by tests/test_claude_e2e.py, tests/test_where_stopped_claude.py and
tests/test_report_claude.py; test modules import from here, never from each other.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clis import claude_binary
from tests.conftest import (
    AGENTD,
    CONSTRAINT,
    TASK,
    Project,
    alive,
    clean_env,
    hold_net_namespace,
    processes_in_namespace,
    wait_until,
)

REPO = Path(__file__).resolve().parent.parent
FAKE_SERVER = REPO / "tests" / "fake_anthropic.py"
PORT = 8765  # a fresh network namespace: always free
API_KEY = "sk-ant-fake-agentd-test-0123456789abcdef"
FACT = "the parser speaks API v2"


def _netns_works() -> bool:
    try:
        return subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    path = claude_binary()
    if path is None:
        pytest.skip("Claude Code is not installed: run `bash tests/install_claude.sh` (or set AGENTD_CLAUDE_BIN)")
    if not _netns_works():
        pytest.skip("cannot create a loopback-only network namespace (`unshare -rn`)")
    return path


@dataclass
class Jail:
    """The daemon and the fake server in one loopback-only namespace; the test outside."""

    project: Project
    proc: subprocess.Popen[bytes]
    log: Path
    control: Path
    port_file: Path
    namespace: str = ""
    namespace_fd: int = -1

    def server_pid(self) -> int | None:
        try:
            return int(self.port_file.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def set_usage(self, tokens: int | None, when: str | None = None) -> None:
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps({"input_tokens": tokens, "when": when}))
        os.replace(tmp, self.control)

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line being written
        return out

    def turns(self) -> list[dict[str, Any]]:
        """Bodies of the main conversation's requests (the ones with tools), in order."""
        return [e["body"] for e in self.entries()
                if e.get("method") == "POST" and "/v1/messages" in e.get("path", "") and "count_tokens" not in e["path"]
                and isinstance(e.get("body"), dict) and e["body"].get("tools")]

    def stop(self) -> None:
        """Everything this jail started ends (the daemon's own stop is tried first by the caller)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        pid = self.server_pid()
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not alive(pid), 10, what="the fake server to end")

def message_text(body: dict[str, Any], roles: tuple[str, ...] = ("user", "system")) -> str:
    """All text of the request's messages of those roles (not the system prompt)."""
    parts = []
    for message in body.get("messages") or []:
        if message.get("role") not in roles:
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(block.get("text", ""))
    return "\n".join(parts)


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return message_text({"messages": [message]}, ("user",))
    return ""


def setup(project: Project, binary: Path, restart: str = "", context: str = "") -> None:
    """A Claude Code unit in the safe default (acceptEdits in its scope), workdir and scope the module directory cl/;
    ``context``: more lines of its ``[context]`` section."""
    project.agentd("init")
    (project.root / "cl").mkdir()
    (project.root / "cl" / "parser.py").write_text("VERSION = 2\n")
    project.agentd("fact", "add", FACT, "--source", "cl/parser.py:1", "--module", "claude")
    (project.root / ".agent" / "constraints.md").write_text(f"# Hard constraints\n\n- {CONSTRAINT}\n")
    (project.root / ".agent" / "current-task.md").write_text(f"# Current task\n\n{TASK}\n\nState at interruption: (not set)\n")
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{PORT}", "ANTHROPIC_API_KEY": API_KEY}
    project.unit(
        "claude",
        f"""
[unit]
enabled = false
[agent]
kind = "claude"
command = [{json.dumps(str(binary))}]
workdir = "cl"
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}
[scope]
paths = ["cl/**"]
[restart]
stop_timeout = 5
initial_delay = 0.2
{restart}
[context]
checkpoint_at = 0.70
{context}
[checkpoint]
deadline = 90
grace = 5
""",
    )


@pytest.fixture
def jail(request: pytest.FixtureRequest, project: Project, claude_bin: Path, tmp_path: Path) -> Iterator[Jail]:
    """The jail; parametrized indirectly, its parameter is more of the unit's ``[context]`` (e.g. its window)."""
    setup(project, claude_bin, context=getattr(request, "param", ""))
    log, control, port_file = tmp_path / "requests.jsonl", tmp_path / "control.json", tmp_path / "port"
    control.write_text("{}")
    home = tmp_path / "home"  # Claude Code writes a little into $HOME: keep it out of the real one
    home.mkdir()
    server = shlex.join([sys.executable, str(FAKE_SERVER), "--port", str(PORT), "--port-file", str(port_file),
                         "--log", str(log), "--control-file", str(control)])
    script = f'ip link set lo up && {{ {server} & }} && exec "$@"'
    daemon = [*AGENTD, "--root", str(project.root), "start", "--foreground"]
    out = open(tmp_path / "daemon.out", "wb")
    proc = subprocess.Popen(["unshare", "-rn", "sh", "-c", script, "sh", *daemon], cwd=project.root,
                            env=clean_env(HOME=str(home)), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    j = Jail(project, proc, log, control, port_file)
    try:
        wait_until(lambda: port_file.exists() or proc.poll() is not None, 60, what="the fake server")
        wait_until(lambda: project.agentd("status", check=False).returncode == 0 or proc.poll() is not None, 60,
                   interval=0.2, what="the daemon's socket")
        assert proc.poll() is None, (tmp_path / "daemon.out").read_text()
        # unshare and sh exec'd: the daemon is that pid; the fd keeps the namespace's number ours
        j.namespace, j.namespace_fd = hold_net_namespace(proc.pid)
        yield j
    finally:
        try:
            if proc.poll() is None:
                project.agentd("stop", check=False, timeout=90)
        finally:
            project.cleanup()
            j.stop()
            try:
                leftovers = processes_in_namespace(j.namespace) if j.namespace else []
                for p in leftovers:
                    p.kill()
                assert not leftovers, f"processes left behind in the jail: {[(p.pid, p.info['cmdline']) for p in leftovers]}"
            finally:
                if j.namespace_fd >= 0:
                    os.close(j.namespace_fd)


def start_and_first_turn(j: Jail) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start the unit; return its status row once the first turn ended, and that turn's first request."""
    before = len(j.turns())
    j.project.agentd("start", "claude")
    wait_until(lambda: len(j.turns()) > before, 90, what="Claude Code's first request")
    first = j.turns()[before]
    row = wait_until(lambda: (r := j.project.unit_status("claude")) and r["state"] == "running" and r["turn"] == "idle" and r,
                     90, interval=0.1, what="the first turn to end (Stop hook)")
    return row, first

