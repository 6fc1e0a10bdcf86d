"""``agentd status`` without click or tabulate (supervisor/cli/fast.py): the same text, the same exit codes.

The fast path and the click command are run against one stand-in daemon (a
held pidfile, a control socket that always gives the same answer), so their
outputs must be equal byte for byte; the table without tabulate is compared
with tabulate's on status tables in colour and cut to a width; and the real
``agentd status`` against a real daemon is checked to import neither click,
tabulate nor asyncio.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from tabulate import tabulate as real_tabulate

from supervisor.cli import fast, style
from supervisor.cli.app import cli
from supervisor.cli.render import render_status
from supervisor.cli.table import simple_table
from supervisor.control.framing import HEADER, encode

from .conftest import Project, clean_env, wait_until


def _row(unit: str, state: str, **extra: Any) -> dict[str, Any]:
    row = {"unit": unit, "state": state, "pid": 4242, "uptime": 3725.0, "restarts": 2, "last_exit": "exit 1",
           "cpu_seconds": 12.34, "rss_bytes": 52_428_800, "memory_bytes": 60_000_000, "scope": "fenced (landlock)",
           "context": {"exact": False, "used": 12_300, "window": 200_000, "ratio": 0.0615, "window_source": "agent"},
           "activity": "idle at prompt", "reason": None}
    row.update(extra)
    return row


ANSWER = {
    "daemon": {"version": "0.1.0", "pid": 99, "uptime": 90061.0, "project_root": "/srv/proj\x1bx",
               "containment": {"detail": "cgroup v2"}, "landlock": "ABI 7"},
    "units": [
        _row("web", "running"),
        _row("api-2", "backoff", pid=None, uptime=None, cpu_seconds=None, rss_bytes=None, memory_bytes=None,
             context=None, scope=None, next_restart_in=4.2, reason="exit 3; backing off"),
        _row("worker", "running", frozen={"state": "blocked_screen", "detail": "blocked: trust for 40s; press 1",
                                          "action": "notify"}, queued_sends=3, violations=1, scope="watched (no fence)",
             last_checkpoint={"trigger": "context", "flush": "verified", "ratio": 0.071}),
        _row("old", "failed", pid=None, restarts=5, last_exit="signal 9 (SIGKILL)", activity=None, reason="too many"),
    ],
    "errors": ["units/bad.toml: line 3: unknown key 'x'"],
}


class StandIn:
    """A daemon as the client sees it: the pidfile locked, one answer for every request on the socket."""

    def __init__(self, root: Path, answer: dict[str, Any]) -> None:
        state = root / ".agentd"
        state.mkdir(parents=True)
        (root / "units").mkdir(exist_ok=True)
        self.requests: list[dict[str, Any]] = []
        self._pid_fd = os.open(state / "agentd.pid", os.O_RDWR | os.O_CREAT, 0o600)
        os.write(self._pid_fd, f"{os.getpid()} 0.0\n".encode())
        fcntl.flock(self._pid_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(state / "agentd.sock"))
        self._server.listen()
        self._reply = encode({"ok": True, "result": answer})
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                head = b""
                while len(head) < HEADER.size:
                    head += conn.recv(HEADER.size - len(head))
                (size,) = HEADER.unpack(head)
                body = b""
                while len(body) < size:
                    body += conn.recv(size - len(body))
                self.requests.append(json.loads(body))
                conn.sendall(self._reply)

    def close(self) -> None:
        self._server.close()
        self._thread.join(5)
        os.close(self._pid_fd)


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandIn]:
    daemon = StandIn(tmp_path / "proj", ANSWER)
    try:
        yield daemon
    finally:
        daemon.close()


def _both(root: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[tuple[int | None, str], tuple[int, str]]:
    argv = ["--root", str(root), *args]
    code = fast.answer(argv)
    quick = (code, capsys.readouterr().out)
    result = CliRunner().invoke(cli, argv)
    return quick, (result.exit_code, result.output)


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["status", "web"], ["status", "old", "--json"],
                                  ["status", "web", "old"]])
def test_fast_path_prints_what_the_click_command_prints(standin: StandIn, tmp_path: Path, args: list[str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (code, out), (click_code, click_out) = _both(tmp_path / "proj", args, capsys)
    assert code is not None, "the fast path declined a plain status command line"
    assert (code, out) == (click_code, click_out)
    assert "web" in out and "worker" in out
    units = [a for a in args[1:] if not a.startswith("-")]
    assert [r["args"].get("units") for r in standin.requests] == [units or None] * 2
    assert code == (3 if units else 0)  # the stand-in answers every unit, some not running


@pytest.mark.parametrize("argv", [["status", "--help"], ["status", "--"], ["logs", "web"], ["--version"], ["status", "-x"],
                                  ["--verbose", "status"], ["--root"], ["--root", "a", "--project", "b", "status"], []])
def test_anything_else_is_left_to_click(argv: list[str], standin: StandIn) -> None:
    assert fast.answer(argv) is None
    assert standin.requests == []


def test_no_daemon_is_left_to_click(tmp_path: Path) -> None:
    (tmp_path / "units").mkdir()
    assert fast.answer(["--root", str(tmp_path), "status"]) is None
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "status"])
    assert (result.exit_code, result.output) == (3, "agentd is not running\n")


def test_a_configuration_that_needs_the_full_settings_is_left_to_click(standin: StandIn, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_LOG_LEVEL", "debug")
    assert fast.answer(["--root", str(tmp_path / "proj"), "status"]) is None
    assert standin.requests == []


def test_colours_are_written_as_click_writes_them() -> None:
    names = {*style.STATE_COLOURS.values(), *style.LEVEL_COLOURS.values(), *style.PREFIX_COLOURS}
    for name in names:
        for bold in (False, True):
            assert style.paint("running", name, True, bold) == click.style("running", fg=name, bold=bold)
    assert style.paint("running", "green", False) == "running"


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("limit", [None, 200, 100, 60])
def test_status_table_equals_tabulates(colour: bool, limit: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    fast_text = render_status(ANSWER, colour=colour, limit=limit)
    monkeypatch.setattr(style, "simple_table", lambda rows, headers: None)  # tabulate itself, every time
    assert fast_text == render_status(ANSWER, colour=colour, limit=limit)


def test_simple_table_equals_tabulate_or_declines() -> None:
    rng = random.Random(19)
    cells: list[Any] = ["web", "-", "", " padded ", "\x1b[32mrunning\x1b[0m", "\x1b[31m\x1b[1mfailed\x1b[0m", "1m02s",
                        "cut…", "a — b", "~1.2k/200.0k 6%", 7, 0, 12345, "12", "1.5", "nan", "中文", "e\u0301", None, 2.5]
    compared = declined = 0
    for _ in range(3000):
        width = rng.randint(1, 5)
        headers = rng.sample(["UNIT", "STATE", "PID", "UPTIME", "NOTE", "X"], width)
        rows = [[rng.choice(cells) for _ in range(width)] for _ in range(rng.randint(0, 4))]
        text = simple_table(rows, headers)
        if text is None:
            declined += 1
            continue
        compared += 1
        assert text == real_tabulate(rows, headers=headers), (headers, rows)
    assert compared > 300 and declined > 300


def test_real_status_imports_neither_click_tabulate_nor_asyncio(project: Project) -> None:
    project.fake_unit("alpha")
    project.fake_unit("beta")
    project.agentd("start")
    project.wait_state("alpha", "running")
    project.wait_state("beta", "running")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "supervisor", "--root", str(project.root), "status"],
                          cwd=project.root, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "alpha" in proc.stdout and "beta" in proc.stdout and "UNIT" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "supervisor.cli.fast" in imported
    assert not imported & {"click", "tabulate", "asyncio", "pydantic", "psutil"}, sorted(imported & {"click", "tabulate", "asyncio", "pydantic", "psutil"})
    wait_until(lambda: json.loads(project.agentd("status", "--json").stdout)["units"], 10)
