"""The contenders of ``python -m bench``: agentd, supervisord and the bare PTY reader (:mod:`bench.floor`).

Each starts in a temporary :class:`Run` directory with the same children
(:mod:`bench.child`), exposes the pid whose CPU and memory are measured, and
says how many bytes it captured per child.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
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


def cpu_all(pid: int) -> float:
    """user + system CPU of ``pid`` (all its threads) and of its children it has waited for (git and other
    helper processes it ran and reaped): ``utime + stime + cutime + cstime`` of ``/proc/PID/stat``.

    The supervised children themselves run until the supervisor is stopped, so they are never in it while
    it is measured."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / CLK_TCK


def settle(sup: Any, agents: int, timeout: float = 300.0) -> float:
    """Wait until the supervisor's deferred work is done; the seconds it took.

    agentd's event indexer runs behind the output (a thread at nice 19, duty-cycled): first wait until it
    has read every transcript to its end (:meth:`Agentd.caught_up`), then, for every contender, until one
    second passes with the supervisor's CPU (:func:`cpu_all`) at idle: at most 1 % of a core plus 0.02 %
    per agent.
    """
    t0 = time.monotonic()
    deadline = t0 + timeout
    caught_up = getattr(sup, "caught_up", lambda: True)
    while not caught_up() and time.monotonic() < deadline:
        time.sleep(0.2)
    idle = 0.01 + 0.0002 * agents
    while time.monotonic() < deadline:
        c0, w0 = cpu_all(sup.pid), time.monotonic()
        time.sleep(1.0)
        if (cpu_all(sup.pid) - c0) / (time.monotonic() - w0) <= idle:
            break
    return time.monotonic() - t0


def cpu_split(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of ``pid``'s threads: ``main`` (the event loop's, for agentd) and ``others``
    (agentd's indexer and workers; their names are not in /proc)."""
    out: dict[str, float] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                rest = fh.read().rsplit(")", 1)[1]
        except OSError:
            continue
        name = "main" if tid == str(pid) else "others"
        fields = rest.split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


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
            # the children write their ready/count files into the run directory: the fence (on by default) allows it
            lines += ["", "[scope]", f'module = "{name.replace("-", "_")}"', f"writable = [{json.dumps(str(run.dir))}]",
                      "", "[restart]", 'policy = "no"',
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

    def caught_up(self) -> bool:
        """Whether the daemon's event indexer has read every clean transcript to its end (True without one)."""
        if AGENTD_ENV.get("AGENTD_EVENT_INDEX", os.environ.get("AGENTD_EVENT_INDEX", "true")) == "false":
            return True
        state = self.project / ".agentd"
        try:
            conn = sqlite3.connect(f"{(state / 'events.db').as_uri()}?mode=ro", uri=True, timeout=1.0)
        except sqlite3.Error:
            return False
        try:
            known = {Path(p).parent.name + "/" + Path(p).name: size for p, size in
                     conn.execute("SELECT path, size FROM sources WHERE kind = 'transcript'")}
        except sqlite3.Error:
            return False
        finally:
            conn.close()
        for path in (state / "transcripts").glob("*/*.txt"):
            if known.get(path.parent.name + "/" + path.name) != path.stat().st_size:
                return False
        return True

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


class Floor:
    """The bare PTY reader (:mod:`bench.floor`): one selector, ``os.read``, one ``os.write`` per read."""

    name = "floor"

    def __init__(self, run: Run, programs: dict[str, list[str]]) -> None:
        self.run = run
        self.base = run.dir / "floor"
        (self.base / "logs").mkdir(parents=True)
        self.conf = self.base / "floor.json"
        self.conf.write_text(json.dumps({"logs": str(self.base / "logs"), "programs": programs}))
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.out = open(self.run.dir / "floor.out", "wb")
        self.proc = subprocess.Popen([PY, str(HERE / "floor.py"), str(self.conf)], cwd=self.base, stdout=self.out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def captured(self, name: str) -> int:
        path = self.base / "logs" / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    @staticmethod
    def expected(count: dict) -> int:
        return count["bytes"] + count["lines"]  # a PTY, as for agentd

    def stop(self) -> None:
        _end(self.proc, self.out)


SUPERVISORS = {"agentd": Agentd, "supervisord": Supervisord, "floor": Floor}
#: The contenders of the streaming scenarios (1 and 2), in the order of repetition 0.
STREAMERS = ("agentd", "floor", "supervisord")


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


def order(rep: int, kinds: tuple[str, ...] = ("agentd", "supervisord")) -> list[str]:
    """Rotate which contender goes first (two: alternate)."""
    k = rep % len(kinds)
    return list(kinds[k:] + kinds[:k]) if len(kinds) > 2 else (list(kinds) if rep % 2 == 0 else list(kinds[::-1]))
