"""One unit's supervisor: its state, its session, and every reaction to its events.

A :class:`UnitSupervisor` owns everything about one unit (as circus's
watcher owns its behaviour, and as s6 keeps supervision a small automaton):
the :class:`~supervisor.daemon.lifecycle.UnitState` and its transitions, the
running session (a :class:`~supervisor.adapters.driver.Driver`), the restart
policy, the queued text, the context figure.  Every event of the unit comes
in through one of its methods, and only they change its state:

start, stop, restart, checkpoint, reset-failed (commands); :meth:`reap` (the agent
exited; on SIGCHLD and each tick); :meth:`timer_fired` (backoff over, usage limit
reset); its :class:`~supervisor.daemon.watch.SessionWatch` each second; what is typed
and what hooks report: its :class:`~supervisor.daemon.conversation.Conversation`.
Its helpers, one idea each, see it through small views: its exits and timers
(:mod:`.exits`), its stop (:mod:`.stopping`), its continuity cycle (:mod:`.cycling`),
the work kept when a session ends otherwise (:mod:`.keeping`).

It depends on the daemon only through :class:`Runtime`, so the tests replay events into it
with fakes.  Long operations (a start, the cycle, a stop) run as one task at a time (``op``);
whatever ends them, even an unexpected error, leaves the unit in a named state a command can leave.

Events arrive in any order (thirty crash-looping units stopped at once interleave every
one of them), so each reaction first checks that the event still concerns the unit's
state: an exit reaped while an operation starts the session is left to that operation,
an exit or a backoff timer after a stop won is stale (logged, ignored).  A stop asked is
remembered (:attr:`UnitSupervisor.down`) until a start: nothing restarts or respawns the
unit meanwhile.  Whatever handling the unit still raises ends in the ``error`` state
(:meth:`UnitSupervisor.fault`), never in the end of the daemon.

Words: a unit is *started* and *stopped* (its state changes); a session is
*ended* (its whole process tree, :meth:`Driver.end`), *reaped* (its exit
status collected) and *closed* (its PTY and transcript).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import structlog

from ..adapters.base import Adapter, ContextFigure
from ..continuity import cycle
from ..continuity.policy import After, Trigger
from ..continuity.records import SessionRecord, StartReason
from ..continuity.wakeup import Wakeup, unit_wakeup
from ..schedule import UsageLimit
from ..session.process import ExitInfo
from .conversation import Conversation
from .cycling import UnitCycle
from .exits import UnitExits
from .keeping import WorkKeeping
from .runtime import Runtime, outcome
from .stopping import Stopping
from .watch import SessionWatch
from .lifecycle import GiveUp, Restart, RestartConfig, RestartTracker, StayDown, UnitState, check_transition

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec

log = structlog.get_logger("agentd")

STARTABLE = frozenset({UnitState.INACTIVE, UnitState.FAILED, UnitState.BACKOFF, UnitState.WAITING, UnitState.ERROR})
ACTIVE = frozenset({UnitState.RUNNING, UnitState.STARTING, UnitState.CHECKPOINTING, UnitState.RESPAWNING})


class UnitSupervisor:
    """One unit (see the module docstring)."""

    def __init__(self, spec: UnitSpec, runtime: Runtime, adapter: Adapter | None) -> None:
        self.spec = spec
        self.rt = runtime
        self.adapter = adapter
        self.tracker = RestartTracker(RestartConfig.of(spec.restart))
        self.state = UnitState.INACTIVE
        self.reason: str | None = None
        self.driver: Driver | None = None
        self.restarts = 0  # sessions started again after an exit or a restart command (not cycles)
        self.crashes = 0  # sessions that ended on their own while running (the restart policy's exits)
        self.cycled = 0  # continuity cycles that started a fresh session (planned: not restarts)
        self.last_exit: ExitInfo | None = None
        self.exit_planned = False  # the last exit was agentd ending the session (a cycle, a stop), not a crash
        self.last_session: str | None = None
        self.next_start_at: float | None = None  # wall clock, for status
        self.op: asyncio.Task[Any] | None = None  # the start, cycle or stop in progress
        self.op_what: str | None = None  # which: "start", "stop", "checkpoint (...)", "usage limit"
        self.down: str | None = None  # why a stop was asked: nothing restarts or respawns it until a start
        self.stops = 0  # stops asked so far (a start planned before one of them does not run)
        self.wakeup_state: str | None = None
        self.last_wakeup: Wakeup | None = None
        self.activity: str | None = None  # what agentd waits for, for status
        self.activity_until: float | None = None  # the clock time that wait ends at the latest
        self.activity_bound: float | None = None  # that wait's whole length, in seconds
        self.context: ContextFigure | None = None
        self.last_cycle: dict[str, Any] | None = None
        self.checkpoint_marker: dict[str, Any] | None = None
        self.failure: str | None = None  # why the adapter says the session cannot go on
        self.violations = 0
        self.stats: tuple[float, int] = (0.0, 0)
        self.exit_seen = False  # the current session's exit was collected and reacted to
        self._changed = asyncio.Event()
        self.talk = Conversation(self)
        self.watch = SessionWatch(self)
        self.keeping = WorkKeeping(self)  # the trail and the uncommitted work of a session that ended
        self.exits = UnitExits(self)  # its exits and its timers
        self.stopping = Stopping(self)
        self.cycles = UnitCycle(self)  # the continuity cycle, with this unit as its Host

    # ------------------------------------------------------------------ basics
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def clock(self) -> Callable[[], float]:
        return self.rt.clock

    @property
    def busy(self) -> bool:
        """True while an operation (start, cycle, stop) runs."""
        return self.op is not None and not self.op.done()

    @property
    def delivering(self) -> bool:
        return self.talk.delivering

    @property
    def stop_timeout(self) -> float:
        return self.spec.restart.stop_timeout or self.rt.default_stop_timeout

    def reconfigure(self, spec: UnitSpec, adapter: Adapter | None) -> None:
        """New settings from a reload (the unit is stopped)."""
        self.spec, self.adapter = spec, adapter
        self.tracker = RestartTracker(RestartConfig.of(spec.restart))
        if self.state in (UnitState.FAILED, UnitState.ERROR):
            self.set_state(UnitState.INACTIVE, "changed by reload")

    def set_state(self, new: UnitState, reason: str | None = None, **fields: Any) -> None:
        old = self.state
        check_transition(old, new)
        self.state = new
        if new in (UnitState.FAILED, UnitState.BACKOFF, UnitState.INACTIVE, UnitState.WAITING, UnitState.ERROR):
            self.reason = reason
        elif new in (UnitState.STARTING, UnitState.RUNNING):
            self.reason = None
        log.info("unit_state", unit=self.name, old=old.value, new=new.value, reason=reason,
                 session=self.driver.session_id if self.driver else self.last_session,
                 pid=self.driver.pid if self.driver else None, **fields)
        self.bump()

    def set_activity(self, text: str | None, until: float | None = None) -> None:
        """What agentd waits for now (status), and the clock time the wait ends at the latest."""
        until = until if text is not None else None
        if until != self.activity_until:  # a new wait: its whole length is what "up to N s" says
            self.activity_bound = None if until is None else max(0.0, until - self.rt.clock())
        self.activity, self.activity_until = text, until

    def bump(self) -> None:
        """Something about this unit changed: wake whoever waits on it."""
        self._changed.set()
        self._changed = asyncio.Event()
        self.rt.changed(self)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = self.rt.clock() + timeout
        while not predicate():
            remaining = deadline - self.rt.clock()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return predicate()
        return True

    def run_op(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run an operation as the unit's one op; an unexpected error never wedges the unit."""
        if self.busy:  # two operations at once would each drive the state (and one session would leak)
            coro.close()
            raise RuntimeError(f"{what}: the operation {self.op_what!r} is still running")

        async def guarded() -> Any:
            try:
                return await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("operation_failed", unit=self.name, operation=what, error=f"{type(exc).__name__}: {exc}",
                          exc_info=exc)
                try:
                    await self._recover(f"{what} failed: {type(exc).__name__}: {exc}")
                except Exception as again:  # noqa: BLE001 - the recovery itself failed: the error state
                    self.fault(again, f"recovering from a failed {what}")
                return None
        self.op, self.op_what = self.rt.spawn(guarded()), what
        self.op.add_done_callback(lambda _t: coro.close())  # cancelled before it began: never awaited
        return self.op

    def guarded(self, during: str, react: Callable[[], Any]) -> None:
        """Hand an event to this unit (the arbiter does); what it raises is the unit's error, never the daemon's end."""
        try:
            react()
        except Exception as exc:  # noqa: BLE001 - a bug handling one unit: named on that unit
            try:
                self.fault(exc, during)
            except Exception as again:
                log.error("unit_fault_failed", unit=self.name, error=f"{type(again).__name__}: {again}", exc_info=again)

    def fault(self, exc: BaseException, during: str) -> None:
        """agentd failed while handling this unit (a bug): log it with the unit, end its session in the
        background, and name the ``error`` state.  The daemon and the other units go on."""
        log.error("unit_error", unit=self.name, during=during, state=self.state.value,
                  error=f"{type(exc).__name__}: {exc}", exc_info=exc)
        self.cancel_timer()
        if self.busy and self.op is not asyncio.current_task():
            self.op.cancel()  # type: ignore[union-attr]
        self.abandoned()
        driver, self.driver = self.driver, None
        self.exit_seen = True
        if self.state is not UnitState.ERROR:
            self.set_state(UnitState.ERROR, f"agentd error while {during}: {type(exc).__name__}: {exc} "
                           "(see agentd.log); `agentd start` or `agentd stop` leaves it")
        if driver is not None:
            self.rt.spawn(self._end_lost(driver))

    async def _end_lost(self, driver: Driver) -> None:
        """End and close a session the unit no longer holds (after :meth:`fault`)."""
        try:
            await driver.end(self.stop_timeout, graceful=False)
        finally:
            driver.close()

    def abandoned(self) -> None:
        """An operation was cancelled (``--now``) or failed: forget what it was waiting for."""
        self.checkpoint_marker = None
        self.set_activity(None)
        self.talk.cancel_delivery()

    async def _recover(self, why: str) -> None:
        """After an unexpected error: end the session and let the restart policy decide."""
        self.checkpoint_marker = None
        self.set_activity(None)
        if self.driver is not None:
            await self._end_session(graceful=False)
        if self.state is UnitState.CHECKPOINTING:
            self.set_state(UnitState.RESPAWNING, why)  # a failed cycle still ends in a fresh session
        if self.state in (UnitState.STARTING, UnitState.RESPAWNING, UnitState.RUNNING):
            self.apply(self.tracker.on_spawn_error(why, self.rt.clock()), why)
        elif self.state is UnitState.STOPPING:
            self.set_state(UnitState.INACTIVE, why)

    # ------------------------------------------------------------------ start
    def start(self, why: str, reason: StartReason = StartReason.START) -> asyncio.Task[Any] | None:
        """A start asked for (a command, a requirement, a schedule, reset-failed): a stop asked before
        is forgotten.  inactive/failed/backoff/waiting/error -> starting; the session starts in the op."""
        if self.rt.stopping:
            log.info("start_refused", unit=self.name, why=why, reason="the daemon is stopping")
            return None
        if self.state not in STARTABLE or self.busy:
            return None
        self.down = None
        return self._start(why, reason)

    def restart_after(self, why: str, reason: StartReason) -> asyncio.Task[Any]:
        """A start of the unit's own (after its backoff or a usage limit): no stop is asked (see exits)."""
        return self._start(why, reason)

    def _start(self, why: str, reason: StartReason) -> asyncio.Task[Any]:
        self.cancel_timer()
        if self.state in (UnitState.INACTIVE, UnitState.FAILED, UnitState.ERROR):
            self.watch.run_began(self.rt.clock())
        if self.state in (UnitState.FAILED, UnitState.ERROR):
            self.tracker.reset()
        self.set_state(UnitState.STARTING, why)
        self.tracker.record_start(self.rt.clock())
        return self.run_op(self._start_op(why, reason), "start")

    async def _start_op(self, why: str, reason: StartReason) -> None:
        problem = await self.fresh_session(why, reason)
        if problem is not None:
            log.error("spawn_failed", unit=self.name, error=problem)
            self.apply(self.tracker.on_spawn_error(problem, self.rt.clock()), f"could not start: {problem}")
            return
        self.hand_over(why)

    def hand_over(self, why: str) -> Driver:
        """The fresh session is the unit's: running; an exit the reaper saw meanwhile is reacted to now."""
        driver = self.driver
        assert driver is not None
        self.set_state(UnitState.RUNNING, why, argv=driver.argv)
        self.reap()
        return driver

    async def fresh_session(self, why: str, reason: StartReason) -> str | None:
        """Build the wakeup, launch a session, begin delivering the wakeup; the problem, or None."""
        wake: Wakeup | None = None
        await self.keeping.settled()  # the session before this one is kept first: its wakeup shows it
        if self.spec.wakeup.on_start:
            try:
                wake = await asyncio.to_thread(unit_wakeup, self.spec, self.rt.root)
            except Exception as exc:  # noqa: BLE001 - start without a briefing, loudly
                log.error("wakeup_failed", unit=self.name, error=str(exc))
        if self.adapter is None:
            return f"no adapter for kind {self.spec.agent.kind!r}"
        try:
            driver = self.rt.launch(self, wake.text if wake else None)
        except Exception as exc:  # noqa: BLE001 - SpawnError, or any I/O error: a named reason, never a wedge
            return str(exc) or type(exc).__name__
        previous, previous_exit = self.last_session, self.last_exit
        self.driver, self.exit_seen = driver, False
        self.last_session = driver.session_id
        self.context = self.failure = None
        self.last_wakeup = wake
        first = driver.launched.first_input
        if wake is None:
            self.wakeup_state = None
        elif first is not None:
            self.wakeup_state = "pending"
            self.talk.deliver(driver, first, wake)
        else:
            self.wakeup_state = f"delivered via {driver.launched.wakeup_via}"
            log.info("wakeup_delivered", unit=self.name, session=driver.session_id, via=driver.launched.wakeup_via,
                     tokens=wake.tokens)
        recall = (await cycle.recall(self.rt.keeper(self.spec, driver.env), driver)  # a cycle records its own
                  if previous and wake and reason is not StartReason.CYCLE else None)
        self.rt.record_session(SessionRecord(
            self.name, driver.session_id, reason, why, previous=previous,
            previous_exit=previous_exit.describe() if reason is StartReason.CRASH and previous_exit else None,
            wakeup=driver.launched.wakeup_via if wake is not None else "none", recall=recall))
        self.bump()
        await self.rt.persist()  # before anything else: a daemon killed now must find this agent
        return None

    async def delivered(self) -> str | None:
        """Wait for the wakeup delivery in progress (if any); the delivery state."""
        return await self.talk.delivered()

    # ------------------------------------------------------------------ exits (daemon/exits.py)
    def reap(self) -> None:
        """Collect the session's exit if the agent is gone, and react (SIGCHLD, each tick)."""
        self.exits.reap()

    def timer_fired(self) -> None:
        """The backoff delay is over, or the usage limit has reset."""
        self.exits.timer_fired()

    def apply(self, decision: Restart | GiveUp | StayDown, why: str | None) -> None:
        """Apply the restart policy's decision after an exit or a failed start."""
        self.exits.apply(decision, why)

    def cancel_timer(self) -> None:
        self.exits.cancel_timer()

    # ------------------------------------------------------------------ ending
    async def end_session(self) -> None:
        """Graceful end of the current session (the cycle's step 5)."""
        await self._end_session(graceful=True)

    async def _end_session(self, graceful: bool) -> None:
        driver = self.driver
        if driver is None:
            return
        self.talk.cancel_delivery()
        survivors = await driver.end(self.stop_timeout, graceful)
        if survivors:
            log.warning("stop_timeout", unit=self.name, pids=survivors, timeout=self.stop_timeout)
        if driver.exit is not None:
            self.last_exit, self.exit_planned = driver.exit, True
            if not self.exit_seen:  # ended here before the reaper saw it: log the exit all the same
                log.info("session_exited", unit=self.name, session=driver.session_id, pid=driver.pid,
                         exit=driver.exit.describe(), uptime=round(driver.uptime, 3))
        driver.close()
        if self.driver is driver:
            self.driver = None
        self.exit_seen = True
        self.bump()

    def stopped(self, why: str) -> None:
        self.set_activity(None)
        self.set_state(UnitState.INACTIVE, why, exit=self.last_exit.describe() if self.last_exit else None)

    async def stop(self, why: str, checkpoint: bool = True, deadline: float | None = None) -> None:
        """A commanded stop; returns when the whole tree is gone (see :class:`Stopping`).
        ``checkpoint=False`` is ``--now``; ``deadline``: the clock time the stop must be done by."""
        await self.stopping.stop(why, checkpoint, deadline)

    async def stop_at_once(self, why: str) -> None:
        """Stopping now (synchronously, so an exit reaped meanwhile is this stop's), then end the session
        (also when a cycle cut short while it ended its session left the unit stopping)."""
        if self.state is not UnitState.STOPPING:
            self.set_state(UnitState.STOPPING, why)
        await outcome(self.run_op(self._end_and_stop(why), "stop"))

    async def _end_and_stop(self, why: str) -> None:
        driver = self.driver
        await self._end_session(graceful=False)
        await self.keeping.ended(driver, why)
        self.stopped(why)

    def cycle_for_stop(self, why: str, deadline: float) -> asyncio.Task[Any]:
        """The checkpoint of a graceful stop (``deadline``: seconds, within the stop's budget)."""
        return self.cycles.for_stop(why, deadline)

    async def restart(self, now: bool = False) -> None:
        if self.busy and not now:
            await asyncio.wait({self.op})  # type: ignore[arg-type]
        if (not now and self.state is UnitState.RUNNING and self.driver is not None
                and self.spec.checkpoint.enabled and self.spec.checkpoint.on_stop):
            await outcome(self.cycles.begin(Trigger.RESTART, After.RESPAWN))
            return
        await self.stop("restart command", checkpoint=False)
        if self.state in (UnitState.INACTIVE, UnitState.FAILED):
            self.restarts += 1
            task = self.start("restart command", StartReason.RESTART)
            if task is not None:
                await outcome(task)

    def reset_failed(self) -> None:
        if self.state in (UnitState.FAILED, UnitState.ERROR):
            self.tracker.reset()
            self.set_state(UnitState.INACTIVE, "reset-failed")
            if self.spec.unit.enabled:
                self.start("reset-failed", StartReason.RESTART)

    # ------------------------------------------------------------------ the cycle
    def checkpoint_now(self, trigger: Trigger, *, interrupt: bool = False, deadline: float | None = None) -> None:
        """Start a cycle now if the unit runs, nothing else is in progress and no stop was asked."""
        self.cycles.now(trigger, interrupt=interrupt, deadline=deadline)

    async def checkpoint(self) -> dict[str, Any]:
        """``agentd checkpoint UNIT``: a cycle now; its record."""
        return await self.cycles.command()

    def end_failed(self, reason: str) -> None:
        """The session cannot go on: end it; the reaper then applies the restart policy with ``reason``."""
        if self.driver is not None and self.failure is None:
            self.failure = reason
            self.rt.spawn(self.driver.end(self.stop_timeout, graceful=False))

    def limit_hit(self, limit: UsageLimit) -> None:
        """A usage limit: end the session, wait until it resets, resume from the wakeup."""
        self.run_op(self.exits.end_for_usage_limit(limit), "usage limit")
