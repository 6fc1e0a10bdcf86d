"""Start the daemon: in the foreground (:func:`run_daemon`, for systemd), or in the background
(:func:`spawn_daemon`) waiting until it answers, or saying why it could not.

``agentd start`` runs ``python -m supervisor start --foreground --detached``
in a new session (so it survives the terminal), with its early output going to
``agentd.err`` in the state directory, and returns only when the control
socket answers a ping.  If the daemon exits first, its error output is the
error message.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from ..control.client import ControlError, DaemonNotRunning, call
from ..session.process import ProcessRecord
from .pidfile import is_locked
from ..config.settings import Settings


class DaemonStartError(Exception):
    pass


def spawn_daemon(settings: Settings, config: Path | None) -> int:
    state = settings.state_path
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    argv = [sys.executable, "-m", "supervisor", "--root", str(settings.project_root)]
    if config is not None:
        argv += ["--config", str(config)]
    argv += ["start", "--foreground", "--detached"]
    err_path = state / "agentd.err"
    with open(err_path, "wb") as err, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            argv, stdin=devnull, stdout=err, stderr=err, start_new_session=True, close_fds=True,
            cwd=str(settings.project_root),
        )
    deadline = time.monotonic() + settings.start_timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            detail = err_path.read_text(errors="replace").strip().splitlines()
            message = detail[-1] if detail else f"exit code {code}"
            raise DaemonStartError(f"agentd could not start: {message} (see {err_path})")
        try:
            reply = call(settings.socket_path, "ping", timeout=2.0)
            return int(reply["pid"])
        except (DaemonNotRunning, ControlError, OSError):
            time.sleep(0.05)
    proc.terminate()
    raise DaemonStartError(f"agentd did not answer on {settings.socket_path} within {settings.start_timeout:g}s")


def wait_stopped(settings: Settings, timeout: float, daemon: ProcessRecord | None = None) -> bool:
    """Wait until no daemon holds the pidfile and the daemon process ``daemon`` has exited."""
    deadline = time.monotonic() + timeout
    while is_locked(settings.pidfile) or (daemon is not None and daemon.alive() is not None):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def run_daemon(settings: Settings, console: bool = False) -> int:
    """Run the daemon in this process until it is told to stop."""
    from . import eventlog
    from .arbiter import Arbiter
    from .pidfile import PidFile

    state = settings.state_path
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    eventlog.configure(settings.log_path, settings.log_level,
                       console=console or settings.log_format == "console" and sys.stderr.isatty())
    pidfile = PidFile(settings.pidfile)
    pidfile.acquire()  # raises AlreadyRunning
    try:
        return asyncio.run(Arbiter(settings).run())
    finally:
        pidfile.release()
