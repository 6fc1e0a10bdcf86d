"""Shared fixtures and helpers: a throw-away project with its own state directory, and the CLI.

Every test that starts a daemon gets it stopped at teardown, and every process
whose environment names the test project (``AGENTD_ROOT``) is killed, so a
failing test leaves nothing running.

Under CI (``CI=true``, any case) a skipped test is a failure that names the
skip's reason: CI must run everything (see :func:`pytest_runtest_makereport`).

Test modules import helpers from here, never from each other.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import struct
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
REPO = Path(__file__).resolve().parent.parent

# fixtures shared by name, each defined once in the whole suite (the Codex and Claude `jail` are imported instead)
pytest_plugins = ["tests.browser_fixtures"]


# --------------------------------------------------------------------------- bytecode


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package's bytecode once, before any worker or test starts a process.

    The suite starts thousands of Python processes (``agentd`` commands, daemons,
    fake agents).  Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine and CI
    set it), none of them writes ``__pycache__``, so each one compiled every
    module it imported from source again: about 1 CPU-second per daemon or CLI
    start.  The flag only stops writing: compiled files are still read.
    """
    sys.dont_write_bytecode = False  # and pytest keeps the test modules it rewrote, for the next worker
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller compiled it before it started the workers
    import compileall

    compileall.compile_dir(str(REPO / "supervisor"), quiet=1, workers=1)


#: Modules whose tests take half a minute or more (real agent CLIs, random kill rounds, long waits on
#: a schedule).  They run first, so that three test processes do not end with one of them alone on a long
#: test while the others are idle.
LONG_FIRST = (
    "test_report_claude.py", "test_report_codex.py", "test_where_stopped_claude.py", "test_where_stopped_codex.py",
    "test_claude_e2e.py", "test_codex_e2e.py", "test_continuity.py", "faults/test_checkpoint_kills.py",
    "faults/test_daemon_kills.py", "faults/test_decide_kills.py", "memory/test_concurrency.py", "memory/test_sync.py",
    "test_probe_recall_daemon.py", "test_logs.py", "test_export_k8s.py", "test_initd.py", "test_orchestration.py",
    "test_fleet_view.py", "test_report_fakeagent.py", "test_cli_pm2.py", "test_containment_daemon.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long modules first (:data:`LONG_FIRST`), each in its own order; the rest as collected."""
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0].removeprefix("tests/")
        return LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)  # stable: the same order in every worker


# --------------------------------------------------------------------------- CI: no skips


def ci_mode() -> bool:
    """True under CI (``CI=true``, compared case-insensitively)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def _skip_reason(longrepr: Any) -> str:
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


_CI_SKIP = "skipped under CI=true, where every test must run: "
_skipped_modules: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Under CI a skip fails the test, with the skip's reason (an expected failure stays one)."""
    report = yield
    if ci_mode() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = _CI_SKIP + _skip_reason(report.longrepr)
    return report


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A whole module skipped at collection: remembered, and the run fails at its end (the rest still runs)."""
    if ci_mode() and report.skipped:
        _skipped_modules.append(f"{report.nodeid}: {_skip_reason(report.longrepr)}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _skipped_modules:
        terminalreporter.write_sep("=", "modules skipped under CI=true: the run fails", red=True)
    for line in _skipped_modules:
        terminalreporter.write_line(f"FAILED {_CI_SKIP}{line}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped_modules and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --------------------------------------------------------------------------- waiting


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy and return that; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.01,
                           what: str = "condition") -> Any:
    """:func:`wait_until` inside a running event loop (the loop keeps running between polls)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def stays(predicate: Callable[[], Any], seconds: float, interval: float = 0.05) -> bool:
    """True if ``predicate`` holds during the whole window (for asserting an absence over time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(interval)
    return bool(predicate())


# --------------------------------------------------------------------------- processes


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


def net_namespace(pid: int) -> str:
    """The network namespace of ``pid`` (``net:[4026532...]``)."""
    return os.readlink(f"/proc/{pid}/ns/net")


def hold_net_namespace(pid: int) -> tuple[str, int]:
    """The network namespace of ``pid``, and an fd that keeps it alive until closed.

    A namespace's number is reused once it is gone: held open, it still names
    this namespace (and no other test's) when the jail's last process has ended.
    """
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    return os.readlink(f"/proc/self/fd/{fd}"), fd


def processes_in_namespace(namespace: str) -> list[psutil.Process]:
    """Live processes in that network namespace: what one test's jail runs, and nothing of other tests."""
    found = []
    for proc in psutil.process_iter(["pid", "exe", "cmdline"]):
        try:
            if net_namespace(proc.pid) == namespace and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def alive(pid: int, create_time: float | None = None) -> bool:
    """``pid`` runs (and, with ``create_time``, is still the same process); a zombie does not count."""
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.05:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


# --------------------------------------------------------------------------- git


GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity (commits work without any git config); its stdout."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**clean_env(), **GIT_IDENTITY}).stdout


# --------------------------------------------------------------------------- the control socket, raw


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from ``sock``; fails the test if the peer closes first."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"the connection closed after {len(data)} of {size} bytes"
        data += chunk
    return data


def read_reply(sock: socket.socket) -> dict[str, Any]:
    """One length-prefixed JSON message (the control protocol's framing, read independently of the product)."""
    (size,) = struct.unpack(">I", recv_exactly(sock, 4))
    return json.loads(recv_exactly(sock, size))


def raw_request(path: Path, payload: bytes, timeout: float = 30) -> dict[str, Any]:
    """Send ``payload`` as is on a new connection to the socket at ``path``; the first reply."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        try:
            sock.sendall(payload)
        except BrokenPipeError:
            pass  # refused before reading: the reply is still there
        return read_reply(sock)


# --------------------------------------------------------------------------- the project

CONSTRAINT = "Do not touch the DB schema."
TASK = "Port the parser to the new API."



def session_inputs(path: Path) -> list[list[str]]:
    """The fake agent's ``--input-log``: the messages of each session (a session's log starts again at n = 1)."""
    sessions: list[list[str]] = []
    if not path.exists():
        return sessions
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if item["n"] == 1:
            sessions.append([])
        sessions[-1].append(item["text"])
    return sessions


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

    # -- unit files

    def unit(self, name: str, text: str) -> Path:
        path = self.root / "units" / f"{name}.toml"
        path.write_text(textwrap.dedent(text))
        return path

    def fake_unit(self, name: str, *flags: str, cycle: bool = False, stop_timeout: float = 3,
                  writable: tuple[str, ...] = (), **sections: str) -> Path:
        """A unit running the fake agent, which logs every message it gets to :meth:`inputs_path`.

        ``sections`` add lines to a section: ``unit``, ``agent``, ``restart``,
        ``scope``, ``context``, ``checkpoint``, ``wakeup``, ``schedule``, ``resources``, ``freeze``.  The
        agent's idle prompt is ``fake> ``.  Without ``cycle`` the continuity
        cycle is off (no wakeup typed at start, no checkpoints), so
        supervision tests see only supervision.  ``writable``: more paths the
        fenced agent may write (its input log always is).
        """
        unknown = set(sections) - {"unit", "agent", "restart", "scope", "context", "checkpoint", "wakeup", "schedule", "resources", "freeze"}
        assert not unknown, f"fake_unit: unknown sections {sorted(unknown)}"
        argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(self.inputs_path(name)), *flags])
        body = {
            "unit": "",
            "agent": f'command = {argv}\nprompt = "fake> $"',
            "restart": f"stop_timeout = {stop_timeout}",
            # the test's record of what the agent received: writable for an agent fenced to its scope
            "scope": f"writable = {json.dumps([str(self.inputs_path(name)), *writable])}",
            "context": "",
            "checkpoint": "grace = 2" if cycle else "enabled = false",
            "wakeup": "" if cycle else "on_start = false",
            "schedule": "",
            "resources": "",
            "freeze": "",
        }
        for key, lines in sections.items():
            body[key] = "\n".join(filter(None, [body[key], textwrap.dedent(lines).strip()]))
        # the fence lets a fenced agent write an existing file outside its scope, never create one there
        self.inputs_path(name).touch()
        text = "".join(f"[{key}]\n{lines}\n" for key, lines in body.items() if lines)
        return self.unit(name, text)

    def init_git(self) -> None:
        """Make the project a git repository with a committer (no commit yet)."""
        git(self.root.parent, "init", "-q", str(self.root))
        git(self.root, "config", "user.email", "t@example.com")
        git(self.root, "config", "user.name", "t")

    def init_memory(self) -> None:
        """``agentd init``, then a hard constraint (:data:`CONSTRAINT`) and a task (:data:`TASK`) a wakeup must carry."""
        self.agentd("init")
        (self.root / ".agent" / "constraints.md").write_text(f"# Hard constraints\n\n- {CONSTRAINT}\n")
        (self.root / ".agent" / "current-task.md").write_text(
            f"# Current task\n\n{TASK}\n\nState at interruption: (not set)\n")

    def inputs_path(self, unit: str) -> Path:
        return self.root / f"{unit}-inputs.jsonl"

    def inputs(self, unit: str) -> list[list[str]]:
        """What the fake agent of ``unit`` received, per session."""
        return session_inputs(self.inputs_path(unit))

    def last_inputs(self, unit: str) -> list[str]:
        """What the newest session of ``unit`` received; empty before its first message arrives.

        ``agentd send`` returns once the daemon queued the text, so a wait can
        begin before the fake agent logged anything at all.
        """
        sessions = self.inputs(unit)
        return sessions[-1] if sessions else []

    # -- the CLI

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
        """What ``agentd status --json`` prints: asked over the control socket, as that command does.

        Waits poll this many times a second; a Python process per poll cost
        more CPU than the rest of a test.  With no running daemon (or
        anything the fast path does not answer) the command itself runs.
        """
        from supervisor.cli.quickpaths import quick_paths
        from supervisor.control.client import call
        from supervisor.daemon.pidfile import is_locked

        # the command runs in clean_env(): with AGENTD_* set here, only the command itself sees what it sees
        quick = not any(k.startswith("AGENTD_") for k in os.environ)
        paths = quick_paths(None, self.root) if quick else None
        if paths is not None and is_locked(paths.pidfile):
            try:
                result = call(paths.socket_path, "status", timeout=30.0, units=None)
            except Exception:  # noqa: BLE001 - the daemon went away between the look and the call: ask the CLI
                result = None
            if isinstance(result, dict):
                return json.loads(json.dumps(result))  # the same types the command's JSON gives
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

    def history(self, unit: str) -> list[dict[str, Any]]:
        """``agentd history UNIT --json``: the recorded cycles, oldest first."""
        out = self.agentd("history", unit, "--json").stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def daemon_pid(self) -> int | None:
        try:
            return int((self.state / "agentd.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    # -- what the daemon wrote

    def events(self, event: str | None = None, unit: str | None = None) -> list[dict[str, Any]]:
        """The daemon's event log (``agentd.log``), optionally only one event and one unit."""
        path = self.state / "agentd.log"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if (event is None or item.get("event") == event) and (unit is None or item.get("unit") == unit):
                out.append(item)
        return out

    def transcript(self, unit: str, session: str | None = None, suffix: str = ".txt") -> str:
        """The transcript of ``session``, or of the newest session (session ids sort by start)."""
        directory = self.state / "transcripts" / unit
        if session is not None:
            path = directory / f"{session}{suffix}"
            return path.read_text(errors="replace") if path.exists() else ""
        files = sorted(directory.glob(f"*{suffix}"))
        return files[-1].read_text(errors="replace") if files else ""

    def grandchildren(self, unit: str, count: int, session: str | None = None) -> list[int]:
        """The pids the fake agent printed as ``grandchild PID`` (waits until ``count`` are there)."""
        def found() -> list[int] | None:
            pids = [int(p) for p in re.findall(r"grandchild (\d+)", self.transcript(unit, session))]
            return pids if len(pids) >= count else None

        return wait_until(found, 30, what=f"{count} grandchild pid(s) in {unit}'s transcript")

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


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    proj = Project(tmp_path / "proj")
    try:
        yield proj
    finally:
        proj.cleanup()
