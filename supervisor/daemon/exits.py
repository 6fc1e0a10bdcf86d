"""A unit's agent exits, and its timers fire: stale or not, the restart policy, backoff, a usage limit.

:class:`UnitExits` belongs to one :class:`~supervisor.daemon.unit.UnitSupervisor`
and carries out its reactions to the events that come without a command:

* :meth:`UnitExits.reap` (SIGCHLD, each tick): the session's exit, reacted to
  only when it still concerns the unit's state.  While an operation starts
  the session (``starting``, ``respawning``) the operation hands the session
  over as running and then reacts; while one ends it (``stopping``,
  ``checkpointing``) that one finishes the job; once the unit is down (a stop
  won) the exit is stale: the session is closed, nothing restarts.  Else the
  work is kept off the loop, and a usage-limit message means waiting, any
  other exit the restart policy (:meth:`UnitExits.apply`: backoff with its
  timer, ``failed``, or ``inactive``);
* :meth:`UnitExits.timer_fired` (a backoff over, a usage limit reset): a start,
  unless it is stale (the unit no longer waits, a stop was asked, the daemon
  stops);
* :meth:`UnitExits.end_for_usage_limit`: the session ended for a usage limit
  the watch saw, then waiting.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..continuity.records import StartReason
from ..schedule import UsageLimit, usage_limit
from .lifecycle import GiveUp, Restart, StayDown, UnitState

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from ..session.process import ExitInfo
    from .conversation import Conversation
    from .keeping import WorkKeeping
    from .lifecycle import RestartTracker
    from .runtime import Runtime

log = structlog.get_logger("agentd")


class Exiting(Protocol):
    """The unit, as its exits see it (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    name: str
    spec: UnitSpec
    rt: Runtime
    state: UnitState
    driver: Driver | None
    down: str | None
    exit_seen: bool
    last_exit: ExitInfo | None
    exit_planned: bool
    crashes: int
    failure: str | None
    next_start_at: float | None
    restarts: int
    tracker: RestartTracker
    talk: Conversation
    keeping: WorkKeeping

    @property
    def busy(self) -> bool: ...
    @property
    def stop_timeout(self) -> float: ...
    def bump(self) -> None: ...
    def set_state(self, new: UnitState, reason: str | None = ..., **fields: Any) -> None: ...
    async def end_session(self) -> None: ...
    def restart_after(self, why: str, reason: StartReason) -> asyncio.Task[Any]: ...


class UnitExits:
    """See the module docstring."""

    def __init__(self, unit: Exiting) -> None:
        self.unit = unit
        self.timer: asyncio.TimerHandle | None = None  # the backoff's or the usage limit's

    def reap(self) -> None:
        unit = self.unit
        driver = unit.driver
        if driver is None or unit.exit_seen:
            return
        exit = driver.reap()
        if exit is None:
            return
        if unit.state in (UnitState.STARTING, UnitState.RESPAWNING):
            return  # the operation starting this session hands it over as running, then reacts (hand_over)
        unit.exit_seen = True
        unit.last_exit, unit.exit_planned = exit, False
        log.info("session_exited", unit=unit.name, session=driver.session_id, pid=driver.pid,
                 exit=exit.describe(), uptime=round(driver.uptime, 3))
        if unit.state in (UnitState.STOPPING, UnitState.CHECKPOINTING):
            unit.bump()  # the operation in progress finishes the job
            return
        if unit.state is not UnitState.RUNNING:  # stale: the unit is down already (a stop won): restart nothing
            log.warning("stale_exit", unit=unit.name, state=unit.state.value, session=driver.session_id)
            self.session_exited()
            return
        uptime = driver.uptime
        limit = usage_limit(driver.tail(3000))
        unit.keeping.after_exit(driver, f"agent exited: {exit.describe()}")
        self.session_exited()
        if limit is not None:
            self.wait_usage_limit(limit)
            return
        failure, unit.failure = unit.failure, None
        unit.crashes += 1
        self.apply(unit.tracker.on_exit(exit, uptime, unit.rt.clock()), failure)

    def session_exited(self) -> None:
        """The leader is gone: close, and end whatever it left behind."""
        unit = self.unit
        driver = unit.driver
        if driver is None:
            return
        unit.talk.cancel_delivery()
        driver.close()
        unit.driver = None
        unit.bump()
        if driver.leftovers():
            unit.rt.spawn(driver.end_leftovers(unit.stop_timeout))

    def apply(self, decision: Restart | GiveUp | StayDown, why: str | None) -> None:
        """Apply the restart policy's decision after an exit or a failed start."""
        unit = self.unit
        if isinstance(decision, Restart):
            unit.next_start_at = time.time() + decision.delay
            unit.set_state(UnitState.BACKOFF, why or f"{unit.last_exit.describe() if unit.last_exit else 'failed'};"
                           f" restarting in {decision.delay:g}s", delay=decision.delay)
            self.timer = unit.rt.call_later(decision.delay, unit)
        elif isinstance(decision, GiveUp):
            unit.set_state(UnitState.FAILED, f"{why}; {decision.reason}" if why else decision.reason)
            unit.rt.gave_up(unit)
        else:
            unit.set_state(UnitState.INACTIVE, f"{why}; {decision.reason}" if why else decision.reason)
            unit.rt.gave_up(unit)

    def timer_fired(self) -> None:
        unit = self.unit
        self.timer = None
        if unit.state not in (UnitState.BACKOFF, UnitState.WAITING) or unit.down is not None or unit.rt.stopping:
            log.info("stale_timer", unit=unit.name, state=unit.state.value,
                     reason="stopping" if unit.down is not None or unit.rt.stopping else "no longer waiting")
            return
        if unit.busy:  # an operation still finishes (it will not for long): look again shortly
            self.timer = unit.rt.call_later(0.1, unit)
            return
        if unit.state is UnitState.BACKOFF:
            unit.restarts += 1
            unit.restart_after("restart after backoff", StartReason.CRASH)
        else:
            unit.restart_after("resume after usage limit", StartReason.LIMIT_RESET)

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.unit.next_start_at = None

    async def end_for_usage_limit(self, limit: UsageLimit) -> None:
        """The unit's op for a usage limit the watch saw: end the session, keep its work, wait."""
        unit = self.unit
        if unit.state is not UnitState.RUNNING:  # reaped (or stopped) before this op ran
            return
        log.warning("usage_limit", unit=unit.name, line=limit.line,
                    reset_at=limit.reset_at.isoformat() if limit.reset_at else None)
        unit.set_state(UnitState.STOPPING, f"usage limit: {limit.line}")
        driver = unit.driver
        await unit.end_session()
        await unit.keeping.ended(driver, f"usage limit: {limit.line}", usage_limit=True)
        self.wait_usage_limit(limit)

    def wait_usage_limit(self, limit: UsageLimit) -> None:
        """Wait (state waiting) until the limit resets, then resume with a fresh session and the wakeup."""
        unit = self.unit
        now = time.time()
        reset = limit.reset_at.timestamp() if limit.reset_at else now + unit.spec.schedule.usage_limit_wait
        delay = max(1.0, reset - now)
        unit.next_start_at = now + delay
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now + delay))
        unit.set_state(UnitState.WAITING, f"usage limit hit ({limit.line}); resuming at {when}")
        self.timer = unit.rt.call_later(delay, unit)
