"""A unit's stop: one at a time, the checkpoint first unless it cannot help, within the stop's budget.

:class:`Stopping` belongs to one :class:`~supervisor.daemon.unit.UnitSupervisor`
and carries out :meth:`~supervisor.daemon.unit.UnitSupervisor.stop`:

* **a stop wins.**  Asking for a stop marks the unit down at once
  (``unit.down``): from then on no backoff timer restarts it, no cycle
  respawns it and no start planned earlier runs, until a start is asked.
* **one stop at a time.**  A second stop joins the first; a ``--now`` (or
  the end of the budget) cuts short whatever runs (a start, a cycle, the
  graceful stop's own checkpoint), never the ending of a session.
* **the checkpoint first, unless it cannot help.**  Whether to ask the agent
  for its notes, and for how long, is :func:`supervisor.continuity.stoppolicy.at_stop`:
  an agent that cannot take a turn (a blocking screen, a failure, a stopped
  process, a wakeup never taken) is stopped at once and the reason is said.
* **within the budget.**  ``deadline`` is the clock time the whole stop must
  be done by (the daemon's one budget, inside ``TimeoutStopSec``): an
  operation in progress is waited for only until the room left is what
  ending the agent needs, and a checkpoint gets only the room left.

Whatever the stop still raises is the unit's ``error`` (logged with the
unit); the unit still ends inactive, as asked.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..continuity.policy import Freeze
from ..continuity.stoppolicy import AtStop, CheckpointFirst, at_stop, cannot_take_a_turn, room_for_checkpoint
from .lifecycle import UnitState
from .runtime import outcome

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from .conversation import Conversation
    from .runtime import Runtime
    from .watch import SessionWatch

log = structlog.get_logger("agentd")

#: Named freezes that keep the agent from taking a turn (a checkpoint at stop would only wait).
NO_TURN = frozenset({Freeze.BLOCKED_SCREEN.value, Freeze.APPROVAL_WAIT.value, Freeze.STOPPED_PROCESS.value,
                     Freeze.MEMORY_UNWRITABLE.value})
#: States with a session (or one being started, or ended) that a stop must end (a cycle cut short while it
#: ended the old session leaves ``stopping``).
WITH_SESSION = frozenset({UnitState.RUNNING, UnitState.STARTING, UnitState.CHECKPOINTING, UnitState.RESPAWNING,
                          UnitState.STOPPING})
#: The operations that end a session: a stop waits for them, never cuts them.
ENDING = frozenset({"stop", "usage limit"})


class Stopped(Protocol):
    """The unit, as its stop sees it (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    name: str
    spec: UnitSpec
    rt: Runtime
    state: UnitState
    driver: Driver | None
    op: asyncio.Task[Any] | None
    op_what: str | None
    down: str | None
    stops: int
    failure: str | None
    wakeup_state: str | None
    talk: Conversation
    watch: SessionWatch

    @property
    def busy(self) -> bool: ...
    @property
    def stop_timeout(self) -> float: ...
    def set_state(self, new: UnitState, reason: str | None = ..., **fields: Any) -> None: ...
    def set_activity(self, text: str | None, until: float | None = ...) -> None: ...
    def cancel_timer(self) -> None: ...
    def abandoned(self) -> None: ...
    def fault(self, exc: BaseException, during: str) -> None: ...
    def cycle_for_stop(self, why: str, deadline: float) -> asyncio.Task[Any]: ...
    async def stop_at_once(self, why: str) -> None: ...


class Stopping:
    """See the module docstring."""

    def __init__(self, unit: Stopped) -> None:
        self.unit = unit
        self.task: asyncio.Task[None] | None = None
        self.now = False  # a --now (or the end of the budget) was asked: no checkpoint, nothing waited for
        self.deadline: float | None = None  # the clock time the stop must be done by

    async def stop(self, why: str, checkpoint: bool, deadline: float | None) -> None:
        unit = self.unit
        unit.down = why
        unit.stops += 1
        unit.talk.sends.clear()
        unit.cancel_timer()  # a restart after backoff or a usage limit would start it again
        task = self.task
        if task is None or task.done():
            self.deadline = deadline
            task = self.task = unit.rt.spawn(self._stop(why, checkpoint))
        elif deadline is not None:  # a stop joins the one under way: the earlier deadline holds
            self.deadline = deadline if self.deadline is None else min(self.deadline, deadline)
        if not checkpoint:
            self.now = True
            self.cut_short("--now")
        await outcome(task)

    def cut_short(self, why: str) -> None:
        """Cancel the operation in progress (a start, a cycle, a checkpoint), never the ending of a session."""
        unit = self.unit
        if unit.busy and unit.op_what not in ENDING:
            log.info("operation_cut_short", unit=unit.name, operation=unit.op_what, why=why)
            unit.op.cancel()  # type: ignore[union-attr]

    def room(self) -> float | None:
        """Seconds left of the stop's budget (None: no budget)."""
        return None if self.deadline is None else self.deadline - self.unit.rt.clock()

    def seen(self) -> AtStop:
        """What the stop sees of the session (for :func:`~supervisor.continuity.stoppolicy.at_stop`)."""
        unit, driver = self.unit, self.unit.driver
        if driver is None:
            return AtStop()
        try:
            failure = unit.failure or driver.failure()
        except Exception:  # noqa: BLE001 - a broken probe is no reason to hold a stop
            failure = None
        blocked = driver.blocked()
        frozen = unit.watch.frozen_now(driver.session_id)
        return AtStop(process_stopped=driver.process_stopped(), failure=failure,
                      blocked=f"{blocked.kind.value} ({blocked.todo})" if blocked is not None else None,
                      frozen=frozen["detail"] if frozen and frozen["state"] in NO_TURN else None,
                      wakeup=unit.wakeup_state)

    async def _stop(self, why: str, checkpoint: bool) -> None:
        unit = self.unit
        try:
            await self._carry_out(why, checkpoint)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one unit's bug is its error state, and it still ends down
            unit.fault(exc, "stopping")
            if unit.state is UnitState.ERROR:
                unit.set_state(UnitState.INACTIVE, f"{why} (after an agentd error: see agentd.log)")
        finally:
            self.now, self.deadline = False, None

    async def _carry_out(self, why: str, checkpoint: bool) -> None:
        unit = self.unit
        if unit.busy:
            what = unit.op_what or ""
            if self.now or not checkpoint or what == "start" or cannot_take_a_turn(self.seen()) is not None:
                self.cut_short("a start, --now, or an agent that cannot take a turn")
            await self._wait_op()
            if what.startswith("checkpoint"):
                checkpoint = False  # it has just checkpointed (and, with the stop asked, it does not respawn)
        state = unit.state
        if state in (UnitState.BACKOFF, UnitState.WAITING, UnitState.ERROR):
            unit.cancel_timer()
            unit.set_state(UnitState.INACTIVE, why)
            return
        if state not in WITH_SESSION:
            return  # inactive or failed already
        cp = unit.spec.checkpoint
        if (checkpoint and not self.now and state is UnitState.RUNNING and unit.driver is not None
                and cp.enabled and cp.on_stop):
            decision = at_stop(unit.spec, self.seen(), self.room(), unit.stop_timeout)
            if isinstance(decision, CheckpointFirst):
                await outcome(unit.cycle_for_stop(why, decision.deadline))
                if unit.state in (UnitState.BACKOFF, UnitState.WAITING):  # it died before the cycle began
                    unit.cancel_timer()
                    unit.set_state(UnitState.INACTIVE, why)
                if unit.state not in WITH_SESSION:
                    return
                # the checkpoint was cut short (--now, the budget): stop at once
            else:
                log.warning("stop_without_checkpoint", unit=unit.name, why=decision.why)
                unit.set_activity(decision.why)
                why = f"{why}; {decision.why}"
        if unit.busy:
            self.cut_short("stopping at once")
            await self._wait_op()
        await unit.stop_at_once(why)

    async def _wait_op(self) -> None:
        """Wait for the operation in progress; cut it short once only ending the agent fits in the budget."""
        unit = self.unit
        op = unit.op
        if op is None:
            return
        while not op.done():
            room = self.room()
            if room is None:
                await asyncio.wait({op})
            elif room_for_checkpoint(room, unit.stop_timeout) <= 0:
                log.warning("stop_budget_spent", unit=unit.name, operation=unit.op_what)
                self.cut_short("the stop budget")
                await asyncio.wait({op})
            else:
                await unit.rt.sleep(0.25)  # the budget is on the daemon's clock: look again shortly
        if op.cancelled():
            unit.abandoned()
