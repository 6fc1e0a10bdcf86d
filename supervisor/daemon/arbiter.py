"""The arbiter: one event loop that owns every agent's PTY.

Signal handlers only enqueue; the loop drains the queue and reconciles what
each unit should be with what it is.  Each unit has one explicit state
(:class:`~supervisor.daemon.lifecycle.UnitState`) and moves only along the transition
table.  Policy (backoff, start limit) comes from :mod:`supervisor.daemon.lifecycle`;
mechanism (PTY, signals, process trees) from :mod:`supervisor.session.pty`.

What happens to agents when the daemon dies: a PTY agent is a session leader
whose controlling terminal is the PTY; when the daemon dies, the last handle
to the master closes and the kernel sends SIGHUP to the agent's session, so
most agents die with it.  Agents that ignore SIGHUP, and anything they
started in a new session, would survive; the daemon therefore records every
agent's pid, start time and process group in ``agents.json`` in the state
directory, and the next ``agentd start`` ends whatever of those is still
alive (checked by start time, so a reused pid is never hit) before it starts
the units again.  Under systemd (``KillMode=mixed``), the whole cgroup is
cleaned up as well.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import structlog

from .. import __version__
from ..adapters.base import Adapter, ContextFigure, Keystrokes, TurnWatcher
from ..continuity.policy import PERSON_IDLE, checkpoint_prompt, due
from ..continuity.records import CycleRecord, append_history
from ..continuity.wakeup import Wakeup as WakeupText
from ..continuity.wakeup import unit_wakeup
from ..durable import append_jsonl, write_json
from ..control.server import Command, ControlError, ControlServer
from .lifecycle import GiveUp, Restart, RestartTracker, StayDown, UnitState, check_transition
from ..config.environment import agent_environment
from .pidfile import PidFile
from ..schedule import UnitScheduler, UsageLimit, usage_limit
from .sdnotify import Notifier
from ..session.pty import Session, SpawnError, new_session_id
from ..session.process import ExitInfo, ProcessRecord, children_map, end_processes, group_members, live_tree
from ..config.settings import Settings
from ..session.transcript import read_tail
from ..config.units import UnitError, UnitSpec, command_problem, load_units, start_order

log = structlog.get_logger("agentd")

S = UnitState

#: Seconds between scans of a streaming agent's new output for usage-limit messages.
USAGE_SCAN_EVERY = 3.0
#: Seconds between records of each agent's process tree (for cleanup after a
#: crash of the agent or of the daemon; a stop always takes a fresh snapshot).
TREE_REFRESH = 30.0


@dataclass
class Unit:
    """Runtime state of one unit (the spec is what it should be)."""

    spec: UnitSpec
    tracker: RestartTracker
    state: UnitState = S.INACTIVE
    session: Session | None = None
    restarts: int = 0
    last_exit: ExitInfo | None = None
    last_session: str | None = None
    reason: str | None = None
    next_start_at: float | None = None  # wall clock, for status
    timer: asyncio.TimerHandle | None = None
    commanded_stop: bool = False
    stop_task: asyncio.Task[None] | None = None
    stats: tuple[float, int] = (0.0, 0)
    viewers: int = 0  # attached viewers (agentd attach)
    person_input_at: float = 0.0  # monotonic time a person last typed through attach
    adapter: Adapter | None = None
    watcher: TurnWatcher | None = None
    #: The lifecycle operation in progress (start, checkpoint); one at a time.
    op: asyncio.Task[Any] | None = None
    #: The wakeup delivery of the current session (typing it as the first message).
    delivery: asyncio.Task[Any] | None = None
    wakeup_state: str | None = None  # pending | delivered (via ...) | failed: ...
    activity: str | None = None  # what agentd is waiting for, for status
    sends: deque[str] = field(default_factory=deque)
    context: ContextFigure | None = None
    last_cycle: dict[str, Any] | None = None
    checkpoint_marker: dict[str, Any] | None = None
    last_wakeup: WakeupText | None = None
    failure: str | None = None  # why the adapter says the current session cannot go on
    run_started_at: float | None = None  # monotonic: when this run began (not reset by respawns)
    violations: int = 0
    usage_scan_at: int = 0  # transcript bytes already scanned for usage-limit messages
    usage_scanned_at: float = 0.0  # monotonic time of that scan

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def busy(self) -> bool:
        """True while a start or checkpoint operation runs."""
        return self.op is not None and not self.op.done()


@dataclass
class Arbiter:
    """The daemon.  ``run()`` returns the process exit code."""

    settings: Settings
    console: bool = False
    clock: Callable[[], float] = time.monotonic
    units: dict[str, Unit] = field(default_factory=dict)
    load_errors: list[UnitError] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._shutdown_started = False
        self._done = asyncio.Event()
        self._started_wall = time.time()
        self._notifier = Notifier()
        self._server: ControlServer | None = None
        self._stats_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._scheduler: UnitScheduler | None = None
        self._guard: Any = None  # scopeguard.ChangeWatcher while units run
        self._own_writes: dict[str, str] = {}  # path -> digest of what a revert wrote
        self._spawned_at: float | None = None  # a session started since the last tree record

    # ------------------------------------------------------------------ run
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._loop = loop
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            loop.add_signal_handler(sig, self._events.put_nowait, ("signal", sig))
        await self._end_leftovers()
        self._ensure_store()
        self._scheduler = UnitScheduler(self.settings.state_path, self._scheduled)
        self._scheduler.start()
        catch_up = self._load()
        self._server = ControlServer(self.settings.socket_path, self._command_table())
        await self._server.start()
        log.info("daemon_started", pid=os.getpid(), version=__version__, root=str(self.settings.project_root))
        self._spawn_task(self._ticker())
        # Starting units waits on agents (ordering, readiness); signals and exits
        # must keep flowing meanwhile, so it is a task beside the event queue.
        self._maybe_start_guard()
        startup = self._spawn_task(self._start_all(catch_up))
        startup.add_done_callback(lambda _t: self._notifier.ready(self._summary()))
        while not self._done.is_set():
            kind, payload = await self._events.get()
            if kind == "signal":
                self._handle_signal(payload)
            elif kind == "stop":
                break
        await self._server.close()
        self._scheduler.shutdown()
        if self._guard is not None:
            await asyncio.to_thread(self._guard.stop)
        log.info("daemon_stopped", pid=os.getpid())
        return 0

    def _spawn_task(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("task_failed", task=task.get_coro().__qualname__, error=f"{type(exc).__name__}: {exc}",
                      exc_info=exc)

    def _handle_signal(self, sig: int) -> None:
        if sig == signal.SIGCHLD:
            self._reap()
        elif sig in (signal.SIGTERM, signal.SIGINT):
            log.info("signal_received", signal=signal.Signals(sig).name, action="shutdown")
            self._spawn_task(self.shutdown())
        elif sig == signal.SIGHUP:
            log.info("signal_received", signal="SIGHUP", action="reload")
            self._spawn_task(self.reload())

    async def _ticker(self) -> None:
        """Once a second: reap (a SIGCHLD may be coalesced), watchdog ping, persist trees."""
        watchdog = self._notifier.watchdog_interval
        last_ping = 0.0
        last_tree = 0.0
        while True:
            await asyncio.sleep(1.0)
            now = self.clock()
            if watchdog and now - last_ping >= watchdog:
                self._notifier.watchdog()
                last_ping = now
            try:
                self._reap()
                self._watch_contexts()
                fresh = self._spawned_at is not None and now - self._spawned_at >= 2.0
                if now - last_tree >= TREE_REFRESH or fresh:
                    last_tree = now
                    self._spawned_at = None
                    await self._refresh_trees()
            except Exception as exc:  # noqa: BLE001 - one bad tick must not end supervision
                log.error("tick_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)

    # ------------------------------------------------------------ leftovers
    @property
    def _agents_file(self) -> Path:
        return self.settings.state_path / "agents.json"

    def _persist_agents(self) -> None:
        data = {}
        for unit in self.units.values():
            if unit.session is not None:
                data[unit.name] = {**unit.session.record(), "module": unit.spec.module,
                                   "checkpoint": unit.checkpoint_marker}
        write_json(self._agents_file, data, mode=0o600, indent=None)

    async def _end_leftovers(self) -> None:
        """End agent processes recorded by a previous daemon that died without stopping them."""
        try:
            data = json.loads(self._agents_file.read_text())
        except (OSError, ValueError):
            return
        procs: list[psutil.Process] = []
        for unit, rec in data.items():
            if isinstance(rec.get("checkpoint"), dict):
                await self._finish_interrupted_checkpoint(unit, rec)
            records = [ProcessRecord(int(p), float(t)) for p, t in rec.get("tree", [])]
            found = live_tree(records)
            group = group_members(int(rec.get("pgid", 0)), float(rec.get("create_time", 0)))
            found.extend(p for p in group if p.pid not in {f.pid for f in found})
            if found:
                log.warning("leftover_agents", unit=unit, session=rec.get("session"), pids=[p.pid for p in found])
                procs.extend(found)
        if procs:
            await end_processes(procs, self.settings.stop_timeout, clock=self.clock)
            log.info("leftover_agents_ended", count=len(procs))
        self._agents_file.unlink(missing_ok=True)

    async def _refresh_trees(self) -> None:
        running = [u.session for u in self.units.values() if u.session is not None and u.session.exit is None]
        if not running:
            return
        def refresh() -> None:
            cmap = children_map()
            for session in running:
                session.refresh_tree(cmap)

        await asyncio.to_thread(refresh)
        self._persist_agents()

    # ---------------------------------------------------------------- units
    def _ensure_store(self) -> None:
        """Scaffold .agent/ (idempotent, never overwrites): checkpoints and wakeups live there."""
        from ..memory import init_store

        try:
            created = init_store(self.settings.project_root)
        except OSError as exc:
            log.error("memory_store_unavailable", error=str(exc))
            return
        if created:
            log.info("memory_store_created", files=[str(p) for p in created])

    def _load(self) -> dict[str, list[tuple[str, bool]]]:
        """Read the unit files; return the schedules' catch-up runs."""
        specs, errors = load_units(self.settings.units_path, self.settings.project_root)
        specs, overlap_errors = self._refuse_overlaps(specs)
        self.load_errors = errors + overlap_errors
        for err in self.load_errors:
            log.error("unit_invalid", path=str(err.path), error=err.message)
        for name in start_order(specs):
            self.units[name] = self._new_unit(specs[name])
        return {name: self._schedule(self.units[name]) for name in start_order(specs)}

    async def _start_all(self, catch_up: dict[str, list[tuple[str, bool]]]) -> None:
        names = list(self.units)
        await self._start_in_order([n for n in names if self.units[n].spec.unit.enabled], "enabled at daemon start")
        for name, runs in catch_up.items():
            for action, missed in runs:
                await self._scheduled(name, action, missed)

    def _refuse_overlaps(self, specs: dict[str, UnitSpec]) -> tuple[dict[str, UnitSpec], list[UnitError]]:
        """Two enabled units whose writable scopes overlap are both refused (unless shared)."""
        try:
            from ..scope.rules import overlaps
        except ImportError:  # pragma: no cover - the scope guard ships with the package
            return specs, []
        from ..memory.gitfiles import list_files

        enabled = [s for s in specs.values() if s.unit.enabled and s.scope.paths]
        if len(enabled) < 2:
            return specs, []
        try:
            files = list_files(self.settings.project_root, ["**"], limit=20000)
        except Exception:  # noqa: BLE001 - fall back to synthetic examples
            files = []
        errors: list[UnitError] = []
        refused: set[str] = set()
        for i, a in enumerate(enabled):
            for b in enabled[i + 1:]:
                example = overlaps(a.scope, b.scope, files)
                if example is None:
                    continue
                for spec, other in ((a, b), (b, a)):
                    refused.add(spec.name)
                    errors.append(UnitError(spec.path, (
                        f"[scope] paths overlap with unit {other.name!r} ({other.path.name}): both may write "
                        f"{example!r}; make the scopes disjoint, or list the overlap in [scope] shared of both units")))
        return {n: s for n, s in specs.items() if n not in refused}, errors

    def _schedule(self, unit: Unit) -> list[tuple[str, bool]]:
        if self._scheduler is None:
            return []
        sched = unit.spec.schedule
        if not (sched.start or sched.stop):
            self._scheduler.remove_unit(unit.name)
            return []
        return self._scheduler.set_unit(unit.name, sched)

    async def _scheduled(self, name: str, action: str, missed: bool) -> None:
        unit = self.units.get(name)
        if unit is None:
            return
        log.info("schedule_fired", unit=name, action=action, missed=missed)
        if action == "start":
            if unit.state in (S.INACTIVE, S.FAILED, S.BACKOFF, S.WAITING):
                await self._start_in_order([name], "scheduled start" + (" (missed run)" if missed else ""))
        elif unit.state not in (S.INACTIVE, S.FAILED):
            await self._stop(unit, "scheduled stop" + (" (missed run)" if missed else ""), checkpoint=True)

    async def _start_in_order(self, names: list[str], why: str) -> None:
        """Start ``names`` after what they are ordered after; skip a unit whose requirement is down."""
        for name in names:
            unit = self.units[name]
            spec = unit.spec
            blocked = None
            for dep in sorted(set(spec.unit.after) | set(spec.unit.requires)):
                other = self.units.get(dep)
                if other is None:
                    if dep in spec.unit.requires:
                        blocked = f"requires unit {dep!r}, which does not exist"
                    continue
                if other.busy and other.op is not None:
                    await asyncio.shield(other.op)
                if other.delivery is not None and not other.delivery.done():
                    # ready means: the agent took its wakeup (or died trying)
                    await asyncio.wait({other.delivery})
                    await asyncio.sleep(0)
                    self._reap()
                if dep in spec.unit.requires and other.state not in (S.RUNNING, S.STARTING, S.CHECKPOINTING, S.RESPAWNING):
                    detail = f": {other.reason}" if other.reason else ""
                    blocked = f"not started: requires {dep!r}, which is {other.state.value}{detail}"
            if blocked is not None:
                unit.reason = blocked
                log.warning("unit_blocked", unit=name, reason=blocked)
                self._changed.set()
                self._changed = asyncio.Event()
                continue
            if unit.state in (S.INACTIVE, S.FAILED, S.BACKOFF, S.WAITING):
                if unit.state == S.FAILED:
                    unit.tracker.reset()
                    self._set_state(unit, S.INACTIVE, "start command")
                await asyncio.shield(self._start(unit, why))

    def _set_state(self, unit: Unit, new: UnitState, reason: str | None = None, **fields: Any) -> None:
        old = unit.state
        check_transition(old, new)
        unit.state = new
        if new in (S.FAILED, S.BACKOFF, S.INACTIVE, S.WAITING):
            unit.reason = reason
        elif new in (S.STARTING, S.RUNNING):
            unit.reason = None
        log.info(
            "unit_state",
            unit=unit.name,
            old=old.value,
            new=new.value,
            reason=reason,
            session=unit.session.session_id if unit.session else unit.last_session,
            pid=unit.session.pid if unit.session else None,
            **fields,
        )
        self._changed.set()
        self._changed = asyncio.Event()
        self._notifier.status(self._summary())

    async def _wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = self.clock() + timeout
        while not predicate():
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return predicate()
        return True

    def _stop_timeout(self, unit: Unit) -> float:
        return unit.spec.restart.stop_timeout or self.settings.stop_timeout

    def _environment(self, unit: Unit, session_id: str) -> dict[str, str]:
        return agent_environment(unit.spec, self.settings, session_id, os.environ)

    def _new_unit(self, spec: UnitSpec) -> Unit:
        return Unit(spec=spec, tracker=RestartTracker(spec.restart.config()), adapter=self._make_adapter(spec))

    def _make_adapter(self, spec: UnitSpec) -> Adapter | None:
        from ..adapters import make_adapter

        try:
            return make_adapter(spec, self.settings)
        except Exception as exc:  # noqa: BLE001 - reported on start, never fatal to the daemon
            log.error("adapter_unavailable", unit=spec.name, error=str(exc))
            return None

    def _start(self, unit: Unit, why: str) -> asyncio.Task[Any]:
        """inactive/backoff/failed -> starting; the session is launched in a task."""
        if unit.timer is not None:
            unit.timer.cancel()
            unit.timer = None
        unit.next_start_at = None
        unit.commanded_stop = False
        if unit.state in (S.INACTIVE, S.FAILED):
            unit.run_started_at = self.clock()
        self._set_state(unit, S.STARTING, why)
        unit.tracker.record_start(self.clock())
        unit.op = self._spawn_task(self._start_session(unit, why))
        return unit.op

    async def _start_session(self, unit: Unit, why: str) -> None:
        session, problem = await self._launch(unit, why)
        if session is None:
            log.error("spawn_failed", unit=unit.name, error=problem)
            self._after_exit(unit, ExitInfo(code=127), 0.0, f"could not start: {problem}")
            return
        self._set_state(unit, S.RUNNING, why, argv=session.argv)

    async def _launch(self, unit: Unit, why: str) -> tuple[Session | None, str | None]:
        """Build the wakeup, spawn a fresh session and begin delivering the wakeup."""
        spec = unit.spec
        if unit.adapter is None:
            unit.adapter = self._make_adapter(spec)
            if unit.adapter is None:
                return None, f"no adapter for kind {spec.agent.kind!r}"
        problem = command_problem(spec, self.settings.project_root, os.environ.get("PATH", ""))
        if problem is not None:
            return None, problem
        wake: WakeupText | None = None
        if spec.wakeup.on_start:
            try:
                wake = await asyncio.to_thread(unit_wakeup, spec, self.settings.project_root)
            except Exception as exc:  # noqa: BLE001 - start without a briefing, loudly
                log.error("wakeup_failed", unit=unit.name, error=str(exc))
        session_id = new_session_id()
        env = self._environment(unit, session_id)
        launch = unit.adapter.launch(wake.text if wake else None, session_id, env)
        env.update(launch.env)
        session = Session(
            unit.name,
            list(launch.argv),
            env=env,
            cwd=spec.workdir_path(self.settings.project_root),
            rows=spec.agent.rows,
            cols=spec.agent.cols,
            transcript_dir=self.settings.transcripts_path / unit.name,
            redact_env=env,
            session_id=session_id,
        )
        try:
            session.spawn()
        except SpawnError as exc:
            return None, str(exc)
        assert self._loop is not None
        watcher = unit.adapter.watcher(session)
        session.add_listener(watcher.feed)
        session.attach(self._loop)
        unit.session = session
        unit.watcher = watcher
        unit.last_session = session.session_id
        self._spawned_at = self.clock()  # record its tree soon: what it starts early counts too
        unit.context = None
        self._persist_agents()
        if wake is None:
            unit.wakeup_state = None
        elif launch.first_input is not None:
            unit.wakeup_state = "pending"
            unit.delivery = self._spawn_task(self._deliver_wakeup(unit, session, launch.first_input, wake))
        else:
            unit.wakeup_state = f"delivered via {launch.wakeup_via}"
            log.info("wakeup_delivered", unit=unit.name, session=session_id, via=launch.wakeup_via, tokens=wake.tokens)
        unit.last_wakeup = wake
        return session, None

    async def _type(self, session: Session, keys: Keystrokes) -> None:
        for data, pause in keys.steps:
            session.send(data)
            if pause:
                await asyncio.sleep(pause)

    async def _deliver_wakeup(self, unit: Unit, session: Session, text: str, wake: WakeupText) -> bool:
        """Type the wakeup as the first message once the agent is idle; confirm a turn followed."""
        watcher = unit.watcher
        assert watcher is not None and unit.adapter is not None
        timeout = unit.spec.checkpoint.ready_timeout
        unit.activity = "waiting for the agent to be ready for its wakeup"
        try:
            if not await self._wait_for_turn(unit, session, 0, self.clock() + timeout) or session.exit is not None:
                unit.wakeup_state = "failed: the agent was not ready"
                log.error("wakeup_not_delivered", unit=unit.name, session=session.session_id, reason="agent not idle")
                return False
            unit.activity = "typing the wakeup"
            turns = watcher.turns_ended
            await self._type(session, unit.adapter.encode(text))
            watcher.submitted()
            unit.activity = "waiting for the agent to take the wakeup"
            answered = await self._wait_for_turn(unit, session, turns + 1, self.clock() + timeout)
            unit.wakeup_state = "delivered via first-message" if answered else "typed; no answer yet"
            log.info("wakeup_delivered", unit=unit.name, session=session.session_id, via="first-message",
                     tokens=wake.tokens, bytes=len(text.encode()), answered=answered)
            return answered
        except SpawnError:
            unit.wakeup_state = "failed: the session ended"
            return False
        finally:
            if unit.session is session:
                unit.activity = None

    def _reap(self) -> None:
        for unit in list(self.units.values()):
            session = unit.session
            if session is None or session.exit is not None:
                continue
            exit = session.reap()
            if exit is None:
                continue
            unit.last_exit = exit
            log.info("session_exited", unit=unit.name, session=session.session_id, pid=session.pid,
                     exit=exit.describe(), uptime=round(session.uptime, 3))
            if unit.state in (S.STOPPING, S.CHECKPOINTING, S.RESPAWNING):
                self._changed.set()
                self._changed = asyncio.Event()
                continue  # the stop or checkpoint operation finishes the job
            uptime = session.uptime
            limit = usage_limit(session.transcript.tail(3000))
            self._finish_session(unit)
            if limit is not None:
                self._wait_usage_limit(unit, limit)
            else:
                failure, unit.failure = unit.failure, None
                self._after_exit(unit, exit, uptime, failure)

    def _finish_session(self, unit: Unit) -> None:
        """The leader is gone: drain, close, and end whatever it left behind."""
        session = unit.session
        if session is None:
            return
        leftovers = session.alive_tree()
        self._cancel_delivery(unit)
        session.close()
        unit.session = None
        unit.watcher = None
        self._persist_agents()
        if leftovers:
            log.warning("session_leftovers", unit=unit.name, pids=[p.pid for p in leftovers])
            self._spawn_task(self._end_processes(session, leftovers, self._stop_timeout(unit)))

    async def _end_processes(self, session: Session, procs: list[psutil.Process], timeout: float) -> None:
        await end_processes(procs, timeout, pgid=session.pid, clock=self.clock)

    def _after_exit(self, unit: Unit, exit: ExitInfo, uptime: float, why: str | None) -> None:
        """Apply the restart policy to an exit nobody commanded."""
        decision = unit.tracker.on_exit(exit, uptime, self.clock())
        if isinstance(decision, Restart):
            reason = why or f"{exit.describe()}; restarting in {decision.delay:g}s"
            unit.next_start_at = time.time() + decision.delay
            self._set_state(unit, S.BACKOFF, reason, delay=decision.delay)
            assert self._loop is not None
            unit.timer = self._loop.call_later(decision.delay, self._backoff_expired, unit)
        elif isinstance(decision, GiveUp):
            self._set_state(unit, S.FAILED, f"{why}; {decision.reason}" if why else decision.reason)
        elif isinstance(decision, StayDown):
            self._set_state(unit, S.INACTIVE, f"{why}; {decision.reason}" if why else decision.reason)

    def _backoff_expired(self, unit: Unit) -> None:
        unit.timer = None
        if unit.state == S.BACKOFF and self.units.get(unit.name) is unit:
            unit.restarts += 1
            self._start(unit, why="restart after backoff")

    def _cancel_delivery(self, unit: Unit) -> None:
        if unit.delivery is not None and not unit.delivery.done():
            unit.delivery.cancel()
        unit.delivery = None

    async def _stop(self, unit: Unit, why: str, checkpoint: bool = False) -> None:
        """Commanded stop of one unit; returns when its whole tree is gone.

        With ``checkpoint`` (a graceful stop), a running agent is checkpointed first.
        """
        unit.commanded_stop = True
        unit.sends.clear()
        if unit.busy:
            assert unit.op is not None
            was_checkpoint = unit.state == S.CHECKPOINTING
            await asyncio.shield(unit.op)
            checkpoint = checkpoint and not was_checkpoint
        if unit.state in (S.BACKOFF, S.WAITING):
            if unit.timer is not None:
                unit.timer.cancel()
                unit.timer = None
            unit.next_start_at = None
            self._set_state(unit, S.INACTIVE, why)
            return
        if unit.state == S.STOPPING and unit.stop_task is not None:
            await asyncio.shield(unit.stop_task)
            return
        if unit.state != S.RUNNING or unit.session is None:
            return
        if checkpoint and unit.spec.checkpoint.enabled and unit.spec.checkpoint.on_stop and unit.adapter is not None:
            unit.op = self._spawn_task(self._checkpoint(unit, "stop", then="stop", why=why))
            await asyncio.shield(unit.op)
            return
        unit.stop_task = asyncio.ensure_future(self._terminate(unit, why))
        await asyncio.shield(unit.stop_task)

    async def _terminate(self, unit: Unit, why: str, graceful: bool = False) -> None:
        self._set_state(unit, S.STOPPING, why)
        await self._end_session(unit, graceful)
        self._set_state(unit, S.INACTIVE, why, exit=unit.last_exit.describe() if unit.last_exit else None)

    async def _end_session(self, unit: Unit, graceful: bool) -> None:
        """End the current session: the adapter's quit keys (if graceful), then TERM and KILL to the tree."""
        session = unit.session
        assert session is not None
        self._cancel_delivery(unit)
        timeout = self._stop_timeout(unit)
        # Snapshot the tree before the first signal: once the leader dies its
        # children are reparented and can no longer be found from it.
        tree = await asyncio.to_thread(session.refresh_tree)
        if graceful and unit.adapter is not None and session.exit is None:
            for data, pause in unit.adapter.quit().steps:
                try:
                    session.send(data)
                except SpawnError:
                    break
                if await self._wait_for(lambda: session.exit is not None, max(pause, 0.05)):
                    break
        survivors = await end_processes(tree, timeout, pgid=session.pid, clock=self.clock)
        if survivors:
            log.warning("stop_timeout", unit=unit.name, pids=[p.pid for p in survivors], timeout=timeout)
        self._reap_now(unit)
        await self._wait_for(lambda: session.exit is not None, 10.0)
        if session.exit is not None:
            unit.last_exit = session.exit
        session.close()
        unit.session = None
        unit.watcher = None
        unit.stop_task = None
        self._persist_agents()

    # ------------------------------------------------------ the continuity cycle
    def _watch_contexts(self) -> None:
        """Once a second: context figures, due checkpoints, queued text."""
        for unit in self.units.values():
            session = unit.session
            if unit.state != S.RUNNING or session is None or unit.adapter is None:
                continue
            try:
                unit.context = unit.adapter.context(session)
            except Exception as exc:  # noqa: BLE001 - a broken meter must not stop supervision
                log.warning("context_unavailable", unit=unit.name, error=str(exc))
                unit.context = None
            if unit.watcher is not None:
                unit.watcher.tick()
            if unit.busy or (unit.delivery is not None and not unit.delivery.done()):
                continue
            if self._watch_unattended(unit, session):
                continue
            failure = unit.adapter.failure(session)
            if failure is not None and unit.failure is None:
                # The agent cannot go on (e.g. its model server is unreachable): end the
                # session; the reaper applies the restart policy with this reason.
                log.error("session_failed", unit=unit.name, session=session.session_id, reason=failure)
                unit.failure = failure
                session.signal_tree(signal.SIGTERM)
                continue
            trigger = due(unit.spec, unit.context, session.uptime) if unit.spec.checkpoint.enabled else None
            if trigger is not None:
                log.info("checkpoint_due", unit=unit.name, trigger=trigger,
                         context=unit.context.as_dict() if unit.context else None)
                unit.op = self._spawn_task(self._checkpoint(unit, trigger, interrupt=trigger == "hard_limit"))
                continue
            if unit.sends and self._may_type(unit):
                text = unit.sends.popleft()
                self._spawn_task(self._type_message(unit, text))

    def _watch_unattended(self, unit: Unit, session: Session) -> bool:
        """max_runtime, stalls and usage limits; True when it started an operation."""
        sched = unit.spec.schedule
        now = self.clock()
        if sched.max_runtime and unit.run_started_at and now - unit.run_started_at >= sched.max_runtime:
            log.info("max_runtime_reached", unit=unit.name, max_runtime=sched.max_runtime)
            unit.run_started_at = None  # fire once; _stop installs the checkpoint as the unit's op
            self._spawn_task(self._stop(unit, f"max_runtime {sched.max_runtime:g}s reached", checkpoint=True))
            return True
        written = session.transcript.raw_bytes
        if written != unit.usage_scan_at and now - unit.usage_scanned_at >= USAGE_SCAN_EVERY:
            unit.usage_scanned_at = now
            new = min(written - unit.usage_scan_at, 3000)
            unit.usage_scan_at = written
            limit = usage_limit(session.transcript.tail(max(new, 200)))
            if limit is not None:
                unit.op = self._spawn_task(self._end_for_usage_limit(unit, limit))
                return True
        if sched.stall_after and now - session.last_output_at >= sched.stall_after:
            log.warning("stalled", unit=unit.name, silent_for=round(now - session.last_output_at, 1))
            unit.op = self._spawn_task(self._checkpoint(unit, "stall", interrupt=True,
                                                       deadline=min(unit.spec.checkpoint.deadline, sched.stall_after)))
            return True
        return False

    async def _end_for_usage_limit(self, unit: Unit, limit: UsageLimit) -> None:
        log.warning("usage_limit", unit=unit.name, line=limit.line,
                    reset_at=limit.reset_at.isoformat() if limit.reset_at else None)
        self._set_state(unit, S.STOPPING, f"usage limit: {limit.line}")
        await self._end_session(unit, graceful=True)
        self._wait_usage_limit(unit, limit)

    def _wait_usage_limit(self, unit: Unit, limit: UsageLimit) -> None:
        """Wait (state waiting) until the limit resets, then resume with a fresh session and the wakeup."""
        now = time.time()
        reset = limit.reset_at.timestamp() if limit.reset_at else now + unit.spec.schedule.usage_limit_wait
        delay = max(1.0, reset - now)
        unit.next_start_at = now + delay
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now + delay))
        self._set_state(unit, S.WAITING, f"usage limit hit ({limit.line}); resuming at {when}")
        assert self._loop is not None
        unit.timer = self._loop.call_later(delay, self._resume_after_limit, unit)

    def _resume_after_limit(self, unit: Unit) -> None:
        unit.timer = None
        if unit.state == S.WAITING and self.units.get(unit.name) is unit:
            self._start(unit, why="resume after usage limit")

    # ------------------------------------------------------------ scope guard
    def _maybe_start_guard(self) -> None:
        """Watch the project only when a unit's scope or constraints.md restricts something."""
        if self._guard is not None:
            return
        restricted = any(u.spec.scope.paths or u.spec.scope.forbid for u in self.units.values())
        if restricted or self._global_forbid():
            self._start_guard()

    def _start_guard(self) -> None:
        """Watch the project (inotify) so changes can be attributed and checked against scopes."""
        from ..scope.watcher import ChangeWatcher

        assert self._loop is not None
        loop = self._loop
        try:
            self._guard = ChangeWatcher(self.settings.project_root,
                                        lambda rel: loop.call_soon_threadsafe(self._on_file_change, rel))
            self._guard.start()
        except (OSError, RuntimeError) as exc:
            self._guard = None
            log.error("scope_guard_unavailable", error=str(exc))

    def _global_forbid(self) -> list[str]:
        from ..scope.rules import forbid_globs_from_constraints

        try:
            text = (self.settings.project_root / ".agent" / "constraints.md").read_text(errors="replace")
        except OSError:
            return []
        return forbid_globs_from_constraints(text)

    def _on_file_change(self, rel: str) -> None:
        from ..scope.revert import content_digest
        from ..scope.rules import Candidate, attribute, check

        root = self.settings.project_root
        own = self._own_writes.pop(rel, None)
        if own is not None and content_digest(root / rel) == own:
            return  # our own revert
        now = self.clock()
        candidates = []
        for unit in self.units.values():
            session = unit.session
            if session is None or unit.state not in (S.RUNNING, S.CHECKPOINTING):
                continue
            workdir = unit.spec.workdir_path(root).resolve()
            try:
                workdir_rel = workdir.relative_to(root.resolve()).as_posix()
            except ValueError:
                continue
            candidates.append(Candidate(
                unit=unit.name, workdir_rel="" if workdir_rel == "." else workdir_rel,
                scope=list(unit.spec.scope.paths), forbid=list(unit.spec.scope.forbid),
                shared=list(unit.spec.scope.shared),
                busy=unit.watcher is not None and not unit.watcher.idle,
                last_output_age=now - session.last_output_at,
            ))
        if not candidates:
            return
        who = attribute(rel, candidates)
        if who.unit is None:
            log.info("change_unattributed", path=rel, candidates=who.candidates, why=who.why)
            return
        unit = self.units[who.unit]
        violation = check(rel, list(unit.spec.scope.paths), list(unit.spec.scope.forbid), self._global_forbid())
        if violation is None:
            return
        self._spawn_task(self._act_on_violation(unit, violation, who.why))

    async def _act_on_violation(self, unit: Unit, violation: Any, why: str) -> None:
        from ..scope.revert import content_digest, revert

        action = unit.spec.scope.on_violation
        root = self.settings.project_root
        unit.violations += 1
        done = ""
        if action == "revert":
            snapshot = await asyncio.to_thread(_latest_snapshot, root)
            try:
                done = await asyncio.to_thread(revert, root, violation.path, snapshot,
                                               self.settings.state_path / "quarantine")
                self._own_writes[violation.path] = content_digest(root / violation.path)
            except Exception as exc:  # noqa: BLE001 - report, warn, carry on
                done = f"revert failed: {exc}"
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "unit": unit.name,
                  "session": unit.session.session_id if unit.session else None, "path": violation.path,
                  "rule": violation.rule, "kind": violation.kind, "action": action, "attributed": why, "done": done}
        append_jsonl(self.settings.state_path / "violations.jsonl", record)
        log.warning("scope_violation", **record)
        message = (f"agentd: you changed {violation.path}, which is {violation.rule}. "
                   + ("agentd restored it. " if action == "revert" and not done.startswith("revert failed") else "")
                   + "Stay within your scope and the constraints in .agent/constraints.md.")
        if action == "stop":
            await self._stop(unit, f"scope violation: {violation.path} ({violation.rule})", checkpoint=True)
        else:
            unit.sends.append(message)

    def _person_typing(self, unit: Unit) -> bool:
        at = unit.person_input_at
        return bool(at) and time.monotonic() - at < PERSON_IDLE

    def _may_type(self, unit: Unit) -> bool:
        return unit.watcher is not None and unit.watcher.idle and not self._person_typing(unit)

    async def _type_message(self, unit: Unit, text: str) -> None:
        session, watcher = unit.session, unit.watcher
        if session is None or watcher is None or unit.adapter is None:
            return
        await self._type(session, unit.adapter.encode(text))
        watcher.submitted()
        log.info("sent", unit=unit.name, session=session.session_id, bytes=len(text.encode()))

    async def _wait_ready_to_type(self, unit: Unit, session: Session, deadline: float) -> bool:
        """Wait until the turn has ended and no person is typing; False on exit or deadline."""
        watcher = unit.watcher
        assert watcher is not None
        while session.exit is None and self.clock() < deadline:
            watcher.tick()
            if self._person_typing(unit):
                unit.activity = "waiting: a person is typing in an attached terminal"
            elif not watcher.idle:
                unit.activity = "waiting for the agent's turn to end"
            else:
                return True
            await self._wait_for(lambda: False, 0.1)
        return False

    async def _checkpoint(self, unit: Unit, trigger: str, then: str = "respawn", interrupt: bool = False,
                          why: str | None = None, deadline: float | None = None) -> CycleRecord:
        """The checkpoint protocol; ``then`` is "respawn" (the cycle) or "stop"."""
        session, adapter, spec = unit.session, unit.adapter, unit.spec
        assert session is not None and adapter is not None and unit.watcher is not None
        root = self.settings.project_root
        record = CycleRecord(unit=unit.name, trigger=trigger, old_session=session.session_id)
        try:
            figure = adapter.context(session)
            record.tokens_before, record.window, record.exact = figure.used, figure.window, figure.exact
        except Exception as exc:  # noqa: BLE001
            record.notes.append(f"context unavailable: {exc}")
        self._set_state(unit, S.CHECKPOINTING, f"checkpoint ({trigger})")
        from ..memory import memory_fingerprint, write_auto_checkpoint

        await asyncio.to_thread(self._ensure_store)
        before = await asyncio.to_thread(memory_fingerprint, root, spec.module)
        unit.checkpoint_marker = {"trigger": trigger, "fingerprint": before, "session": session.session_id,
                                  "transcript": str(session.transcript.text_path), "started": record.started}
        self._persist_agents()
        # A wakeup still being typed finishes first (it has its own deadline).
        if unit.delivery is not None and not unit.delivery.done():
            unit.activity = "waiting for the wakeup delivery to finish"
            await asyncio.wait({unit.delivery})
        deadline = self.clock() + (deadline or spec.checkpoint.deadline)
        flushed = False
        t = time.monotonic()
        if interrupt and session.exit is None and not unit.watcher.idle:
            record.notes.append("interrupted a running turn (hard limit)")
            await self._type(session, adapter.interrupt())
        ready = await self._wait_ready_to_type(unit, session, deadline)
        record.step("wait_turn_end", t)
        if ready:
            watcher = unit.watcher
            turns = watcher.turns_ended
            t = time.monotonic()
            unit.activity = "typing the checkpoint prompt"
            await self._type(session, adapter.encode(checkpoint_prompt(spec)))
            watcher.submitted()
            record.step("type_prompt", t)
            t = time.monotonic()
            unit.activity = "waiting for the agent to write its notes"
            turn_done = await self._wait_for_turn(unit, session, turns + 1, deadline)
            changed = await asyncio.to_thread(memory_fingerprint, root, spec.module) != before
            if turn_done and not changed:
                grace_end = min(deadline, self.clock() + spec.checkpoint.grace)
                while not changed and self.clock() < grace_end and session.exit is None:
                    await self._wait_for(lambda: False, 0.25)
                    changed = await asyncio.to_thread(memory_fingerprint, root, spec.module) != before
            record.step("wait_flush", t)
            flushed = turn_done and changed
            if changed and not turn_done:
                record.notes.append("files changed but the turn did not end before the deadline")
        else:
            record.notes.append("the agent exited" if session.exit is not None else "the turn did not end before the deadline")
        t = time.monotonic()
        if flushed:
            record.flush = "verified"
        else:
            reason = "; ".join(record.notes) or "the agent did not write its notes"
            try:
                await asyncio.to_thread(write_auto_checkpoint, root, spec.module, reason, session.transcript.tail(4000))
                record.flush = "auto"
            except Exception as exc:  # noqa: BLE001 - the cycle must still end in a fresh session
                log.error("auto_checkpoint_failed", unit=unit.name, error=str(exc))
                record.flush = "failed"
                record.notes.append(f"auto-checkpoint failed: {exc}")
        record.step("verify", t)
        log.info("checkpoint_flush", unit=unit.name, session=session.session_id, flush=record.flush, trigger=trigger)
        t = time.monotonic()
        unit.activity = "stopping the old session"
        if then == "stop":
            self._set_state(unit, S.STOPPING, why or f"checkpoint ({trigger}) then stop")
        else:
            self._set_state(unit, S.RESPAWNING, f"checkpoint ({trigger}) done; fresh session")
        await self._end_session(unit, graceful=True)
        record.step("stop_session", t)
        unit.checkpoint_marker = None
        if then == "stop":
            record.outcome = "stopped"
            unit.activity = None
            self._set_state(unit, S.INACTIVE, why or "stopped after checkpoint",
                            exit=unit.last_exit.describe() if unit.last_exit else None)
            self._record_cycle(unit, record)
            return record
        t = time.monotonic()
        new, problem = await self._launch(unit, f"respawn after checkpoint ({trigger})")
        if new is None:
            record.outcome = f"failed: {problem}"
            unit.activity = None
            self._record_cycle(unit, record)
            self._after_exit(unit, ExitInfo(code=127), 0.0, f"could not respawn: {problem}")
            return record
        unit.restarts += 1
        self._set_state(unit, S.RUNNING, f"fresh session after checkpoint ({trigger})", argv=new.argv)
        record.new_session = new.session_id
        if unit.delivery is not None:
            await asyncio.wait({unit.delivery})
        if unit.last_wakeup is not None:
            record.wakeup_tokens = unit.last_wakeup.tokens
        record.notes.append(f"wakeup {unit.wakeup_state}")
        record.step("respawn", t)
        record.outcome = "respawned"
        record.finish_ratio()
        self._record_cycle(unit, record)
        return record

    async def _wait_for_turn(self, unit: Unit, session: Session, count: int, deadline: float) -> bool:
        watcher = unit.watcher
        assert watcher is not None
        while session.exit is None:
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            if await watcher.wait_turns(count, min(remaining, 0.5)):
                return True
        return False

    def _record_cycle(self, unit: Unit, record: CycleRecord) -> None:
        unit.last_cycle = record.as_dict()
        append_history(self.settings.state_path, record)
        log.info("checkpoint_cycle", **{k: v for k, v in record.as_dict().items() if k != "unit"}, unit=unit.name)
        self._persist_agents()

    async def _finish_interrupted_checkpoint(self, name: str, rec: dict[str, Any]) -> None:
        """A daemon died during a checkpoint: make sure nothing the cycle owed is lost."""
        from ..memory import memory_fingerprint, write_auto_checkpoint

        marker = rec["checkpoint"]
        module = rec.get("module")
        root = self.settings.project_root
        record = CycleRecord(unit=name, trigger=f"{marker.get('trigger')} (interrupted: daemon restart)",
                             old_session=marker.get("session"))
        try:
            changed = await asyncio.to_thread(memory_fingerprint, root, module) != marker.get("fingerprint")
            if changed:
                record.flush = "verified"
            else:
                try:
                    tail = read_tail(Path(marker.get("transcript", "")), 4000)
                except OSError:
                    tail = ""
                await asyncio.to_thread(write_auto_checkpoint, root, module,
                                        "the daemon stopped in the middle of a checkpoint", tail)
                record.flush = "auto"
        except Exception as exc:  # noqa: BLE001 - never block the daemon's start on this
            record.notes.append(f"auto-checkpoint failed: {exc}")
        record.outcome = "fresh session at daemon start"
        append_history(self.settings.state_path, record)
        log.warning("checkpoint_interrupted", unit=name, flush=record.flush)

    def _reap_now(self, unit: Unit) -> None:
        if unit.session is not None and unit.session.exit is None:
            exit = unit.session.reap()
            if exit is not None:
                unit.last_exit = exit

    # ------------------------------------------------------ public commands
    def _unit(self, name: str) -> Unit:
        if not isinstance(name, str) or name not in self.units:
            known = ", ".join(sorted(self.units)) or "none"
            raise ControlError(f"no such unit {name!r} (known units: {known})")
        return self.units[name]

    async def start_units(self, names: list[str] | None) -> dict[str, str]:
        targets = [self._unit(n) for n in names] if names else [
            self.units[n] for n in start_order({k: u.spec for k, u in self.units.items()}) if self.units[n].spec.unit.enabled
        ]
        result: dict[str, str] = {}
        for unit in targets:
            if unit.state == S.STOPPING and unit.stop_task is not None:
                await asyncio.shield(unit.stop_task)
            if unit.state in (S.RUNNING, S.STARTING):
                result[unit.name] = "already running"
                continue
            if unit.state == S.FAILED:
                unit.tracker.reset()
            await asyncio.shield(self._start(unit, why="start command"))
            result[unit.name] = unit.state.value
        return result

    async def stop_units(self, names: list[str] | None, why: str = "stop command", now: bool = False) -> dict[str, str]:
        targets = [self._unit(n) for n in names] if names else list(self.units.values())
        await asyncio.gather(*(self._stop(u, why, checkpoint=not now) for u in targets))
        return {u.name: u.state.value for u in targets}

    async def restart_units(self, names: list[str] | None, now: bool = False) -> dict[str, str]:
        targets = [self._unit(n) for n in names] if names else [u for u in self.units.values() if u.state != S.INACTIVE or u.spec.unit.enabled]
        await asyncio.gather(*(self._restart(u, now) for u in targets))
        return {u.name: u.state.value for u in targets}

    async def _restart(self, unit: Unit, now: bool) -> None:
        if unit.busy and unit.op is not None:
            await asyncio.shield(unit.op)
        graceful = (not now and unit.state == S.RUNNING and unit.session is not None and unit.adapter is not None
                    and unit.spec.checkpoint.enabled and unit.spec.checkpoint.on_stop)
        if graceful:
            unit.op = self._spawn_task(self._checkpoint(unit, "restart"))
            await asyncio.shield(unit.op)
            return
        await self._stop(unit, "restart command")
        if unit.state == S.FAILED:
            unit.tracker.reset()
        if unit.state in (S.INACTIVE, S.FAILED):
            unit.restarts += 1
            await asyncio.shield(self._start(unit, why="restart command"))

    async def checkpoint_unit(self, name: str) -> dict[str, Any]:
        unit = self._unit(name)
        if unit.busy and unit.op is not None:
            raise ControlError(f"unit {name!r} is {unit.state.value}: an operation is already running ({unit.activity or 'starting'})")
        if unit.state != S.RUNNING or unit.session is None or unit.adapter is None:
            raise ControlError(f"unit {name!r} is {unit.state.value}, not running: nothing to checkpoint")
        unit.op = self._spawn_task(self._checkpoint(unit, "command"))
        record = await asyncio.shield(unit.op)
        return record.as_dict()

    async def reset_failed(self, names: list[str] | None) -> dict[str, str]:
        targets = [self._unit(n) for n in names] if names else [u for u in self.units.values() if u.state == S.FAILED]
        result = {}
        for unit in targets:
            if unit.state == S.FAILED:
                unit.tracker.reset()
                self._set_state(unit, S.INACTIVE, "reset-failed")
                if unit.spec.unit.enabled:
                    self._start(unit, why="reset-failed")
            result[unit.name] = unit.state.value
        return result

    async def reload(self) -> dict[str, Any]:
        specs, errors = load_units(self.settings.units_path, self.settings.project_root)
        self.load_errors = errors
        bad_names = {e.path.name[:-5] for e in errors if e.path.name.endswith(".toml")}
        report: dict[str, list[str]] = {"started": [], "stopped": [], "restarted": [], "kept": [], "errors": [str(e) for e in errors]}
        for err in errors:
            log.error("unit_invalid", path=str(err.path), error=err.message)
        # Removed units (a unit whose file is now invalid is kept running as it was).
        removed = [u for name, u in self.units.items() if name not in specs and name not in bad_names]
        await asyncio.gather(*(self._stop(u, "removed by reload", checkpoint=True) for u in removed))
        for unit in removed:
            self.units.pop(unit.name, None)
            report["stopped"].append(unit.name)
        for name in start_order(specs):
            spec = specs[name]
            unit = self.units.get(name)
            if unit is None:
                unit = self._new_unit(spec)
                self.units[name] = unit
                if spec.unit.enabled:
                    self._start(unit, why="added by reload")
                    report["started"].append(name)
                else:
                    report["kept"].append(name)
                continue
            if unit.spec.fingerprint() == spec.fingerprint():
                unit.spec = spec  # description may have changed
                report["kept"].append(name)
                continue
            was_active = unit.state in (S.RUNNING, S.STARTING, S.BACKOFF, S.CHECKPOINTING, S.RESPAWNING)
            await self._stop(unit, "changed by reload", checkpoint=True)
            unit.spec = spec
            unit.tracker = RestartTracker(spec.restart.config())
            unit.adapter = self._make_adapter(spec)
            if unit.state == S.FAILED:
                self._set_state(unit, S.INACTIVE, "changed by reload")
            if spec.unit.enabled or was_active:
                self._start(unit, why="changed by reload")
                report["restarted"].append(name)
            else:
                report["kept"].append(name)
        self._maybe_start_guard()
        log.info("reloaded", **{k: v for k, v in report.items() if k != "errors"}, errors=len(errors))
        return report

    async def send(self, name: str, text: str, enter: bool = True) -> dict[str, Any]:
        """Type ``text`` into the agent: now if its turn has ended, else at the next turn end."""
        unit = self._unit(name)
        if unit.state in (S.CHECKPOINTING, S.RESPAWNING):
            raise ControlError(
                f"unit {name!r} is {unit.state.value} ({unit.activity or 'busy'}): nothing is typed into an agent "
                "during a checkpoint; send again when `agentd status` shows it running"
            )
        if unit.state not in (S.RUNNING, S.STARTING):
            raise ControlError(f"unit {name!r} is {unit.state.value}, not running: nothing to type into")
        if not enter:
            if unit.session is None:
                raise ControlError(f"unit {name!r} is still starting")
            unit.session.send(text.encode())
            return {"unit": name, "delivered": "now", "bytes": len(text.encode())}
        waiting = (unit.delivery is not None and not unit.delivery.done()) or unit.busy
        if not waiting and not unit.sends and self._may_type(unit):
            await self._type_message(unit, text)
            return {"unit": name, "delivered": "now", "bytes": len(text.encode())}
        unit.sends.append(text)
        return {"unit": name, "delivered": "queued", "position": len(unit.sends),
                "note": "the agent is busy; agentd types it at the next turn end"}

    async def agent_event(self, name: str, event: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        """An event from the agent itself (``agentd notify``): turn ends, compactions, hooks."""
        unit = self._unit(name)
        session = unit.session
        if session is None or unit.adapter is None:
            return {"ignored": f"unit {name!r} has no running session"}
        if session_id and session_id != session.session_id:
            return {"ignored": f"session {session_id} is not the current one ({session.session_id})"}
        meanings = unit.adapter.on_agent_event(session, event)
        log.info("agent_event", unit=name, session=session.session_id, meanings=meanings,
                 type=event.get("type") or event.get("hook_event_name"))
        if "turn_end" in meanings and unit.watcher is not None:
            unit.watcher.turn_ended()
        wakeup: WakeupText | None = None
        if "compacted" in meanings or "inject_wakeup" in meanings:
            wakeup = await asyncio.to_thread(unit_wakeup, unit.spec, self.settings.project_root)
        if "compacted" in meanings or "pre_compact" in meanings:
            record = CycleRecord(unit=name, trigger="agent compacted" if "compacted" in meanings else "agent about to compact",
                                 old_session=session.session_id, new_session=session.session_id)
            if unit.context is not None:
                record.tokens_before, record.window, record.exact = unit.context.used, unit.context.window, unit.context.exact
            record.flush = "skipped"
            record.outcome = "wakeup re-injected" if wakeup is not None else "recorded"
            if wakeup is not None:
                record.wakeup_tokens = wakeup.tokens
                record.finish_ratio()
            self._record_cycle(unit, record)
        if "pre_compact" in meanings and not unit.busy and unit.spec.checkpoint.enabled:
            unit.op = self._spawn_task(self._checkpoint(unit, "pre_compact"))
        if "inject_wakeup" in meanings and wakeup is not None:
            unit.sends.append(wakeup.text)
        output = unit.adapter.hook_output(event, meanings, wakeup.text if wakeup else None)
        return {"meanings": meanings, "output": output}

    async def broadcast(self, text: str, origin: str | None) -> dict[str, Any]:
        """Tell every other running unit, at its next turn end, about a global decision."""
        told = []
        for unit in self.units.values():
            if unit.name == origin or unit.state not in (S.RUNNING, S.STARTING, S.CHECKPOINTING, S.RESPAWNING):
                continue
            unit.sends.append(f"global decision recorded: {text}; see .agent/decisions.log")
            told.append(unit.name)
        log.info("global_decision_broadcast", origin=origin, units=told)
        return {"told": told}

    async def status(self, names: list[str] | None) -> dict[str, Any]:
        targets = [self._unit(n) for n in names] if names else list(self.units.values())
        await self._refresh_stats(targets)
        for unit in targets:
            if unit.session is not None and unit.adapter is not None:
                try:
                    unit.context = unit.adapter.context(unit.session)
                except Exception:  # noqa: BLE001 - shown as unknown
                    unit.context = None
        now = time.time()
        rows = []
        for unit in targets:
            session = unit.session
            rows.append(
                {
                    "unit": unit.name,
                    "description": unit.spec.unit.description,
                    "state": unit.state.value,
                    "pid": session.pid if session else None,
                    "session": session.session_id if session else unit.last_session,
                    "uptime": round(session.uptime, 1) if session else None,
                    "restarts": unit.restarts,
                    "last_exit": unit.last_exit.describe() if unit.last_exit else None,
                    "next_restart_in": round(unit.next_start_at - now, 1) if unit.next_start_at else None,
                    "reason": unit.reason,
                    "cpu_seconds": round(unit.stats[0], 2) if session else None,
                    "rss_bytes": unit.stats[1] if session else None,
                    "transcript_bytes": session.transcript.raw_bytes if session else None,
                    "enabled": unit.spec.unit.enabled,
                    "module": unit.spec.module,
                    "kind": unit.spec.agent.kind,
                    "context": unit.context.as_dict() if unit.context and session else None,
                    "turn": unit.watcher.state.value if unit.watcher and session else None,
                    "activity": unit.activity,
                    "wakeup": unit.wakeup_state if session else None,
                    "queued_sends": len(unit.sends),
                    "last_checkpoint": _cycle_summary(unit.last_cycle),
                    "viewers": unit.viewers,
                    "violations": unit.violations,
                    "schedule": self._scheduler.next_times(unit.name) if self._scheduler and (unit.spec.schedule.start or unit.spec.schedule.stop) else None,
                }
            )
        return {
            "daemon": {
                "pid": os.getpid(),
                "version": __version__,
                "uptime": round(now - self._started_wall, 1),
                "project_root": str(self.settings.project_root),
                "units_dir": str(self.settings.units_path),
            },
            "units": rows,
            "errors": [str(e) for e in self.load_errors],
        }

    async def _refresh_stats(self, units: list[Unit]) -> None:
        """CPU and RSS of each agent's tree, at most once per ``status_interval``."""
        live = [u for u in units if u.session is not None]
        now = self.clock()
        if not live or now - self._stats_at < self.settings.status_interval:
            return
        self._stats_at = now

        def collect() -> None:
            cmap = children_map() if len(live) > 3 else None
            for unit in live:
                session = unit.session
                if session is not None:
                    session.refresh_tree(cmap)
                    unit.stats = session.stats()

        await asyncio.to_thread(collect)

    async def shutdown(self, now: bool = False) -> dict[str, Any]:
        if self._shutdown_started:
            await self._done.wait()
            return {"stopped": True}
        self._shutdown_started = True
        self._notifier.stopping()
        log.info("daemon_stopping")
        for unit in self.units.values():
            if unit.timer is not None:
                unit.timer.cancel()
                unit.timer = None
        await self.stop_units(None, why="daemon shutdown", now=now)
        self._agents_file.unlink(missing_ok=True)
        self._done.set()
        self._events.put_nowait(("stop", None))
        return {"stopped": True}

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for unit in self.units.values():
            counts[unit.state.value] = counts.get(unit.state.value, 0) + 1
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no units"

    def _command_table(self) -> dict[str, Command]:
        def names(args: dict[str, Any]) -> list[str] | None:
            units = args.get("units")
            if units is None:
                return None
            if not isinstance(units, list) or not all(isinstance(u, str) for u in units):
                raise ControlError("units must be a list of unit names")
            return units

        async def ping(args: dict[str, Any]) -> dict[str, Any]:
            return {"pid": os.getpid(), "version": __version__}

        async def status(args: dict[str, Any]) -> Any:
            return await self.status(names(args))

        async def start(args: dict[str, Any]) -> Any:
            return await self.start_units(names(args))

        async def stop(args: dict[str, Any]) -> Any:
            return await self.stop_units(names(args), now=bool(args.get("now")))

        async def restart(args: dict[str, Any]) -> Any:
            return await self.restart_units(names(args), now=bool(args.get("now")))

        async def checkpoint(args: dict[str, Any]) -> Any:
            return await self.checkpoint_unit(args.get("unit", ""))

        async def reset(args: dict[str, Any]) -> Any:
            return await self.reset_failed(names(args))

        async def reload(args: dict[str, Any]) -> Any:
            return await self.reload()

        async def send(args: dict[str, Any]) -> Any:
            text = args.get("text")
            if not isinstance(text, str):
                raise ControlError("send: text must be a string")
            return await self.send(args.get("unit", ""), text, bool(args.get("enter", True)))

        async def shutdown(args: dict[str, Any]) -> Any:
            return await self.shutdown(now=bool(args.get("now")))

        async def broadcast(args: dict[str, Any]) -> Any:
            text = args.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ControlError("broadcast: text must be a non-empty string")
            return await self.broadcast(text.strip()[:500], args.get("origin"))

        async def queue(args: dict[str, Any]) -> Any:
            unit = self._unit(args.get("unit", ""))
            text = args.get("text")
            if not isinstance(text, str):
                raise ControlError("queue: text must be a string")
            if unit.state in (S.INACTIVE, S.FAILED):
                return {"queued": False, "reason": f"unit is {unit.state.value}"}
            unit.sends.append(text)
            return {"queued": True, "position": len(unit.sends)}

        async def agent_event(args: dict[str, Any]) -> Any:
            event = args.get("event")
            if not isinstance(event, dict):
                raise ControlError("agent-event: event must be a JSON object")
            return await self.agent_event(args.get("unit", ""), event, args.get("session"))

        async def attach(args: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            from ..control.attach import serve_attach

            await serve_attach(self, args, reader, writer)

        return {
            "ping": Command(ping, help="is the daemon alive"),
            "status": Command(status, frozenset({"units"}), "units and their state"),
            "start": Command(start, frozenset({"units"}), "start units (all enabled when none given)"),
            "stop": Command(stop, frozenset({"units", "now"}), "stop units (checkpoint first unless now)"),
            "restart": Command(restart, frozenset({"units", "now"}), "restart units (through a checkpoint unless now)"),
            "checkpoint": Command(checkpoint, frozenset({"unit"}), "run a checkpoint cycle now"),
            "broadcast": Command(broadcast, frozenset({"text", "origin"}), "tell the other units about a global decision"),
            "queue": Command(queue, frozenset({"unit", "text"}), "type text at the unit's next turn end"),
            "agent-event": Command(agent_event, frozenset({"unit", "session", "event"}), "an event from the agent (notify, hooks)"),
            "reset-failed": Command(reset, frozenset({"units"}), "clear the failed state"),
            "reload": Command(reload, help="re-read unit files"),
            "send": Command(send, frozenset({"unit", "text", "enter"}), "type text into an agent"),
            "shutdown": Command(shutdown, frozenset({"now"}), "stop every unit, then the daemon"),
            "attach": Command(attach, frozenset({"unit", "read_only", "rows", "cols"}), "relay a live session", stream=True),
        }

    # ------------------------------------------- attach target (supervisor.control.attach.AttachTarget)
    def current_session(self, name: str) -> Session | None:
        """The unit's session object now (also while it is stopping), or None."""
        return self._unit(name).session

    async def wait_session(self, name: str, previous: Session | None, timeout: float) -> Session | None:
        """A running session of the unit other than ``previous``, waiting up to ``timeout``s."""

        def fresh() -> Session | None:
            unit = self.units.get(name)
            if unit is None or unit.state != S.RUNNING or unit.session is None:
                return None
            session = unit.session
            return session if session is not previous and session.exit is None else None

        if await self._wait_for(lambda: fresh() is not None, timeout):
            return fresh()
        return None

    def person_input(self, name: str) -> None:
        """A person typed into the unit through ``agentd attach`` just now."""
        unit = self.units.get(name)
        if unit is not None:
            unit.person_input_at = time.monotonic()

    def viewer_attached(self, name: str, delta: int) -> int:
        """Count viewers of the unit (+1 attach, -1 detach); return the count."""
        unit = self.units.get(name)
        if unit is None:
            return 0
        unit.viewers = max(0, unit.viewers + delta)
        if delta < 0:
            unit.person_input_at = 0.0  # the person left: agentd may type again
        return unit.viewers


def _latest_snapshot(root: Path) -> dict[str, Any] | None:
    from ..memory.snapshots import list_ids, load
    from ..memory.store import AgentPaths

    paths = AgentPaths(root)
    ids = list_ids(paths)
    return load(paths, ids[-1]) if ids else None


def _cycle_summary(cycle: dict[str, Any] | None) -> dict[str, Any] | None:
    if not cycle:
        return None
    keys = ("started", "trigger", "flush", "outcome", "tokens_before", "wakeup_tokens", "ratio", "new_session")
    return {k: cycle.get(k) for k in keys}


def run_daemon(settings: Settings, console: bool = False) -> int:
    """Run the daemon in this process until it is told to stop."""
    from . import eventlog

    state = settings.state_path
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    eventlog.configure(settings.log_path, settings.log_level, console=console or settings.log_format == "console" and sys.stderr.isatty())
    pidfile = PidFile(settings.pidfile)
    pidfile.acquire()  # raises AlreadyRunning
    try:
        return asyncio.run(Arbiter(settings, console=console).run())
    finally:
        pidfile.release()
