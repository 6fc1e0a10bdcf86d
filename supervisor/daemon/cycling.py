"""One unit's continuity cycle: when it may begin, the op that runs it, and the unit as the cycle's Host.

:class:`UnitCycle` belongs to one :class:`~supervisor.daemon.unit.UnitSupervisor`.
It begins a cycle (:func:`supervisor.continuity.cycle.run`) as the unit's one
operation, when the unit runs, nothing else is in progress and no stop was
asked (:meth:`UnitCycle.now`: thresholds, freezes, a compaction announced;
:meth:`UnitCycle.command`: ``agentd checkpoint``; :meth:`UnitCycle.for_stop`:
a graceful stop), and it is the :class:`~supervisor.continuity.cycle.Host`
the protocol drives: the unit's state and activity, the checkpoint marker
persisted for a successor daemon, the old session's end, and the fresh
session, which a stop asked meanwhile replaces with stopping (it wins).

After the cycle: its record goes to history; a cycle that kept its session
because the notes could not be written is named on the unit's watch, which
backs threshold cycles off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..continuity import cycle
from ..continuity.policy import After, Trigger, checkpoint_prompt
from ..continuity.records import CycleRecord, StartReason
from .lifecycle import GiveUp, Restart, StayDown, UnitState
from .runtime import outcome

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.base import ContextFigure
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from ..continuity.wakeup import Wakeup
    from .conversation import Conversation
    from .lifecycle import RestartTracker
    from .runtime import Runtime
    from .watch import SessionWatch

log = structlog.get_logger("agentd")


class Cycled(Protocol):
    """The unit, as its cycle sees it (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    name: str
    spec: UnitSpec
    rt: Runtime
    state: UnitState
    driver: Driver | None
    down: str | None
    op: asyncio.Task[Any] | None
    op_what: str | None
    activity: str | None
    context: ContextFigure | None
    checkpoint_marker: dict[str, Any] | None
    last_cycle: dict[str, Any] | None
    last_wakeup: Wakeup | None
    cycled: int
    tracker: RestartTracker
    talk: Conversation
    watch: SessionWatch

    @property
    def busy(self) -> bool: ...
    def run_op(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]: ...
    def set_state(self, new: UnitState, reason: str | None = ..., **fields: Any) -> None: ...
    def set_activity(self, text: str | None, until: float | None = ...) -> None: ...
    async def delivered(self) -> str | None: ...
    async def end_session(self) -> None: ...
    def stopped(self, why: str) -> None: ...
    async def fresh_session(self, why: str, reason: StartReason) -> str | None: ...
    def hand_over(self, why: str) -> Driver: ...
    def apply(self, decision: Restart | GiveUp | StayDown, why: str | None) -> None: ...


class UnitCycle:
    """See the module docstring."""

    def __init__(self, unit: Cycled) -> None:
        self.unit = unit

    # ------------------------------------------------------------------ when a cycle begins
    def now(self, trigger: Trigger, *, interrupt: bool = False, deadline: float | None = None) -> None:
        """Begin a cycle if the unit runs, nothing else is in progress and no stop was asked."""
        unit = self.unit
        if (unit.state is UnitState.RUNNING and unit.driver is not None and not unit.busy
                and unit.down is None and not unit.rt.stopping):
            self.begin(trigger, interrupt=interrupt, deadline=deadline)

    async def command(self) -> dict[str, Any]:
        """``agentd checkpoint UNIT``: a cycle now (after a start still under way); its record."""
        unit = self.unit
        if unit.busy and unit.op_what == "start" and unit.op is not None:
            await asyncio.wait({unit.op})  # the session is there, the start hands it over in a moment
        if unit.busy:
            raise ValueError(f"unit {unit.name!r} is {unit.state.value}: an operation is already running "
                             f"({unit.activity or 'starting'})")
        if unit.state is not UnitState.RUNNING or unit.driver is None:
            raise ValueError(f"unit {unit.name!r} is {unit.state.value}, not running: nothing to checkpoint")
        record = await outcome(self.begin(Trigger.COMMAND))
        return record.as_dict() if record is not None else {"outcome": "failed", "unit": unit.name}

    def for_stop(self, why: str, deadline: float) -> asyncio.Task[Any]:
        """The checkpoint of a graceful stop (``deadline``: seconds); a stop never waits for a wakeup delivery."""
        self.unit.talk.cancel_delivery()
        return self.begin(Trigger.STOP, After.STOP, why=why, deadline=deadline)

    def begin(self, trigger: Trigger, after: After = After.RESPAWN, *, interrupt: bool = False,
              deadline: float | None = None, why: str | None = None) -> asyncio.Task[Any]:
        """Run a cycle as the unit's op (the unit must have a session)."""
        unit = self.unit
        assert unit.driver is not None
        spec = unit.spec
        prompt = checkpoint_prompt(spec) if spec.agent.types_own_text else None
        plan = cycle.Plan(trigger, prompt, after, interrupt, deadline or spec.checkpoint.deadline,
                          spec.checkpoint.grace, why)
        return unit.run_op(self._op(unit.driver, plan), f"checkpoint ({trigger.value})")

    async def _op(self, driver: Driver, plan: cycle.Plan) -> CycleRecord:
        unit = self.unit
        if unit.state is not UnitState.RUNNING or unit.driver is not driver:  # reaped before this op ran
            log.info("checkpoint_not_run", unit=unit.name, trigger=plan.trigger.value, state=unit.state.value)
            return CycleRecord(unit.name, plan.trigger.value, driver.session_id, flush="skipped",
                               outcome="not run: the session ended before the checkpoint began")
        log.info("checkpoint_due", unit=unit.name, trigger=plan.trigger.value,
                 context=unit.context.as_dict() if unit.context else None)
        try:
            record = await cycle.run(self, driver, unit.rt.memory(unit.spec.module, driver.env), plan, unit=unit.name,
                                     keeper=unit.rt.keeper(unit.spec, driver.env))
        finally:
            unit.set_activity(None)
            unit.checkpoint_marker = None
        unit.last_cycle = record.as_dict()
        unit.rt.record_cycle(record)
        if record.outcome.startswith(cycle.KEPT):
            unit.watch.memory_unwritable(
                f"the checkpoint's notes cannot be written to .agent/ ({'; '.join(record.notes) or record.flush}): "
                "the session is kept so its memory is not lost; make .agent/ writable (disk space, permissions)")
        return record

    # ------------------------------------------------------------------ the cycle's Host
    @property
    def clock(self) -> Callable[[], float]:
        return self.unit.rt.clock

    def set_state(self, state: UnitState, reason: str) -> None:
        self.unit.set_state(state, reason)

    def set_activity(self, text: str | None, until: float | None = None) -> None:
        self.unit.set_activity(text, until)

    async def pause(self, seconds: float) -> None:
        await self.unit.rt.sleep(seconds)

    async def mark(self, marker: dict[str, Any] | None) -> None:
        """The checkpoint in progress (persisted, so a crashed daemon's successor can finish it)."""
        unit = self.unit
        if marker is not None and unit.driver is not None:
            marker = {**marker, "transcript": unit.driver.transcript_path}
        unit.checkpoint_marker = marker
        await unit.rt.persist()

    async def delivered(self) -> str | None:
        return await self.unit.delivered()

    async def end_session(self) -> None:
        await self.unit.end_session()

    def stopped(self, why: str) -> None:
        self.unit.stopped(why)

    async def respawn(self, why: str) -> tuple[Driver | None, str | None, int | None]:
        """The fresh session: (driver, None, wakeup tokens), or (None, problem, None) after applying the
        restart policy, or after stopping when a stop was asked meanwhile (it wins)."""
        unit = self.unit
        if unit.down is not None or unit.rt.stopping:
            stop = unit.down or "daemon shutdown"
            unit.set_state(UnitState.STOPPING, stop)
            unit.stopped(stop)
            return None, f"{cycle.STOPPED_INSTEAD}: {stop}", None
        problem = await unit.fresh_session(why, StartReason.CYCLE)
        if problem is not None:
            unit.apply(unit.tracker.on_spawn_error(problem, unit.rt.clock()), f"could not respawn: {problem}")
            return None, problem, None
        unit.cycled += 1  # planned: status shows cycles apart from restarts and crashes
        driver = unit.hand_over(why)
        return driver, None, unit.last_wakeup.tokens if unit.last_wakeup else None
