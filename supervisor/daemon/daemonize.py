"""Start the daemon: in the foreground (:func:`run_daemon`, for systemd), or in the background
(:func:`spawn_daemon`) waiting until it answers, or saying why it could not.

``agentd start`` runs ``python -m supervisor start --foreground --detached``
in a new session (so it survives the terminal), with its early output going to
``agentd.err`` in the state directory, and returns only when the control
socket answers a ping.  If the daemon exits first, its error output is the
error message; if it answers with an error, that error is; if it never
answers, the last error it logged is named.

Before anything else the daemon checks the open-file limit
(:func:`check_fd_limit`): below what its units and control connections need,
it raises the soft limit up to the hard one, and where even that is too low it
exits at once saying so, rather than failing later in ``accept()``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..control.client import ControlError, DaemonNotRunning, call
from ..session.process import ProcessRecord
from .pidfile import is_locked

if TYPE_CHECKING:  # pragma: no cover - the command line's `start` loads no pydantic
    from ..config.paths import PlainPaths
    from ..config.settings import Settings


class DaemonStartError(Exception):
    pass


def check_fd_limit(settings: Settings) -> None:
    """Make sure the open-file limit covers the units and the control connections; FdLimitTooLow if it cannot."""
    from ..config.units import unit_files
    from ..control.server import Limits
    from ..session.fdlimit import ensure_fd_limit, fds_needed

    ensure_fd_limit(fds_needed(len(unit_files(settings.units_path)), Limits().descriptors))


def _last_error(settings: Settings) -> str | None:
    """The newest error the daemon logged (agentd.log), for a start that never answered."""
    import json

    try:
        with open(settings.log_path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("level") == "error":
            return f"{event.get('event')}: {event.get('detail') or event.get('error') or ''}".rstrip(": ")
    return None


def spawn_daemon(settings: Settings | PlainPaths, config: Path | None) -> int:
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
            message = detail[-1].removeprefix("agentd: ") if detail else f"exit code {code}"
            raise DaemonStartError(f"agentd could not start: {message} (see {err_path})")
        try:
            reply = call(settings.socket_path, "ping", timeout=2.0)
            return int(reply["pid"])
        except ControlError as exc:  # it runs, but refuses (out of descriptors, too many connections)
            proc.terminate()
            raise DaemonStartError(f"agentd could not start: it answered {exc} (see {settings.log_path})") from None
        except (DaemonNotRunning, OSError):
            time.sleep(0.05)
    proc.terminate()
    last = _last_error(settings)
    why = f"; its last error: {last}" if last else ""
    raise DaemonStartError(f"agentd did not answer on {settings.socket_path} within {settings.start_timeout:g}s{why} "
                           f"(see {settings.log_path} and {err_path})")


def wait_stopped(settings: Settings, timeout: float, daemon: ProcessRecord | None = None) -> bool:
    """Wait until no daemon holds the pidfile and the daemon process ``daemon`` has exited."""
    deadline = time.monotonic() + timeout
    while is_locked(settings.pidfile) or (daemon is not None and daemon.alive() is not None):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def run_daemon(settings: Settings, console: bool = False, dashboard: Callable[[Any], Any] | None = None) -> int:
    """Run the daemon in this process until it is told to stop; ``dashboard`` builds the dashboard it hosts
    from the daemon (:class:`~.views.Dashboard`; the command line passes :func:`supervisor.web.host.dashboard`)."""
    from . import eventlog
    from .arbiter import Arbiter
    from .pidfile import PidFile

    from ..session.fdlimit import FdLimitTooLow

    try:
        check_fd_limit(settings)
    except FdLimitTooLow as exc:
        print(f"agentd: {exc}", file=sys.stderr, flush=True)
        return 1
    state = settings.state_path
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    eventlog.configure(settings.log_path, settings.log_level,
                       console=console or settings.log_format == "console" and sys.stderr.isatty())
    pidfile = PidFile(settings.pidfile)
    pidfile.acquire()  # raises AlreadyRunning
    try:
        return asyncio.run(_main(Arbiter(settings, dashboard=dashboard)))
    finally:
        pidfile.release()


async def _main(arbiter: Any) -> int:
    """The daemon's loop, its own errors (an exception in a callback) going to the rate-limited event log."""
    from .eventlog import loop_exception_handler

    asyncio.get_running_loop().set_exception_handler(loop_exception_handler)
    return int(await arbiter.run())
