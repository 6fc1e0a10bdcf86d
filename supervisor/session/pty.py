"""One agent process in a PTY: spawn, read without blocking, type, stop the whole tree.

Mechanism only: no policy about *when* to start or stop lives here.

The agent is spawned with pexpect (ptyprocess underneath), which makes it a
session and process-group leader with the PTY slave as its controlling
terminal.  The daemon then owns the master fd directly: it is put in
non-blocking mode and read on the event loop by the read path
(:class:`~.reader.PtyReader`: batches to the transcript and the listeners,
never pexpect's sleeping helpers).  What is typed is queued and written
without blocking, and remembered (its echo is not the agent's output).  When
a session starts, its unit's older transcripts are pruned off the loop
(:mod:`.retention`).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import secrets
import signal
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import pexpect
import psutil
import ptyprocess

from .process import (ExitInfo, ProcessRecord, is_stopped, kill_group, live_tree, signal_processes)
from .parking import parking_of
from .reader import PtyReader
from .retention import prune
from .transcript import Transcript

#: Bytes of what was typed into the agent that a session remembers (a wakeup is a few KiB).
TYPED_KEEP = 65536


#: Sessions whose PTY is open (spawned, not yet closed): what ``status`` counts, so a leak shows.
_OPEN: weakref.WeakSet[Session] = weakref.WeakSet()


def open_sessions() -> int:
    """How many sessions of this process still hold their PTY master."""
    return len(_OPEN)


class SpawnError(Exception):
    """The agent could not be started; the message says why."""


class SessionEnded(ConnectionError):
    """The session is gone: nothing can be typed into it any more."""


_last_id_us = 0


def new_session_id() -> str:
    """Unique, and sorted by start: ``20261130T143200.123456-1a2b3c``.

    The UTC start to the microsecond, fixed width, so the ids of one unit sort
    in the order their sessions started (``agentd logs`` shows the newest);
    within one process the timestamp only ever increases, even for two
    sessions started in the same microsecond or across a backward clock step.
    The random suffix keeps ids of different processes apart.
    """
    global _last_id_us
    now_us = max(time.time_ns() // 1000, _last_id_us + 1)
    _last_id_us = now_us
    seconds, micros = divmod(now_us, 1_000_000)
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(seconds))}.{micros:06d}-{secrets.token_hex(3)}"


def _child_setup() -> None:  # pragma: no cover - runs in the forked child
    # Python ignores SIGPIPE and SIGXFSZ; agents must get the defaults back
    # (what subprocess's restore_signals does).
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class ChildStep(Protocol):
    """One step run in the forked child before exec (a cgroup join, a Landlock fence).

    Prepared in the parent; in the child only syscalls on ``fds`` (kept open
    across the fork: ptyprocess closes every other descriptor before the
    steps run).  Raising ``OSError`` fails the spawn with that message.
    ``close()`` releases the parent's copies after the spawn.
    """

    fds: tuple[int, ...]

    def __call__(self) -> None: ...

    def close(self) -> None: ...


class _Spawn(pexpect.spawn):
    """pexpect.spawn that keeps ``pass_fds`` open in the child for the :class:`ChildStep` s."""

    def __init__(self, *args: object, pass_fds: tuple[int, ...] = (), **kwargs: object) -> None:
        self._pass_fds = pass_fds
        super().__init__(*args, **kwargs)

    def _spawnpty(self, args: list[str], **kwargs: object) -> ptyprocess.PtyProcess:
        return ptyprocess.PtyProcess.spawn(args, pass_fds=self._pass_fds, **kwargs)


class Session(PtyReader):
    """One running agent: its process, its PTY master, its transcript."""

    def __init__(
        self,
        unit: str,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        rows: int,
        cols: int,
        transcript_dir: Path,
        redact_env: Mapping[str, str],
        session_id: str | None = None,
        keep: int = 0,
    ) -> None:
        self.unit = unit
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.rows = rows
        self.cols = cols
        self.session_id = session_id or new_session_id()
        self.transcript = Transcript(transcript_dir, self.session_id, redact_env, cols=cols)
        self.keep = keep  # the unit's sessions whose transcripts are kept (0: every one; see .retention)
        self.pid: int = 0
        self.create_time: float = 0.0
        self.started_at: float = 0.0  # monotonic
        self.started_wall: float = 0.0
        self.exit: ExitInfo | None = None
        self.eof = False
        self.last_output_at: float = 0.0
        self.tree: dict[int, ProcessRecord] = {}
        self._child: pexpect.spawn | None = None
        self._fd: int = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outbuf = bytearray()
        self._writer_registered = False
        self._listeners: list[Callable[[bytes], None]] = []
        self._output_listeners: list[Callable[[bytes], None]] = []
        self._last_read_at: float = 0.0  # monotonic time of the last wakeup that read something
        self._input_at: float = float("-inf")  # monotonic time input was last queued (see parking.slow_stream)
        self._typed = bytearray()  # the last TYPED_KEEP bytes typed into the agent (its echo is not its output)

    # -- start ------------------------------------------------------------------
    def spawn(self, child_steps: Sequence[ChildStep] = ()) -> None:
        """Fork the agent in a new PTY.  Raises :class:`SpawnError`.

        ``child_steps`` run in the child, in order, after the signal reset and
        before exec (the containment's join first, then the fence); the
        parent's copies of their descriptors are closed here either way.
        """
        steps = tuple(child_steps)

        def preexec() -> None:  # pragma: no cover - runs in the forked child
            _child_setup()
            for step in steps:
                step()

        try:
            child = _Spawn(
                self.argv[0],
                self.argv[1:],
                env=self.env,
                cwd=str(self.cwd),
                dimensions=(self.rows, self.cols),
                echo=True,
                preexec_fn=preexec if steps else _child_setup,
                pass_fds=tuple(fd for step in steps for fd in step.fds),
            )
        except (pexpect.ExceptionPexpect, OSError) as exc:
            self.transcript.close()
            from .fdlimit import exhaustion  # what really ran out ("out of pty devices" hides EMFILE)

            raise SpawnError(f"cannot start {self.argv[0]!r}: {exhaustion(exc) or exc}") from None
        finally:
            for step in steps:
                step.close()
        child.ptyproc.delayafterclose = 0
        child.ptyproc.delayafterterminate = 0
        self._child = child
        self._fd = child.child_fd
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self.pid = child.pid
        self.started_at = time.monotonic()
        self.started_wall = time.time()
        self.last_output_at = self.started_at
        try:
            self.create_time = psutil.Process(self.pid).create_time()
        except psutil.NoSuchProcess:  # already gone; the reaper will see it
            self.create_time = 0.0
        self.tree[self.pid] = ProcessRecord(self.pid, self.create_time)
        _OPEN.add(self)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start reading the PTY on ``loop``; prune the unit's older transcripts off it (:mod:`.retention`)."""
        self._loop = loop
        if self._fd >= 0 and not self.eof:
            loop.add_reader(self._fd, self._on_readable)
        if self.keep > 0:
            loop.run_in_executor(None, prune, self.transcript.directory, self.keep, self.session_id)

    # -- input ------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """Queue ``data`` for the agent's terminal; never blocks the loop."""
        if self._fd < 0 or self.exit is not None:
            raise SessionEnded("the session is not running")
        self._outbuf += data
        self._input_at = time.monotonic()
        self._typed += data
        del self._typed[:-TYPED_KEEP]
        self._flush_input()

    def typed(self, text: str) -> bool:
        """``text`` (a line of output) is part of what was typed into the agent lately (a wakeup, a message):
        the terminal echoes it back, so a "Permission denied" line in it is the last session's, or a person's,
        never this agent's."""
        return bool(text) and text.encode() in self._typed

    def _flush_input(self) -> None:
        while self._outbuf:
            try:
                written = os.write(self._fd, self._outbuf[:4096])
            except BlockingIOError:
                break
            except OSError:
                self._outbuf.clear()
                break
            del self._outbuf[:written]
        if self._loop is None:
            return
        if self._outbuf and not self._writer_registered:
            self._loop.add_writer(self._fd, self._flush_input)
            self._writer_registered = True
        elif not self._outbuf and self._writer_registered:
            self._loop.remove_writer(self._fd)
            self._writer_registered = False

    def resize(self, rows: int, cols: int) -> None:
        if self._child is not None and self.exit is None:
            self._child.setwinsize(rows, cols)
            self.rows, self.cols = rows, cols
            self.transcript.resize(cols)

    # -- process tree -----------------------------------------------------------

    def signal_tree(self, sig: int) -> None:
        """Send ``sig`` to the process group and every recorded member of the tree."""
        kill_group(self.pid, sig)
        signal_processes(live_tree(self.tree.values()), sig)

    def alive_tree(self) -> list[psutil.Process]:
        return live_tree(self.tree.values())

    def stopped(self) -> bool:
        """True while the leader is stopped (SIGSTOP, a tracer)."""
        return bool(self.pid) and self.exit is None and is_stopped(self.pid)

    def stats(self) -> tuple[float, int]:
        """CPU seconds (user+system) and RSS bytes of the whole live tree."""
        cpu = 0.0
        rss = 0
        for proc in self.alive_tree():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    cpu += times.user + times.system
                    rss += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return cpu, rss

    # -- end --------------------------------------------------------------------
    def reap(self) -> ExitInfo | None:
        """Collect the leader's exit status if it has exited (non-blocking)."""
        if self.exit is not None:
            return self.exit
        if not self.pid:
            return None
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.exit = ExitInfo(code=None)
            return self.exit
        if pid == 0:
            return None
        self.exit = ExitInfo.from_wait_status(status)
        if self._child is not None:
            self._child.ptyproc.terminated = True
            self._child.ptyproc.status = status
        return self.exit

    def close(self) -> None:
        """Drain, stop reading, close the master and the transcript (idempotent)."""
        if self._loop is not None:
            parking_of(self._loop).unpark(self)
        if self._fd >= 0:
            self.drain()
            if self._loop is not None:
                if not self.eof:
                    self._loop.remove_reader(self._fd)
                if self._writer_registered:
                    self._loop.remove_writer(self._fd)
                    self._writer_registered = False
            fd, self._fd = self._fd, -1
            if self._child is not None:
                # Our reaper owns the pid; ptyprocess must only close the fd.
                self._child.ptyproc.terminated = True
                try:
                    self._child.ptyproc.fileobj.close()
                except OSError:
                    pass
                self._child.ptyproc.closed = True
                self._child.closed = True
            else:
                os.close(fd)
        _OPEN.discard(self)
        self._output(self.transcript.flush())
        self.transcript.close()

    def record(self) -> dict[str, object]:
        """What the daemon persists so a later daemon can find leftovers."""
        return {
            "session": self.session_id,
            "pid": self.pid,
            "create_time": self.create_time,
            "pgid": self.pid,
            "tree": [[r.pid, r.create_time] for r in self.tree.values()],
        }

    @property
    def uptime(self) -> float:
        return time.monotonic() - self.started_at if self.started_at else 0.0
