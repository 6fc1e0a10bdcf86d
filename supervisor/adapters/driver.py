"""The agent as the supervisor drives it: launch a session, type, wait for turn ends, quit.

:func:`launch` puts one session of a unit on its feet: the environment, the
adapter's :class:`~supervisor.adapters.base.Launch` (argv, env, where the
wakeup goes), the PTY (:class:`~supervisor.session.pty.Session`), the turn
watcher fed from the PTY.  The result is a :class:`Driver`, the only handle
the rest of the supervisor holds on a running agent:

* :meth:`Driver.type` types a message the way the agent wants it (the
  adapter's encoder, which makes the text safe) and tells the watcher;
* :meth:`Driver.wait_turns` / :meth:`Driver.wait_ready` wait for turn ends
  (and for a person at an attached terminal to stop typing), never past a
  deadline and never after the agent exited;
* :meth:`Driver.quit` types the adapter's quit keys and stops as soon as the
  process is gone; :meth:`Driver.end` then ends every process the session
  started, through the daemon's containment (:mod:`supervisor.adapters.confine`:
  its cgroup, or the subreaper's records), which also gives the session's CPU
  and memory figures and, for a fenced session, the writes the kernel refused.

The continuity cycle (:mod:`supervisor.continuity.cycle`) and the unit
supervisor depend on this small surface only, so both are tested with a fake
driver and a fake clock.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config.environment import agent_environment
from ..config.units import command_problem
from ..session.cgroup import project_key
from ..session.containment import Containment
from ..session.process import ExitInfo
from ..session.pty import Session, SpawnError, new_session_id
from ..trail.records import write_link
from . import confine
from .base import Adapter, Blocked, ContextFigure, Keystrokes, Launch, Meaning, TurnWatcher, safe_text
from .confine import Confined

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import psutil

    from ..config.settings import Settings
    from ..config.units import UnitSpec

__all__ = ["Driver", "SpawnError", "launch"]


def _never() -> bool:
    return False


@dataclass
class Driver:
    """One running session of a unit (see the module docstring)."""

    session: Session
    adapter: Adapter
    watcher: TurnWatcher
    launched: Launch
    confined: Confined
    clock: Callable[[], float] = time.monotonic
    #: True while a person types in an attached terminal (agentd holds its own typing back).
    person_typing: Callable[[], bool] = field(default=_never)
    _linked: Path | None = field(default=None, init=False, repr=False)  # the record linked (link_record)

    # -- identity and figures ------------------------------------------------------
    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def pid(self) -> int:
        return self.session.pid

    @property
    def exit(self) -> ExitInfo | None:
        return self.session.exit

    @property
    def exited(self) -> bool:
        return self.session.exit is not None

    @property
    def idle(self) -> bool:
        return self.watcher.idle

    @property
    def turns_ended(self) -> int:
        return self.watcher.turns_ended

    @property
    def activity(self) -> object:
        """What changes whenever the session shows something new: its output, a turn begun or ended
        (the daemon's watch looks again at a session only then, or when something is due by time)."""
        watcher = self.watcher
        return (self.session.last_output_at, watcher.state, watcher.turns_ended, watcher.submitted_at)

    @property
    def uptime(self) -> float:
        return self.session.uptime

    @property
    def argv(self) -> list[str]:
        return self.session.argv

    @property
    def env(self) -> Mapping[str, str]:
        """The agent's environment (its secret values are redacted from whatever agentd writes)."""
        return self.session.env

    @property
    def transcript_bytes(self) -> int:
        """Bytes of (redacted) output written to the transcript so far."""
        return self.session.transcript.raw_bytes

    @property
    def transcript_problem(self) -> str | None:
        """Why the transcript is not being written (a full disk, say), or None."""
        return self.session.transcript.problem

    @property
    def transcript_path(self) -> str:
        """The clean transcript (``.txt``)."""
        return str(self.session.transcript.text_path)

    def reap(self) -> ExitInfo | None:
        """The leader's exit once it has exited (non-blocking), else None."""
        return self.session.reap()

    def record(self) -> dict[str, object]:
        """What ``agents.json`` keeps of this session (pid, start time, process group, cgroup, tree)."""
        return {**self.session.record(), **self.confined.record()}

    def stats(self) -> tuple[float, int]:
        """CPU seconds and memory bytes of everything the session ran (blocking: the cgroup or /proc)."""
        usage = self.confined.usage()
        return usage.cpu_seconds, usage.memory_bytes

    @property
    def fenced(self) -> bool:
        """True when the kernel fence holds the session's writes to its scope."""
        return self.confined.fenced

    def refusals(self) -> list[Path]:
        """Writes the fence refused since the last call, as absolute paths, each once (blocking)."""
        return self.confined.refusals(self.session, self.adapter)

    def send_raw(self, data: bytes) -> None:
        """Bytes to the terminal as they are (``agentd send --raw``)."""
        self.session.send(data)

    @property
    def silent_for(self) -> float:
        """Seconds since the agent last printed anything."""
        return self.clock() - self.session.last_output_at

    def context(self) -> ContextFigure | None:
        """Context use now, or None when the adapter cannot tell (never raises).  Each second: also links
        the agent's own record once the adapter knows it (:meth:`link_record`)."""
        try:
            figure = self.adapter.context(self.session)
        except Exception:  # noqa: BLE001 - a broken meter must not stop supervision
            figure = None
        self.link_record()
        return figure

    def link_record(self) -> None:
        """Write ``SESSION.record`` beside the transcript when the agent's record is new (never raises)."""
        try:
            record = self.adapter.record(self.session)
            if record is None or record == self._linked:
                return
            self._linked = record
            write_link(self.session.transcript.text_path, self.adapter.kind, record)
        except Exception:  # noqa: BLE001 - the link serves the event index only (it is tried again next time)
            self._linked = None

    def failure(self) -> str | None:
        """Why the session cannot go on although its process runs, or None."""
        return self.adapter.failure(self.session)

    def blocked(self) -> Blocked | None:
        """A blocking screen the agent shows (trust, login, an approval prompt ...), or None (never raises)."""
        try:
            return self.adapter.blocked(self.session)
        except Exception:  # noqa: BLE001 - a broken screen probe must not stop supervision
            return None

    def process_stopped(self) -> bool:
        """True while the agent's process is stopped (SIGSTOP): it cannot take a turn."""
        return self.session.stopped()

    def tail(self, n_bytes: int) -> str:
        """The last ``n_bytes`` of the clean transcript ("" when unreadable)."""
        try:
            return self.session.transcript.tail(n_bytes)
        except OSError:
            return ""

    def trail(self) -> Any:
        """The agent's own trail of this session (the adapter's, blocking: run it in a thread), or None."""
        return self.adapter.trail(self.session)

    def written(self, path: Path) -> str | None:
        """The agent wrote ``path`` (the scope watcher saw it): what to tell it at its next turn end, or None."""
        return self.adapter.written(self.session, path)

    def on_agent_event(self, event: Mapping[str, Any]) -> list[Meaning]:
        """An event from the agent itself; a turn end goes to the watcher here."""
        meanings = self.adapter.on_agent_event(self.session, event)
        if Meaning.TURN_END in meanings:
            self.watcher.turn_ended()
        return meanings

    def hook_output(self, event: Mapping[str, Any], meanings: list[Meaning], wakeup: str | None) -> str | None:
        """What ``agentd notify`` prints back to the agent (a hook's answer), if anything."""
        return self.adapter.hook_output(event, meanings, wakeup)

    # -- typing ---------------------------------------------------------------------
    async def send_keys(self, keys: Keystrokes) -> None:
        """Write ``keys`` with their pauses (SessionEnded once the session is gone)."""
        for data, pause in keys.steps:
            self.session.send(data)
            if pause:
                await asyncio.sleep(pause)

    async def type_unsubmitted(self, text: str) -> None:
        """Type ``text`` (made safe) without submitting it (``agentd send --no-enter``)."""
        self.session.send(safe_text(text).encode())

    async def type(self, text: str) -> None:
        """Type ``text`` as one message (made safe by the adapter's encoder) and mark the turn busy."""
        self.watcher.typing()
        await self.send_keys(self.adapter.encode(self.adapter.outgoing(self.session, text)))
        self.watcher.submitted()

    async def interrupt(self) -> None:
        await self.send_keys(self.adapter.interrupt())

    # -- waiting --------------------------------------------------------------------
    async def wait_turns(self, count: int, deadline: float) -> bool:
        """Wait until ``count`` turns have ended; False at the deadline or when the agent exits."""
        while not self.exited:
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            if await self.watcher.wait_turns(count, min(remaining, 0.5)):
                return True
        return False

    async def wait_ready(self, deadline: float, activity: Callable[[str], None] = lambda _s: None) -> bool:
        """Wait until the turn has ended and no person is typing; False at the deadline or on exit."""
        while not self.exited and self.clock() < deadline:
            self.watcher.tick()
            if self.person_typing():
                activity("waiting: a person is typing in an attached terminal")
            elif not self.watcher.idle:
                activity("waiting for the agent's turn to end")
            else:
                return True
            await self.watcher.wait_change(min(self.watcher.next_wait(0.1), max(0.0, deadline - self.clock())))
        return False

    # -- ending ---------------------------------------------------------------------
    async def quit(self, poll: float = 0.01) -> None:
        """Type the adapter's quit keys, stopping as soon as the process has exited."""
        for data, pause in self.adapter.quit().steps:
            if self.exited:
                return
            try:
                self.session.send(data)
            except ConnectionError:
                return
            end = self.clock() + max(pause, poll)
            while self.clock() < end:
                if self.session.reap() is not None:
                    return
                await asyncio.sleep(poll)

    async def end(self, timeout: float, graceful: bool) -> list[int]:
        """End the session: the adapter's quit keys when ``graceful``, then TERM to every process it
        started (its cgroup, or what the subreaper found), wait ``timeout``, KILL, then whatever is left.
        Returns the pids that needed KILL."""
        if graceful and not self.exited:
            await self.quit()
        ended = await self.confined.end(timeout)
        deadline = self.clock() + 10.0
        while self.session.reap() is None and self.clock() < deadline:
            await asyncio.sleep(0.02)
        return list(ended.killed)

    def leftovers(self) -> list[psutil.Process]:
        """What of the session still runs (after the leader exited; blocking)."""
        return self.confined.processes()

    async def end_leftovers(self, timeout: float) -> list[int]:
        """The leader is gone: end whatever the session left running, then release it."""
        ended = await self.confined.end(timeout)
        self.confined.release()
        return list(ended.killed)

    def close(self) -> None:
        """Close the PTY and the transcript; release the containment when nothing of the session is left."""
        self.session.close()
        if not self.confined.processes():
            self.confined.release()


def launch(
    spec: UnitSpec,
    settings: Settings,
    adapter: Adapter,
    wakeup: str | None,
    loop: asyncio.AbstractEventLoop,
    *,
    containment: Containment,
    clock: Callable[[], float] = time.monotonic,
    person_typing: Callable[[], bool] = _never,
    environ: Mapping[str, str] | None = None,
) -> Driver:
    """Start a fresh session of ``spec`` whose agent starts from ``wakeup``; raises SpawnError.

    ``launched.first_input`` tells the caller whether the wakeup still has to be
    typed as the first message (it may already be in argv or a system prompt).
    The session joins ``containment`` before its agent runs, and is fenced when
    the unit gets the fence (:mod:`supervisor.adapters.confine`).
    """
    environ = os.environ if environ is None else environ
    root = settings.project_root
    problem = command_problem(spec, root, environ.get("PATH", ""))
    if problem is not None:
        raise SpawnError(problem)
    session_id = new_session_id()
    env = agent_environment(spec, settings, session_id, environ)
    try:
        launched = adapter.launch(wakeup, session_id, env)
    except (OSError, ValueError) as exc:
        raise SpawnError(f"cannot prepare the {spec.agent.kind} session: {exc}") from None
    env.update(launched.env)
    planned = confine.plan(spec, settings, adapter, env, project_key(settings.state_path))
    try:
        session = Session(
            spec.name,
            list(launched.argv),
            env=env,
            cwd=spec.workdir_path(root),
            rows=spec.agent.rows,
            cols=spec.agent.cols,
            transcript_dir=settings.transcripts_path / spec.name,
            redact_env=env,
            session_id=session_id,
            keep=settings.transcript_keep,
        )
    except OSError as exc:  # the transcript files: EROFS, EMFILE, ENOSPC ...
        planned.discard()
        raise SpawnError(f"cannot open the transcript under {settings.transcripts_path / spec.name}: "
                         f"{exc.strerror or exc}") from None
    confined = confine.spawn(session, spec, containment, planned)
    watcher = adapter.watcher(session)
    session.add_listener(watcher.feed)
    session.attach(loop)
    return Driver(session, adapter, watcher, launched, confined, clock=clock, person_typing=person_typing)

