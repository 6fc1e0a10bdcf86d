"""The daemon's side of plans: the runs, their control commands, schedules, resuming after a restart.

The arbiter makes one :class:`PlanService` and tells it three things: its
control commands join the daemon's table (:meth:`commands`: ``plan-start``,
``plan-stop``, ``plan-status``, ``plan-report``, all operator commands); the
agents' own events pass by it (:meth:`observe_agent_events`: a turn-end
message ending with ``TASK DONE: <id>`` is a claim); and it opens at daemon
start (:meth:`open`: every run that had not ended resumes, plan schedules are
set) and closes first at shutdown (:meth:`close`: the runs stop acting, their
state stays, the next daemon resumes them).  :meth:`claimed` is the one way a
claim comes in, whatever carried it (a hook, Codex's notify, and the agent
channel's ``task-state --done``).

It sees the daemon through :class:`PlanDaemon` (a Protocol); a run sees the
units and the repository through :mod:`.daemonside`.  Once a second it ticks
every run; a unit's change on the daemon's bus makes the runs that use it look
at once (a turn end is counted within milliseconds).  Units failing or
freezing are announced (``unit_failed``, ``unit_frozen``), in a plan or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import structlog

from ..control.framing import ControlError
from ..control.server import Command
from . import policy
from .notify import Announcer, stamp
from .planfile import PlanError, load_checked, parse_plan, plan_names
from .report import build
from .runner import PlanRunner
from .spec import PlanSpec, deadline_at
from .state import PlanState, PlanStore, RunStatus, StateError, TaskState

log = structlog.get_logger("agentd.plan")

#: Seconds added to each unit's checkpoint and stop time when the wind-down margin is computed.
STOP_SLACK = 5.0


class PlanDaemon(Protocol):
    """What plans need of the daemon (the Arbiter)."""

    settings: Any
    units: Any  # supervisor.daemon.table.UnitTable
    bus: Any  # supervisor.daemon.bus.ChangeBus
    confinement: Any
    load_errors: list[Any]

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


def wind_down_margin(spec: PlanSpec, units: Mapping[str, Any], default_stop: float) -> float:
    """Seconds before the deadline the wind-down begins, so that every unit is down by it."""
    if spec.model.plan.stop_before is not None:
        return spec.model.plan.stop_before
    longest = 0.0
    for name in spec.units:
        unit = units.get(name)
        if unit is None:
            continue
        cp = unit.checkpoint
        stop = unit.restart.stop_timeout or default_stop
        longest = max(longest, (cp.deadline + cp.grace if cp.enabled and cp.on_stop else 0.0) + stop)
    return longest + STOP_SLACK


class PlanService:
    """See the module docstring."""

    def __init__(self, daemon: PlanDaemon, clock: Callable[[], float] = time.time) -> None:
        self.daemon = daemon
        self.clock = clock
        self.root = Path(daemon.settings.project_root)
        self.state_dir = Path(daemon.settings.state_path)
        self.announcer = Announcer(daemon.spawn, getattr(daemon.settings, "notify", None))
        self.runners: dict[str, PlanRunner] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._scheduler: Any = None
        self._announced: set[str] = set()

    # ------------------------------------------------------------------ life
    def _refuse_agent_writable_notify(self) -> None:
        """The settings' ``[notify]`` command is not run when it runs what a unit's agent may write (it would run
        the agent's code outside every fence); ``agentd check`` says the same."""
        from ..config.runnable import command_problem

        notify = self.announcer.settings_notify
        if notify is None:
            return
        units = {n: u.spec for n, u in self.daemon.units.items()}
        problem = command_problem("[notify] command", notify.command, self.root, units, self.root)
        if problem:
            log.error("notify_refused", where=str(getattr(self.daemon.settings, "config_file", "") or "settings"),
                      error=problem)
            self.announcer.settings_notify = None

    async def open(self) -> None:
        self._refuse_agent_writable_notify()
        for name in PlanStore.names(self.state_dir):
            store = PlanStore(self.state_dir, name)
            try:
                state = store.load()
                if state is None or state.status is RunStatus.ENDED:
                    continue
                spec = parse_plan(self.root / "plans" / f"{name}.toml", store.frozen_source(), name)
            except (StateError, PlanError, OSError) as exc:
                log.error("plan_unreadable", plan=name, error=str(exc))
                continue
            runner = self._runner(spec, state, store)
            log.info("plan_resumed", plan=name, status=state.status.value)
            self.daemon.spawn(runner.resume())
        self._tasks = [self.daemon.spawn(self._ticker()), self.daemon.spawn(self._watch())]
        self._schedule(await asyncio.to_thread(self._scheduled_plans))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for runner in self.runners.values():
            runner.detach()
        if self._scheduler is not None:
            self._scheduler.shutdown()

    def _runner(self, spec: PlanSpec, state: PlanState, store: PlanStore) -> PlanRunner:
        from .daemonside import DaemonUnits, RepoWorkshop, check_environment  # pygit2: only once a plan runs

        units = self.daemon.units
        settings = self.daemon.settings
        state_rel = _relative(self.state_dir, self.root)
        work = RepoWorkshop(self.root, spec, store, lambda name: units[name].spec, check_environment(settings),
                            lambda: self.daemon.confinement.containment if self.daemon.confinement else None,
                            exclude=(".agent/", *((state_rel + "/",) if state_rel else ())))
        runner = PlanRunner(spec, state, store, DaemonUnits(units),
                            work, lambda event: self.announcer.announce(event, spec.notify), self.daemon.spawn,
                            self.clock)
        self.runners[spec.name] = runner
        return runner

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for runner in list(self.runners.values()):
                if runner.state.status is RunStatus.RUNNING:
                    self.daemon.spawn(runner.tick())

    async def _watch(self) -> None:
        """Units' changes: the runs that use a unit look at once; failures and freezes are announced."""
        sub = self.daemon.bus.subscribe()
        try:
            while True:
                for name in await sub.wait():
                    self._unit_events(name)
                    for runner in list(self.runners.values()):
                        if name in runner.spec.units and runner.state.status is RunStatus.RUNNING:
                            self.daemon.spawn(self._react(runner, name))
        finally:
            self.daemon.bus.unsubscribe(sub)

    async def _react(self, runner: PlanRunner, unit: str) -> None:
        await runner.observe(unit)
        await runner.step()

    def _unit_events(self, name: str) -> None:
        unit = self.daemon.units.get(name)
        if unit is None:
            return
        runner = next((r for r in self.runners.values() if name in r.spec.units
                       and r.state.status is not RunStatus.ENDED), None)
        extra = {"plan": runner.name} if runner else {}
        notify = runner.spec.notify if runner else None
        session = unit.driver.session_id if unit.driver else unit.last_session
        if unit.state.value == "failed":
            key = f"failed:{name}:{session}:{unit.reason}"
            if key not in self._announced:
                self._announced.add(key)
                self.announcer.announce({"event": "unit_failed", "time": stamp(self.clock()), "unit": name,
                                         "reason": unit.reason, **extra}, notify)
        frozen = unit.watch.frozen_now(session) if unit.driver else None
        if frozen:
            key = f"frozen:{name}:{session}:{frozen.get('state')}"
            if key not in self._announced:
                self._announced.add(key)
                self.announcer.announce({"event": "unit_frozen", "time": stamp(self.clock()), "unit": name,
                                         "freeze": frozen.get("state"), "reason": frozen.get("detail"), **extra}, notify)

    # ------------------------------------------------------------------ schedules
    def _scheduled_plans(self) -> list[PlanSpec]:
        """The plan files with a ``[schedule]`` (blocking: reads them)."""
        scheduled = []
        for name in plan_names(self.root):
            try:
                spec = parse_plan(self.root / "plans" / f"{name}.toml")
            except PlanError as exc:
                log.error("plan_invalid", plan=name, error=str(exc))
                continue
            if spec.model.schedule is not None:
                scheduled.append(spec)
        return scheduled

    def _schedule(self, scheduled: list[PlanSpec]) -> None:
        """Their cron starts, on the loop (the scheduler is apscheduler's on the daemon's loop)."""
        from ..schedule import UnitScheduler

        if not scheduled:
            return
        self._scheduler = UnitScheduler(self.state_dir / "plans", self._scheduled)
        self._scheduler.start()
        for spec in scheduled:
            for _action, missed in self._scheduler.set_unit(spec.name, spec.model.schedule):
                self.daemon.spawn(self._scheduled(spec.name, "start", missed))

    async def _scheduled(self, name: str, action: str, missed: bool) -> None:
        try:
            result = await self.start(name, trigger="schedule")
            log.info("plan_scheduled_start", plan=name, missed=missed, deadline=result["deadline"])
        except ControlError as exc:
            log.error("plan_scheduled_start_refused", plan=name, error=str(exc))

    # ------------------------------------------------------------------ commands
    async def start(self, name: str, trigger: str = "command") -> dict[str, Any]:
        runner = self.runners.get(name)
        if runner is not None and runner.state.status is not RunStatus.ENDED:
            raise ControlError(f"plan {name!r} is already running (started {stamp(runner.state.started_at)}); "
                               f"`agentd plan stop {name}` ends it")
        units = {n: u.spec for n, u in self.daemon.units.items()}
        refused = {Path(str(e.path)).stem: e.message for e in self.daemon.load_errors}
        taken = {u: r.name for r in self.runners.values() if r.state.status is not RunStatus.ENDED for u in r.spec.units}
        try:
            spec, warnings = await asyncio.to_thread(load_checked, self.root, name, units, refused, self.state_dir)
        except PlanError as exc:
            raise ControlError(str(exc)) from None
        shared = sorted(set(spec.units) & set(taken))
        if shared:
            raise ControlError(f"plan {name!r}: unit {shared[0]!r} works for plan {taken[shared[0]]!r}, which is "
                               "running: a unit serves one plan at a time; stop that one first, or wait for its end")
        now = self.clock()
        deadline = spec.deadline(now)
        margin = wind_down_margin(spec, units, self.daemon.settings.stop_timeout)
        if deadline - margin <= now:
            raise ControlError(f"plan {name!r}: its deadline {stamp(deadline)} is less than {margin:.0f}s away (the "
                               "time its units need to checkpoint and stop): set a later [plan] deadline")
        store = PlanStore(self.state_dir, name)
        from . import integrate
        from .integrate import GitError

        def begin() -> tuple[str, str, str]:
            head = integrate.run(self.root, (".agent/",), "head")
            tip, note = integrate.run(self.root, (".agent/",), "start_branch", spec.branch)
            store.begin(spec.source)
            return head, tip, note

        try:
            head, tip, note = await asyncio.to_thread(begin)
        except GitError as exc:
            raise ControlError(f"plan {name!r}: {exc}") from None
        state = PlanState(name=name, branch=spec.branch, started_at=now, deadline=deadline,
                          wind_down_at=deadline - margin, tokens_budget=spec.model.plan.tokens, base_commit=head,
                          tip=tip, tasks={t.id: TaskState(t.id, t.unit) for t in spec.tasks}, trigger=trigger)
        store.save(state)
        store.event({"event": "plan_started", "time": stamp(now), "plan": name, "trigger": trigger, "branch": note})
        runner = self._runner(spec, state, store)
        log.info("plan_started", plan=name, trigger=trigger, deadline=stamp(deadline), branch=spec.branch, note=note)
        self.daemon.spawn(runner.step())
        return {"plan": name, "branch": spec.branch, "branch_note": note, "deadline": stamp(deadline),
                "wind_down_at": stamp(deadline - margin), "tasks": len(spec.tasks), "units": list(spec.units),
                "warnings": warnings}

    async def stop(self, name: str) -> dict[str, Any]:
        runner = self.runners.get(name)
        if runner is None or runner.state.status is RunStatus.ENDED:
            raise ControlError(f"plan {name!r} is not running")
        await runner.stop("stopped by `agentd plan stop`")
        await runner.ended.wait()
        return build(runner.spec, runner.state)

    def report(self, name: str) -> dict[str, Any]:
        runner = self.runners.get(name)
        if runner is not None:
            return build(runner.spec, runner.state)
        return stored_report(self.root, self.state_dir, name)

    def status(self) -> list[dict[str, Any]]:
        out = []
        for name in sorted(set(self.runners) | set(PlanStore.names(self.state_dir))):
            try:
                report = self.report(name)
            except ControlError:
                continue
            out.append({k: report[k] for k in ("plan", "status", "started", "deadline", "ended", "end_reason",
                                               "branch", "totals")})
        return out

    async def claimed(self, unit: str, session: str | None, task: str | None, via: str) -> dict[str, Any]:
        """A claim of done from ``unit``'s agent (any channel): the run whose task it works on checks it."""
        for runner in self.runners.values():
            if runner.state.status is RunStatus.RUNNING and runner.state.of_unit(unit) is not None:
                return await runner.claim(unit, session, task, via)
        return {"ignored": f"unit {unit!r} works on no task of a running plan"}

    def observe_agent_events(self, table: dict[str, Command]) -> dict[str, Command]:
        """Wrap ``agent-event``: after the unit has the event, a claim in its last message goes to :meth:`claimed`."""
        original = table.get("agent-event")
        if original is None:
            return table

        async def handler(args: dict[str, Any]) -> Any:
            result = await original.handler(args)  # type: ignore[call-arg]
            event, unit = args.get("event"), args.get("unit")
            claim = policy.claim_in(event) if isinstance(event, dict) else None
            if claim is not None and isinstance(unit, str):
                via = str(event.get("hook_event_name") or event.get("type") or "agent event")
                session = args.get("session") if isinstance(args.get("session"), str) else None
                if session is None:  # every agent's notify names its session (AGENTD_SESSION): a bare claim is not one
                    answer: dict[str, Any] = {"ignored": "a claim must name the session it comes from"}
                else:
                    answer = await self.claimed(unit, session, claim.task, via)
                log.info("plan_claim", unit=unit, task=claim.task, via=via, **answer)
            return result

        return {**table, "agent-event": replace(original, handler=handler)}

    def commands(self) -> dict[str, Command]:
        def name_of(args: dict[str, Any]) -> str:
            name = args.get("plan")
            if not isinstance(name, str) or not name:
                raise ControlError("plan: the plan's name is required")
            return name

        async def start(args: dict[str, Any]) -> Any:
            return await self.start(name_of(args))

        async def stop(args: dict[str, Any]) -> Any:
            return await self.stop(name_of(args))

        async def status(args: dict[str, Any]) -> Any:
            return {"plans": await asyncio.to_thread(self.status)}

        async def report(args: dict[str, Any]) -> Any:
            return await asyncio.to_thread(self.report, name_of(args))

        return {
            "plan-start": Command(start, frozenset({"plan"}), "start a plan's run (plans/NAME.toml)"),
            "plan-stop": Command(stop, frozenset({"plan"}), "wind a plan's run down now and write its report"),
            "plan-status": Command(status, frozenset(), "every plan's run: its state and totals"),
            "plan-report": Command(report, frozenset({"plan"}), "a plan's report (per task and in all)"),
        }


def _relative(path: Path, root: Path) -> str | None:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def stored_report(root: Path, state_dir: Path, name: str) -> dict[str, Any]:
    """A run's report from its files alone (no daemon needed)."""
    store = PlanStore(state_dir, name)
    try:
        state = store.load()
        if state is None:
            raise ControlError(f"plan {name!r} has never run here (no {store.state_path})")
        spec = parse_plan(Path(root) / "plans" / f"{name}.toml", store.frozen_source(), name)
    except (StateError, PlanError, OSError) as exc:
        raise ControlError(str(exc)) from None
    return build(spec, state)


__all__ = ["PlanService", "deadline_at", "stored_report", "wind_down_margin"]
