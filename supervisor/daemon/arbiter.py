"""The arbiter: one event loop, one event queue, the table of units.

Everything that happens to the daemon becomes an event on one queue: a
signal (the handlers only enqueue), a unit's timer (backoff over, usage limit
reset), a file change seen by the scope guard's thread, a tick.  The loop
drains the queue and routes each event to the unit it concerns
(:class:`~supervisor.daemon.unit.UnitSupervisor`, which owns all of a
unit's reactions) or handles it itself (reload, shutdown).  Commands from the
control socket call the same unit methods.

Nothing one unit raises ends the loop: every event handed to a unit is
guarded, and what it raises is logged with the unit, which goes to its
``error`` state (:meth:`~supervisor.daemon.unit.UnitSupervisor.fault`).

A stop of the daemon has one budget (:meth:`Arbiter.stop_seconds`: the units'
longest stop chain, cut to what the service manager allows): units stop
within it, and at its end whatever still checkpoints is cut short.  Once it
has begun no unit starts or respawns.

The arbiter is also the units' :class:`~supervisor.daemon.unit.Runtime`:
it launches sessions (:func:`supervisor.adapters.driver.launch`) inside the
daemon's containment (:mod:`supervisor.daemon.confinement`), runs tasks,
persists ``agents.json`` and appends history records off the loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import structlog

from .. import __version__
from ..adapters.base import Adapter
from ..adapters.driver import Driver, launch
from ..config.check import drifted, load_project_units
from ..config.settings import Settings
from ..config.stopbudget import shutdown_seconds, stop_budget, stop_limit
from ..continuity.stoppolicy import STOP_RESERVE
from ..continuity.cycle import ModuleMemory
from ..continuity.keeper import UnitKeeper
from ..continuity.policy import checkpoint_prompt
from ..config.units import UnitError, UnitSpec, start_order
from ..continuity.records import CycleRecord, SessionRecord, StartReason, append_history, append_session
from ..eventindex.indexer import start_indexer
from ..plan.service import PlanService
from ..control.framing import ControlError
from ..control.server import ControlServer
from ..schedule import UnitScheduler
from ..scope.guard import ScopeGuard
from .bus import ChangeBus
from .commands import StatsSampler, command_table
from .confinement import Confinement
from .events import Event, FileChanged, Quit, Signal, TimerFired
from .inbox import Inbox
from .views import AttachUnits, Dashboard, NoDashboard, ScopeUnits
from .leftovers import AgentsFile, end_contained, end_leftovers, prepare_memory
from .lifecycle import RestartTracker, UnitState
from .table import UnitTable
from .reload import apply_reload, plan_reload
from .sdnotify import Notifier
from .unit import ACTIVE, UnitSupervisor

log = structlog.get_logger("agentd")


class Arbiter:
    """The daemon.  ``run()`` returns the process exit code."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 dashboard: Callable[[Any], Dashboard] | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.root = settings.project_root
        self.default_stop_timeout = settings.stop_timeout
        self.units = UnitTable(self.spawn, outside=bool(settings.only_units))
        self.load_errors: list[UnitError] = []
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._agents = AgentsFile(settings.state_path)
        self._notifier = Notifier()
        self._scheduler: UnitScheduler | None = None
        self._scope = ScopeGuard(self.root, settings.state_path, ScopeUnits(self.units, self.root),
                                 lambda rel: self.post(FileChanged(rel)), self.spawn, clock,
                                 units_dir=settings.units_path)
        self.confinement: Confinement | None = None  # chosen in run(), in the daemon process
        self._server: ControlServer | None = None
        self.started_wall = time.time()
        self._stats = StatsSampler(settings.status_interval, clock)
        self._persist_due = False
        self._persist_lock = asyncio.Lock()
        self._shutdown: asyncio.Task[Any] | None = None
        self.exit_code = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.bus = ChangeBus()  # units' changes, for the dashboard's streams
        self.web: Dashboard = dashboard(self) if dashboard is not None else NoDashboard()  # handed in by the CLI
        self.plans = PlanService(self)  # plans: the overnight runs (supervisor/plan/)

    # ------------------------------------------------------------------ the loop
    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            loop.add_signal_handler(sig, self._events.put_nowait, Signal(sig))
        self.confinement = Confinement.discover(self.settings, self.spawn, self.clock)
        await end_contained(self.confinement.containment, self.settings.state_path)
        await end_leftovers(self._agents, self.settings.state_path, self.root, self.settings.stop_timeout, self.clock)
        await asyncio.to_thread(prepare_memory, self.root, self.settings.state_path)
        self._scheduler = UnitScheduler(self.settings.state_path, self._scheduled)
        self._scheduler.start()
        catch_up = await self._load()
        table = self.plans.observe_agent_events({**command_table(self, self._attach), **self.plans.commands()})
        self._server = ControlServer(self.settings.socket_path, table, callers=self.confinement)
        await self._server.start()
        await self.plans.open()  # runs that had not ended resume; plan schedules are set
        await self.web.open(table)  # serves now with [web] enabled, else when `agentd web` asks
        log.info("daemon_started", pid=os.getpid(), version=__version__, root=str(self.root))
        self.spawn(self._ticker())
        self.spawn(Inbox(self.root, self.settings.state_path, lambda: {n: u.spec for n, u in self.units.items()},
                         claim=self.plans.claimed).run())
        self._scope.start_if_needed()
        indexer = start_indexer(self.settings)  # the event index, on a thread of its own
        startup = self.spawn(self._start_all(catch_up))
        startup.add_done_callback(lambda _t: self._notifier.ready(self._summary()))
        while True:
            event = await self._events.get()
            if isinstance(event, Quit):
                break
            self._dispatch(event)
        await self._server.close()
        if indexer is not None:
            await asyncio.to_thread(indexer.stop)
        await self.web.close()
        self._scheduler.shutdown()
        await self._scope.stop()
        log.info("daemon_stopped", pid=os.getpid())
        return self.exit_code

    @property
    def stopping(self) -> bool:
        """The daemon is stopping: no unit starts or respawns (Runtime)."""
        return self._shutdown is not None

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Signal):
            if event.number == signal.SIGCHLD:
                self._reap()
            elif event.number in (signal.SIGTERM, signal.SIGINT):
                log.info("signal_received", signal=signal.Signals(event.number).name, action="shutdown")
                self.spawn(self.shutdown())
            elif event.number == signal.SIGHUP:
                log.info("signal_received", signal="SIGHUP", action="reload")
                self.spawn(self.reload())
        elif isinstance(event, TimerFired):
            if self.units.get(event.unit.name) is event.unit:
                event.unit.guarded("restarting it after its backoff", event.unit.timer_fired)
        elif isinstance(event, FileChanged):
            self._scope.changed(event.path)

    def post(self, event: Event) -> None:
        """Enqueue an event (thread-safe: the scope guard's watcher thread posts file changes)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    def _reap(self) -> None:
        for unit in list(self.units.values()):
            unit.guarded("reaping its session", unit.reap)
        if self.confinement is not None:
            self.confinement.reap()

    async def _ticker(self) -> None:
        """Once a second: reap (a SIGCHLD may be coalesced), each unit's tick, watchdog, the fence's refusals."""
        watchdog = self._notifier.watchdog_interval
        last_ping = 0.0
        while True:
            await asyncio.sleep(1.0)
            now = self.clock()
            if watchdog and now - last_ping >= watchdog:
                self._notifier.watchdog()
                last_ping = now
            try:
                self._reap()
                for unit in list(self.units.values()):
                    unit.guarded("watching its session", unit.watch.tick)
                if self.confinement is not None:
                    await self.confinement.tick(list(self.units.values()), self._scope)
                if self._persist_due:
                    await self.persist()
            except Exception as exc:
                log.error("tick_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)

    # ------------------------------------------------------------------ Runtime (for the units)
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
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

    def call_later(self, delay: float, unit: UnitSupervisor) -> asyncio.TimerHandle:
        assert self._loop is not None
        return self._loop.call_later(delay, self._events.put_nowait, TimerFired(unit))

    def launch(self, unit: UnitSupervisor, wakeup: str | None) -> Driver:
        assert self._loop is not None and unit.adapter is not None and self.confinement is not None
        driver = launch(unit.spec, self.settings, unit.adapter, wakeup, self._loop, clock=self.clock,
                        containment=self.confinement.containment, person_typing=unit.talk.person_typing)
        driver.watcher.on_change = lambda: self.bus.publish(unit.name)  # a turn started or ended
        self._persist_due = True
        return driver

    def gave_up(self, unit: UnitSupervisor) -> None:
        """A unit is down on its own.  Under ``run-unit`` (systemd owns restarts) the daemon exits with it:
        0 when the agent exited cleanly, 1 otherwise, and systemd's Restart= decides."""
        if self.settings.only_units and self._shutdown is None:
            self.exit_code = 0 if unit.last_exit is not None and unit.last_exit.success else 1
            log.info("run_unit_ended", unit=unit.name, exit_code=self.exit_code, reason=unit.reason)
            self.spawn(self.shutdown())

    def changed(self, unit: UnitSupervisor) -> None:
        self._persist_due = True
        self.bus.publish(unit.name)
        self._notifier.status(self._summary())
        try:
            self.units.changed(unit)
        except Exception as exc:
            log.error("dependents_failed", unit=unit.name, error=f"{type(exc).__name__}: {exc}", exc_info=exc)

    def record_cycle(self, record: CycleRecord) -> None:
        log.info("checkpoint_cycle", **{k: v for k, v in record.as_dict().items() if k != "unit"}, unit=record.unit)
        self.spawn(asyncio.to_thread(append_history, self.settings.state_path, record))

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def memory(self, module: str, env: Mapping[str, str] | None = None) -> ModuleMemory:
        return ModuleMemory(self.root, module, env)

    def keeper(self, spec: UnitSpec, env: Mapping[str, str] | None = None) -> UnitKeeper:
        """What keeps a session's trail and uncommitted work (continuity/keeper.py)."""
        return UnitKeeper(self.root, spec.name, spec.module, spec.scope.paths, env=env or spec.agent.env,
                          prompt=checkpoint_prompt(spec), forbid=spec.scope.forbid)

    def record_session(self, record: SessionRecord) -> None:
        self.spawn(asyncio.to_thread(append_session, self.settings.state_path, record))

    async def persist(self) -> None:
        """Write ``agents.json`` now (off the loop; one writer at a time, newest data last)."""
        self._persist_due = False
        async with self._persist_lock:
            try:
                await asyncio.to_thread(self._agents.write, self._agents.snapshot(self.units.values()))
            except OSError as exc:  # a full or read-only disk must not end a session: retried each tick
                self._persist_due = True
                log.error("agents_file_unwritable", error=f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ units
    def _adapter(self, spec: UnitSpec) -> Adapter | None:
        from ..adapters import make_adapter

        try:
            return make_adapter(spec, self.settings)
        except Exception as exc:  # noqa: BLE001 - reported at start, never fatal to the daemon
            log.error("adapter_unavailable", unit=spec.name, error=str(exc))
            return None

    def _new_unit(self, spec: UnitSpec) -> UnitSupervisor:
        return self._restarts_by(UnitSupervisor(spec, self, self._adapter(spec)))

    def _restarts_by(self, unit: UnitSupervisor) -> UnitSupervisor:
        """Under run-unit, systemd's Restart= restarts the unit, not agentd."""
        if self.settings.only_units:
            unit.tracker = RestartTracker(replace(unit.tracker.config, policy="no"))
        return unit

    async def _load_specs(self) -> dict[str, UnitSpec]:
        only = set(self.settings.only_units)
        specs, errors = await asyncio.to_thread(load_project_units, self.settings.units_path, self.root, only or None)
        self.load_errors = errors
        for err in errors:
            log.error("unit_invalid", path=str(err.path), error=err.message)
        return specs

    async def _load(self) -> dict[str, list[tuple[str, bool]]]:
        """Read the unit files; return the schedules' catch-up runs."""
        specs = await self._load_specs()
        for name in start_order(specs):
            self.units.add(self._new_unit(specs[name]))
        return {name: self._schedule(self.units[name]) for name in start_order(specs)}

    def _schedule(self, unit: UnitSupervisor) -> list[tuple[str, bool]]:
        assert self._scheduler is not None
        sched = unit.spec.schedule
        if not (sched.start or sched.stop):
            self._scheduler.remove_unit(unit.name)
            return []
        return self._scheduler.set_unit(unit.name, sched)

    async def _start_all(self, catch_up: dict[str, list[tuple[str, bool]]]) -> None:
        only = self.settings.only_units
        await self.units.start([n for n, u in self.units.items() if u.spec.unit.enabled or n in only], "enabled at daemon start")
        for name, runs in catch_up.items():
            for action, missed in runs:
                await self._scheduled(name, action, missed)

    async def _scheduled(self, name: str, action: str, missed: bool) -> None:
        unit = self.units.get(name)
        if unit is None:
            return
        log.info("schedule_fired", unit=name, action=action, missed=missed)
        why = f"scheduled {action}" + (" (missed run)" if missed else "")
        if action == "start":
            await self.units.start([name], why, StartReason.SCHEDULE)
        elif unit.state not in (UnitState.INACTIVE, UnitState.FAILED):
            await unit.stop(why, checkpoint=True)

    # ------------------------------------------------------------------ daemon-wide commands
    def _targets(self, names: list[str] | None, default: Callable[[UnitSupervisor], bool]) -> list[UnitSupervisor]:
        from .commands import unit_of

        if names:
            return [unit_of(self, n) for n in names]
        return [self.units[n] for n in start_order({k: u.spec for k, u in self.units.items()}) if default(self.units[n])]

    async def start_units(self, names: list[str] | None) -> dict[str, str]:
        if self.stopping:
            raise ControlError("the daemon is stopping: no unit starts (start it again once it has stopped)")
        targets = self._targets(names, lambda u: u.spec.unit.enabled)
        warnings = await self._drifted(targets)
        already = {u.name for u in targets if u.state in ACTIVE}
        also = await self.units.start([u.name for u in targets if u.name not in already], "start command")
        return {**{u.name: "already running" if u.name in already else u.state.value for u in targets}, **also, **warnings}

    async def _drifted(self, targets: list[UnitSupervisor]) -> dict[str, list[str]]:
        """What start and restart say of units whose file changed or no longer loads (they run what was loaded)."""
        found = await asyncio.to_thread(drifted, [u.spec for u in targets], self.root)
        for line in found:
            log.warning("unit_file_drift", detail=line)
        return {"warnings": found} if found else {}

    async def stop_units(self, names: list[str] | None, why: str = "stop command", now: bool = False,
                         deadline: float | None = None) -> dict[str, str]:
        targets = self._targets(names, lambda u: True)
        also = await self.units.stop([u.name for u in targets], why, checkpoint=not now, deadline=deadline)
        return {**{u.name: u.state.value for u in targets}, **also}  # dependents stopped too, with why

    async def restart_units(self, names: list[str] | None, now: bool = False) -> dict[str, str]:
        if self.stopping:
            raise ControlError("the daemon is stopping: no unit restarts")
        targets = self._targets(names, lambda u: u.state is not UnitState.INACTIVE or u.spec.unit.enabled)
        warnings = await self._drifted(targets)
        await self.units.restart([u.name for u in targets], now)
        return {**{u.name: u.state.value for u in targets}, **warnings}

    async def reload(self) -> dict[str, Any]:
        specs = await self._load_specs()
        plan = plan_reload(self.units.specs, specs, self.load_errors)
        report: dict[str, Any] = await apply_reload(self.units, plan, specs, make=self._new_unit,
                                                    reconfigure=self._reconfigure, schedule=self._schedule)
        self._scope.start_if_needed()
        log.info("reloaded", **report, errors=len(self.load_errors))
        return {**report, "errors": [str(e) for e in self.load_errors]}

    def _reconfigure(self, unit: UnitSupervisor, spec: UnitSpec) -> None:
        unit.reconfigure(spec, self._adapter(spec))
        self._restarts_by(unit)

    async def broadcast(self, text: str, origin: str | None) -> dict[str, Any]:
        """Tell every other running unit, at its next turn end, about a global decision."""
        told = []
        for unit in self.units.values():
            if unit.name != origin and unit.state in ACTIVE:
                if unit.talk.queue(f"global decision recorded: {text}; see .agent/decisions.log").get("queued"):
                    told.append(unit.name)
        log.info("global_decision_broadcast", origin=origin, units=told)
        return {"told": told}

    async def status(self, names: list[str] | None, stats: bool = True) -> dict[str, Any]:
        from .commands import status, unit_of

        targets = [unit_of(self, n) for n in names] if names else list(self.units.values())
        if stats:  # the dashboard's live cards skip the CPU/RSS sample (psutil over every tree)
            await self._stats.refresh(targets)
        return status(self, targets, self._scheduler)

    async def shutdown(self, now: bool = False) -> dict[str, Any]:
        if self._shutdown is None:
            self._shutdown = asyncio.ensure_future(self._stop_everything(now))
        elif now:  # a graceful shutdown is under way: --now cuts its checkpoints short
            await self.stop_units(None, why="daemon shutdown (now)", now=True)
        await asyncio.shield(self._shutdown)
        return {"stopped": True, "units": {u.name: {"state": u.state.value, "reason": u.reason}
                                           for u in self.units.values()}}

    def stop_seconds(self) -> tuple[float, str]:
        """The daemon's one stop budget, in seconds, and where it comes from (for status and the stop)."""
        try:
            limit = stop_limit(self.settings.service_stop_timeout, os.environ, "the daemon's environment")
        except ValueError:
            limit = None
        return shutdown_seconds(stop_budget(self.units.specs, self.default_stop_timeout), limit)

    async def _stop_everything(self, now: bool) -> None:
        self._notifier.stopping()
        seconds, source = self.stop_seconds()
        log.info("daemon_stopping", budget=round(seconds, 1), source=source)
        await self.plans.close()  # runs stop acting (their state stays: the next daemon resumes them)
        self.units.stopping_all = True
        deadline = self.clock() + seconds
        stop = asyncio.ensure_future(self.stop_units(None, why="daemon shutdown", now=now, deadline=deadline))
        # each checkpoint's own deadline leaves STOP_RESERVE and its stop_timeout: only one that overran it is cut
        reserve = max((u.stop_timeout for u in self.units.values()), default=0.0)
        if seconds > reserve + STOP_RESERVE:  # (else no checkpoint fits: the units stop at once by themselves)
            done, _ = await asyncio.wait({stop}, timeout=seconds - reserve)
            if not done:  # the units' own caps should have held: cut whatever still checkpoints
                log.warning("stop_budget_spent", budget=round(seconds, 1), units=[
                    u.name for u in self.units.values() if u.state not in (UnitState.INACTIVE, UnitState.FAILED)])
                await self.stop_units(None, why="daemon shutdown (the stop budget is spent)", now=True)
        await stop
        if self.confinement is not None:
            await self.confinement.shutdown(self.settings.stop_timeout)
        self._agents.remove()
        self._events.put_nowait(Quit())

    async def _attach(self, args: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from ..control.attach import serve_attach

        await serve_attach(AttachUnits(self), args, reader, writer)

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for unit in self.units.values():
            counts[unit.state.value] = counts.get(unit.state.value, 0) + 1
        return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no units"
