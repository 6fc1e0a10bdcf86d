"""One plan run, carried out: the policy's decisions applied to the units, the checks and the branch.

A :class:`PlanRunner` holds a run's :class:`~supervisor.plan.state.PlanState`
and does what :mod:`.policy` decides, through two small Protocols and never
the Arbiter: :class:`Units` (look at a unit, give it a fresh session, type to
it, stop it) and :class:`Workshop` (the blocking work, off the loop: git
snapshots and commits, the checks, the task file).  The daemon's side of both
is :mod:`.service`; the tests replay whole nights with fakes and a fake clock.

What comes in: :meth:`tick` (once a second), :meth:`observe` (a unit
changed: a turn ended, a session began, it failed or froze), :meth:`claim`
(the agent says the task is done), :meth:`stop` (``agentd plan stop``).
Every step is written to the state file before it is acted on
(:meth:`save`), so :meth:`resume` after a daemon killed with -9 picks each
task up where it was: a check is run again, a commit is found on the branch
(or made), a task being worked on gets a fresh session.

Checks and commits go through one queue per plan (``_merge``): a task's check
runs on the tip it will be committed on, so each commit's checks pass on that
very commit, whatever the other units did meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from . import policy
from .notify import stamp
from .spec import PlanSpec, TaskSpec
from .state import BUSY, PlanState, PlanStore, RunStatus, Status, TaskState

if TYPE_CHECKING:  # pragma: no cover
    from .integrate import Candidate

log = structlog.get_logger("agentd.plan")

RUNNING = frozenset({"starting", "running", "checkpointing", "respawning"})


@dataclass(frozen=True)
class UnitLook:
    """A unit now, as the runner sees it."""

    state: str
    session: str | None
    turns: int  # turns ended in this session
    idle: bool
    context: int | None  # tokens in the agent's context now
    violations: int = 0
    frozen: dict[str, Any] | None = None
    reason: str | None = None
    queued: int = 0


class Units(Protocol):
    def look(self, name: str) -> UnitLook | None: ...
    async def fresh_session(self, name: str, why: str) -> str | None: ...  # the problem, or None
    async def stop(self, name: str, why: str, checkpoint: bool) -> None: ...
    def tell(self, name: str, text: str) -> bool: ...


class Workshop(Protocol):
    async def snapshot(self, unit: str) -> str: ...
    async def candidate(self, unit: str, tip: str, base: str, claimed: str) -> Candidate: ...
    async def check(self, task: TaskSpec, attempt: int, tree: str) -> list[dict[str, Any]]: ...
    async def commit(self, expected: str, tree: str, message: str) -> str: ...
    async def find_commit(self, since: str, task: str, tree: str | None) -> str | None: ...
    async def diffstat(self, commit: str) -> dict[str, Any]: ...
    async def keep(self, task: str, unit: str, tip: str, base: str | None, work: str) -> str | None: ...
    async def write_task(self, unit: str, text: str, state_line: str) -> None: ...
    async def report(self, spec: PlanSpec, state: PlanState) -> str | None: ...


class PlanRunner:
    """See the module docstring."""

    def __init__(self, spec: PlanSpec, state: PlanState, store: PlanStore, units: Units, work: Workshop,
                 announce: Callable[[dict[str, Any]], None], spawn: Callable[[Coroutine[Any, Any, Any]], Any],
                 clock: Callable[[], float] = time.time) -> None:
        self.spec, self.state, self.store = spec, state, store
        self.units, self.work, self.announce_to, self.spawn, self.clock = units, work, announce, spawn, clock
        self._step = asyncio.Lock()
        self._merge = asyncio.Lock()
        self._unit_locks: dict[str, asyncio.Lock] = {}
        self._seen: dict[str, tuple[str | None, int]] = {}  # unit -> (session, turns counted)
        self._launching: set[str] = set()
        self._checks: dict[str, asyncio.Task[Any]] = {}
        self._winding = False
        self.detached = False  # the daemon is stopping: the run acts no more (the next daemon resumes it)
        self.version = 0  # bumped at each save: the dashboard's stream sees that the run changed
        self.ended = asyncio.Event()

    @property
    def name(self) -> str:
        return self.spec.name

    # ------------------------------------------------------------------ bookkeeping
    def save(self) -> None:
        """Count the time of work in progress, then write the state (atomic)."""
        now = self.clock()
        for ts in self.state.tasks.values():
            if ts.status in BUSY and ts.span_from is not None:
                ts.seconds += max(0.0, now - ts.span_from)
                ts.span_from = now
        self.store.save(self.state)
        self.version += 1

    def announce(self, event: str, key: str | None = None, **fields: Any) -> None:
        """Record and send an event, once per ``key`` across resumes."""
        key = key or f"{event}:{fields.get('task') or fields.get('unit') or ''}"
        if key in self.state.sent:
            return
        self.state.sent.append(key)
        record = {"event": event, "time": stamp(self.clock()), "plan": self.name, **fields}
        self.store.save(self.state)
        self.store.event(record)
        self.announce_to(record)

    def _unit_lock(self, unit: str) -> asyncio.Lock:
        return self._unit_locks.setdefault(unit, asyncio.Lock())

    # ------------------------------------------------------------------ entry points
    async def resume(self) -> None:
        """Pick every task up where the last daemon left it (see the module docstring)."""
        async with self._step:  # no step assigns anything until every task is where it was
            todo = [(ts, ts.status) for ts in self.state.tasks.values() if ts.status in BUSY]
            for ts, _ in todo:
                ts.span_from = self.clock()
                if ts.status is Status.ACTIVE:
                    self._launching.add(ts.unit)  # its session is gone: no look until it has a new one
            self.save()
            for ts, status in todo:
                if status is Status.INTEGRATING:
                    await self._finish_integration(ts)
                elif status is Status.CHECKING:
                    self._queue_check(ts.id)
                elif status is Status.ACTIVE:
                    await self._launch(ts, why=f"plan {self.name}: resuming task {ts.id} after a daemon restart")
        if self.state.status is RunStatus.WINDING_DOWN:
            await self._wind_down(policy.WindDown("stopped", self.state.end_reason or "the run was winding down"))
        await self.tick()

    async def tick(self) -> None:
        """Once a second: look at the units, then do what is due."""
        if self.state.status is not RunStatus.RUNNING or self._step.locked() or self.detached:
            return
        for unit in self.spec.units:
            await self.observe(unit)
        await self.step()

    async def step(self) -> None:
        async with self._step:
            if self.state.status is not RunStatus.RUNNING or self.detached:
                return
            looks = {u: self.units.look(u) for u in self.spec.units}
            running = frozenset(u for u, look in looks.items() if look is not None and look.state in RUNNING)
            quiet = frozenset(u for u, look in looks.items()
                              if look is not None and look.state == "running" and look.idle and not look.queued)
            for decision in policy.reconcile(self.spec, self.state, self.clock(), running, quiet):
                await self._apply(decision)
                if self.state.status is not RunStatus.RUNNING or self.detached:
                    return
            if policy.finished(self.state):
                await self._wind_down(policy.WindDown("finished", "every task is done, parked or blocked"))

    async def _apply(self, d: policy.Decision) -> None:
        if isinstance(d, policy.WindDown):
            await self._wind_down(d)
        elif isinstance(d, policy.Park):
            await self._park(self.state.tasks[d.task], d.kind, d.reason)
        elif isinstance(d, policy.Block):
            ts = self.state.tasks[d.task]
            ts.status, ts.blocked_by, ts.ended_at = Status.BLOCKED, list(d.by), self.clock()
            ts.reason = f"blocked by {', '.join(d.by)}"
            self.save()
            self.announce("task_blocked", task=ts.id, unit=ts.unit, blocked_by=list(d.by), reason=ts.reason)
        elif isinstance(d, policy.Tell):
            ts = self.state.tasks[d.task]
            ts.turn_ended_at = None
            ts.nudges += d.why == "nudge"
            self.save()
            await self._tell(ts, d.text)
        elif isinstance(d, policy.Assign):
            await self._assign(self.state.tasks[d.task])
        elif isinstance(d, policy.Release):
            await self.units.stop(d.unit, f"plan {self.name}: no task ready for it", checkpoint=False)

    async def stop(self, reason: str) -> None:
        """``agentd plan stop``: wind down now."""
        if self.state.status is RunStatus.RUNNING:
            await self._wind_down(policy.WindDown("stopped", reason))

    def detach(self) -> None:
        """The daemon stops (the run goes on at its next start): stop checking, change nothing."""
        self.detached = True
        for task in self._checks.values():
            task.cancel()

    # ------------------------------------------------------------------ a task's life
    async def _assign(self, ts: TaskState) -> None:
        if ts.base is None:
            ts.base = self.state.units.get(ts.unit, {}).get("snapshot") or await self.work.snapshot(ts.unit)
        ts.status, ts.started_at = Status.ACTIVE, ts.started_at or self.clock()
        look = self.units.look(ts.unit)
        ts.violations_at_start = look.violations if look else 0
        await self._launch(ts, why=f"plan {self.name}: task {ts.id}")

    async def _launch(self, ts: TaskState, why: str) -> None:
        """The task's text into the module's task file, then a fresh session that starts from it."""
        task = self.spec.task(ts.id)
        ts.span_from, ts.turn_ended_at, ts.session, ts.scope_seen = self.clock(), None, None, None
        last = policy.failure_text(ts.checks[-1]["results"]) if ts.checks and not ts.checks[-1]["passed"] else None
        self._launching.add(ts.unit)  # until its new session runs, a look at the unit means nothing
        try:
            await self.work.write_task(ts.unit, policy.task_text(self.name, task, ts.attempts + 1, last),
                                       f"(plan {self.name}: task {ts.id}, attempt {ts.attempts + 1}; not started yet)")
            self.save()
            problem = await self.units.fresh_session(ts.unit, why)
        finally:
            self._launching.discard(ts.unit)
        if self.detached:
            return  # the daemon stops: the next one launches the task again
        look = self.units.look(ts.unit)
        if problem is not None or look is None:
            await self._park(ts, "unit", f"unit {ts.unit} could not start: {problem}")
            return
        ts.session = look.session
        ts.sessions += 1
        self._seen[ts.unit] = (look.session, look.turns)
        self.save()

    async def observe(self, unit: str) -> None:
        """What changed about ``unit``: sessions, turn ends, a failure, a freeze, violations."""
        if unit in self._launching or self.state.status is not RunStatus.RUNNING or self.detached:
            return
        async with self._unit_lock(unit):
            look = self.units.look(unit)
            ts = self.state.of_unit(unit, frozenset({Status.ACTIVE, Status.CHECKING}))
            if look is None or ts is None:
                return
            ts.violations = max(0, look.violations - (ts.violations_at_start or 0))
            if look.frozen:
                mark = f"unit_frozen:{unit}:{look.session}:{look.frozen.get('state')}"
                if mark not in self.state.sent:
                    ts.freezes.append({"time": stamp(self.clock()), **look.frozen})
                self.announce("unit_frozen", key=mark, unit=unit, task=ts.id, freeze=look.frozen.get("state"),
                              reason=look.frozen.get("detail"))
            if look.state == "failed":
                self.announce("unit_failed", key=f"unit_failed:{unit}:{look.session}:{look.reason}", unit=unit,
                              task=ts.id, reason=look.reason)
                if ts.status is Status.ACTIVE:
                    await self._park(ts, "unit", f"unit {unit} failed: {look.reason}")
                return
            if look.state == "inactive" and ts.status is Status.ACTIVE:
                await self._park(ts, "unit", f"unit {unit} stopped while working on it: {look.reason}")
                return
            session, counted = self._seen.get(unit, (ts.session, 0))
            if look.session is not None and look.session != session:
                ts.sessions += 1
                ts.cycles += 1  # a session agentd did not start for the task: a cycle or a crash's restart
                ts.session, session, counted = look.session, look.session, 0
            new_turns = look.turns - counted
            self._seen[unit] = (session, look.turns)
            if new_turns <= 0:
                return
            scope = await self.work.snapshot(unit)
            edited = ts.scope_seen is not None and scope != ts.scope_seen or (ts.scope_seen is None and scope != ts.base)
            ts.scope_seen = scope
            park = None
            for n in range(new_turns):
                park = policy.turn_ended(self.spec, self.state, ts.id, look.context or 0, edited and n == 0,
                                         self.clock(), claimed=ts.status is not Status.ACTIVE) or park
            self.save()
            if park is not None and ts.status is Status.ACTIVE:
                await self._park(ts, park.kind, park.reason)

    async def claim(self, unit: str, session: str | None, named: str | None, via: str) -> dict[str, Any]:
        """The agent says its task is done: snapshot its scope, then queue agentd's own check."""
        if self.detached:
            return {"ignored": "the daemon is stopping; claim again after its restart"}
        ts = self.state.of_unit(unit, frozenset({Status.ACTIVE}))
        if ts is not None and session is not None and session != ts.session:
            await self.observe(unit)  # a session that began since the last look (a cycle's respawn)
            ts = self.state.of_unit(unit, frozenset({Status.ACTIVE}))
        if ts is None:
            return {"ignored": f"unit {unit!r} has no task of plan {self.name} in progress"}
        if session is not None and ts.session is not None and session != ts.session:
            return {"ignored": f"session {session} is not the one working on task {ts.id}"}
        if named is not None and named != ts.id:
            return {"ignored": f"the claim names task {named!r}; unit {unit!r} works on {ts.id!r}"}
        ts.status = Status.CHECKING
        ts.claimed = await self.work.snapshot(unit)
        ts.turn_ended_at = None
        self.save()
        self.store.event({"event": "claimed", "time": stamp(self.clock()), "plan": self.name, "task": ts.id, "via": via})
        log.info("plan_task_claimed", plan=self.name, task=ts.id, unit=unit, via=via)
        self._queue_check(ts.id)
        return {"checking": ts.id, "attempt": ts.attempts + 1}

    def _queue_check(self, task_id: str) -> None:
        self._checks[task_id] = self.spawn(self._check(task_id))

    async def _check(self, task_id: str) -> None:
        ts, task = self.state.tasks[task_id], self.spec.task(task_id)
        async with self._merge:
            if ts.status is not Status.CHECKING or self.state.status is not RunStatus.RUNNING:
                return
            assert ts.base is not None and ts.claimed is not None
            cand = await self.work.candidate(ts.unit, self.state.tip, ts.base, ts.claimed)
            attempt = ts.attempts + 1
            if cand.tree is None:
                results = [{"command": "apply the task's change to the plan branch", "exit": None, "ok": False,
                            "timed_out": False, "seconds": 0.0,
                            "tail": f"it conflicts with the branch in: {', '.join(cand.conflicts)}"}]
            else:
                results = await self.work.check(task, attempt, cand.tree)
            passed = bool(results) and all(r.get("ok") for r in results)
            ts.checks.append({"attempt": attempt, "time": stamp(self.clock()), "passed": passed, "results": results,
                              "changed": list(cand.changed[:50]), "log": str(self.store.check_log(task_id, attempt))})
            decision = policy.verdict(self.spec, self.state, task_id, passed, results, self.clock())
            log.info("plan_task_checked", plan=self.name, task=task_id, attempt=attempt, passed=passed)
            if isinstance(decision, policy.Integrate):
                ts.status, ts.tree = Status.INTEGRATING, cand.tree
                self.save()
                await self._finish_integration(ts)
            elif isinstance(decision, policy.Tell):
                ts.status, ts.span_from = Status.ACTIVE, self.clock()
                await self.work.write_task(ts.unit, policy.task_text(self.name, task, ts.attempts + 1,
                                                                     policy.failure_text(results)),
                                           f"(plan {self.name}: attempt {ts.attempts} failed its check; fixing it)")
                self.save()
                await self._tell(ts, decision.text)
            else:
                await self._park(ts, decision.kind, decision.reason)
        await self.step()

    async def _tell(self, ts: TaskState, text: str) -> None:
        """Type ``text`` to the task's agent; with no session to type into, a fresh one (its task file has it)."""
        if not self.units.tell(ts.unit, text):
            await self._launch(ts, why=f"plan {self.name}: task {ts.id} goes on in a fresh session")

    async def _finish_integration(self, ts: TaskState) -> None:
        """Put the checked tree on the branch (or find it there, after a crash); the task is done."""
        task = self.spec.task(ts.id)
        assert ts.tree is not None
        commit = await self.work.find_commit(self.state.tip, ts.id, ts.tree)
        if commit is None:
            checks = "\n".join(f"  $ {r['command']}  (exit {r['exit']}, {r['seconds']}s)" for r in ts.checks[-1]["results"])
            ask = task.ask if len(task.ask) <= 2000 else task.ask[:2000] + "…"
            message = (f"plan {self.name}: {ts.id}: {task.ask.splitlines()[0][:60]}\n\n{ask}\n\n"
                       f"Checked by agentd (attempt {ts.attempts}, passed):\n{checks}\n\n"
                       f"{policy.trailers(self.name, ts.id, ts.attempts)}\n")
            try:
                commit = await self.work.commit(self.state.tip, ts.tree, message)
            except Exception as exc:  # noqa: BLE001 - the branch moved, or git failed: the run cannot go on safely
                log.error("plan_commit_failed", plan=self.name, task=ts.id, error=str(exc))
                await self._park(ts, "conflict", f"its commit could not be made: {exc}")
                self.state.status = RunStatus.WINDING_DOWN  # no step assigns anything now; the wind-down follows
                self.spawn(self._wind_down(policy.WindDown("stopped", f"the plan's branch cannot take commits: {exc}")))
                return
        self.state.tip = ts.commit = commit
        ts.diffstat = await self.work.diffstat(commit)
        self.save()  # the time up to now counts
        ts.status, ts.ended_at = Status.DONE, self.clock()
        self.state.units.setdefault(ts.unit, {})["snapshot"] = ts.claimed
        self.save()
        ts.span_from = None
        self.announce("task_done", task=ts.id, unit=ts.unit, commit=commit, attempts=ts.attempts)

    async def _park(self, ts: TaskState, kind: str, reason: str) -> None:
        if ts.settled:
            return
        check = self._checks.get(ts.id)
        if check is not None and check is not asyncio.current_task() and not check.done():
            check.cancel()
        was = ts.status
        self.save()
        ts.status, ts.kind, ts.reason, ts.ended_at, ts.span_from = Status.PARKED, kind, reason, self.clock(), None
        self.state.units.setdefault(ts.unit, {})["snapshot"] = None  # the next task starts from the tree as it is
        try:
            work = ts.claimed if was is Status.CHECKING and ts.claimed else await self.work.snapshot(ts.unit)
            ts.parked_ref = await self.work.keep(ts.id, ts.unit, self.state.tip, ts.base, work)
        except Exception as exc:  # noqa: BLE001 - keeping the work is a courtesy; the park stands
            log.error("plan_keep_failed", plan=self.name, task=ts.id, error=str(exc))
        self.save()
        log.warning("plan_task_parked", plan=self.name, task=ts.id, kind=kind, reason=reason)
        self.announce("task_parked", task=ts.id, unit=ts.unit, kind=kind, reason=reason, attempts=ts.attempts,
                      work=ts.parked_ref)

    # ------------------------------------------------------------------ the end
    async def _wind_down(self, d: policy.WindDown) -> None:
        if self.state.status is RunStatus.ENDED:
            return
        if self._winding:
            await self.ended.wait()
            return
        self._winding = True
        self.state.status, self.state.end_reason = RunStatus.WINDING_DOWN, d.reason
        self.save()
        log.info("plan_winding_down", plan=self.name, kind=d.kind, reason=d.reason)
        for task_id, task in list(self._checks.items()):
            if task is not asyncio.current_task() and self.state.tasks[task_id].status is Status.CHECKING:
                task.cancel()  # a check in progress ends (its process group with it); a commit under way does not
        async with self._merge:  # a commit under way is finished first
            pass
        for ts in self.state.tasks.values():
            if not ts.settled:
                ts.reason = f"{'not started' if ts.status is Status.PENDING else 'unfinished'}: {d.reason}"
                ts.kind = d.kind if d.kind != "finished" else None
                if ts.status in BUSY:
                    ts.status = Status.ACTIVE  # what it was doing is redone at the next run
        self.save()
        checkpoint = d.kind != "finished"
        looks = {u: self.units.look(u) for u in self.spec.units}
        await asyncio.gather(*(self.units.stop(u, f"plan {self.name}: {d.reason}", checkpoint=checkpoint)
                               for u, look in looks.items() if look is not None and look.state in RUNNING))
        for ts in self.state.tasks.values():
            ts.span_from = None
        self.state.status, self.state.ended_at = RunStatus.ENDED, self.clock()
        try:
            self.state.report = await self.work.report(self.spec, self.state)
        except Exception as exc:  # noqa: BLE001 - the state has everything; `agentd plan report` renders it again
            log.error("plan_report_failed", plan=self.name, error=str(exc))
        self.save()
        counts = {s.value: sum(1 for t in self.state.tasks.values() if t.status is s) for s in Status}
        self.announce("plan_ended", key="plan_ended", kind=d.kind, reason=d.reason, report=self.state.report,
                      tasks={k: v for k, v in counts.items() if v}, tokens=self.state.tokens, commits=sum(
                          1 for t in self.state.tasks.values() if t.commit))
        self.ended.set()
