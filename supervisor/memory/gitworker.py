"""The daemon's libgit2 work, done in a helper process it can kill.

Why a process: libgit2 opens what a repository names (an ``include.path``, a
``.gitignore``, a loose ref, an object) with no timeout, and pygit2 holds the
GIL while it does.  A FIFO an agent put in one of those places would block
that open for ever and, with it, every thread of the daemon.  (The git CLI
blocked too, but in a process agentd killed after a minute.)

So the daemon (:func:`isolate`, at its start) sends its git work (WIP saves,
the scope's files, a revert's source, the leftovers' cleanup, every plan's
snapshots, candidates, checkouts and commits, sync's merges) to one helper,
``python -m supervisor.memory.gitworker``: one request at a time, each given at
most :data:`GIT_TIMEOUT`.  A request that does not answer in time kills the
helper and fails with the reason (:class:`~.gitpaths.RepoError`);
the next request starts a fresh helper.  The helper dies with the daemon (its
stdin closes; ``PR_SET_PDEATHSIG`` as well).  The commands a cron job or a
person runs unattended isolate their git work the same way (``agentd sync``,
``agentd wip``, ``agentd decide``): a planted FIFO is an error naming it after
:data:`GIT_TIMEOUT`, never a hang.

Requests name a function of agentd's own (``module:qualname``, under
``supervisor.``) and its arguments; both ways are pickled: the helper is the
daemon's own child, reading nothing else.
"""

from __future__ import annotations

import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")
_HEADER = struct.Struct(">I")
_WORKER: GitWorker | None = None


def _send(fh: BinaryIO, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_HEADER.pack(len(data)) + data)
    fh.flush()


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    out = b""
    while len(out) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, size - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def _recv(fd: int, deadline: float | None = None) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exactly(fd, size, deadline))


class GitWorker:
    """The daemon's side: one helper process, one request at a time (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.started = 0  # helpers started (a killed one is replaced on the next request)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _ensure(self) -> subprocess.Popen[bytes]:
        """The helper, started if need be: its start (an interpreter, libgit2) is not counted in a request's time."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", "supervisor.memory.gitworker", str(os.getpid())],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          cwd="/", close_fds=True)
            self.started += 1
            assert self._proc.stdout is not None
            try:
                ready = _recv(self._proc.stdout.fileno(), time.monotonic() + START_TIMEOUT)
            except TimeoutError:
                raise EOFError(f"it did not start within {START_TIMEOUT:g}s") from None
            if ready != "ready":
                raise EOFError("it did not say it was ready")
        return self._proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    def call(self, fn: Callable[..., T], args: tuple[Any, ...], what: str, timeout: float) -> T:
        """``fn(*args)`` in the helper; its result, or its exception raised here."""
        from .gitpaths import RepoError

        target = f"{fn.__module__}:{fn.__qualname__}"
        with self._lock:
            try:
                proc = self._ensure()
                assert proc.stdin is not None and proc.stdout is not None
                _send(proc.stdin, (target, args))
                ok, value = _recv(proc.stdout.fileno(), time.monotonic() + timeout)
            except TimeoutError:
                self._kill()
                raise RepoError(f"{what}: the repository gave no answer within {timeout:g}s (something in it "
                                "blocks reading, such as a FIFO in .git/ or one named .gitignore); gave up") from None
            except (OSError, EOFError, pickle.PickleError, struct.error) as exc:
                self._kill()
                raise RepoError(f"{what}: agentd's git helper failed ({type(exc).__name__}: {exc})") from None
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def close(self) -> None:
        with self._lock:
            self._kill()


#: The longest the daemon waits for one request to its helper.
GIT_TIMEOUT = 30.0
#: The longest a new helper may take to start (an interpreter and libgit2 on a loaded machine).
START_TIMEOUT = 60.0


def run(fn: Callable[..., T], *args: Any, what: str, timeout: float | None = None) -> T:
    """``fn(*args)``: in the helper when this process isolates its git work (the daemon, and the commands a
    cron job may run: ``agentd sync``, ``wip``, ``decide``), else right here.  ``timeout``: the longest the
    helper may take (a checkout of a large tree may need more than one read of a scope)."""
    helper = _WORKER
    if helper is None:
        return fn(*args)
    return helper.call(fn, args, what, timeout or GIT_TIMEOUT)


def isolate() -> GitWorker:
    """From now on this process (the daemon) does its libgit2 work in a helper (module docstring)."""
    global _WORKER
    if _WORKER is None:
        _WORKER = GitWorker()
    return _WORKER


def worker() -> GitWorker | None:
    """The helper of an isolated process, or None (the work runs in this process)."""
    return _WORKER


def _die_with(parent: int) -> None:
    """SIGKILL when the daemon dies (PR_SET_PDEATHSIG), even killed with -9."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def main(argv: list[str]) -> int:
    """The helper: answer requests on stdin until it closes."""
    if argv:
        _die_with(int(argv[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the daemon's terminal is the daemon's
    fd_in, out = sys.stdin.buffer.fileno(), sys.stdout.buffer
    importlib.import_module("pygit2")  # libgit2 loaded before the first request's clock runs
    _send(out, "ready")
    while True:
        try:
            target, args = _recv(fd_in)
        except EOFError:
            return 0
        module, _, name = target.partition(":")
        try:
            if not module.startswith("supervisor."):
                raise ValueError(f"{target} is not agentd's")
            fn: Any = importlib.import_module(module)
            for part in name.split("."):
                fn = getattr(fn, part)
            reply = (True, fn(*args))
        except Exception as exc:  # noqa: BLE001 - handed back to the daemon, raised there
            mine = type(exc).__module__ in ("builtins", "exceptions") or type(exc).__module__.startswith("supervisor.")
            reply = (False, exc if mine else RuntimeError(f"{type(exc).__name__}: {exc}"))
        try:
            _send(out, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _send(out, (False, RuntimeError(f"{target}: {type(exc).__name__}: {exc}")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
