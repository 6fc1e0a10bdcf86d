"""A unit's watch over its running session, once a second.

:meth:`SessionWatch.tick` reads the context figure, lets the turn watcher
poll, looks for a usage-limit message in new output, and asks the policy
(:func:`supervisor.continuity.policy.watch`) for the one thing to do now: a
checkpoint (at the threshold, the hard limit, a session age, a stall), a
checkpointed stop (``max_runtime``), ending a failed session, or typing the
next queued message.  The unit carries it out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..continuity.policy import Checkpoint, EndSession, Seen, StopUnit, Trigger, TypeQueued, watch
from ..schedule import UsageScanner
from .lifecycle import UnitState

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.base import ContextFigure
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from ..schedule import UsageLimit
    from .conversation import Conversation
    from .runtime import Runtime

log = structlog.get_logger("agentd")


class Watched(Protocol):
    """The unit, as its watch sees it (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    name: str
    spec: UnitSpec
    rt: Runtime
    state: UnitState
    driver: Driver | None
    context: ContextFigure | None
    failure: str | None
    talk: Conversation

    @property
    def busy(self) -> bool: ...
    @property
    def delivering(self) -> bool: ...
    def limit_hit(self, limit: UsageLimit) -> None: ...
    def end_failed(self, reason: str) -> None: ...
    def checkpoint_now(self, trigger: Trigger, *, interrupt: bool = ..., deadline: float | None = ...) -> None: ...
    async def stop(self, why: str, checkpoint: bool = ...) -> Any: ...


class SessionWatch:
    def __init__(self, unit: Watched) -> None:
        self.unit = unit
        self.usage = UsageScanner()
        self.run_started_at: float | None = None  # when this run began (respawns do not reset it)

    def run_began(self, now: float) -> None:
        self.run_started_at = now

    def tick(self) -> None:
        unit = self.unit
        driver = unit.driver
        if unit.state is not UnitState.RUNNING or driver is None:
            return
        unit.context = driver.context()
        driver.watcher.tick()
        if unit.busy or unit.delivering or unit.failure is not None:
            return
        now = unit.rt.clock()
        limit = self.usage.scan(driver.transcript_bytes, driver.tail, now)
        if limit is not None:
            unit.limit_hit(limit)
            return
        seen = Seen(unit.context, driver.uptime, driver.silent_for,
                    now - self.run_started_at if self.run_started_at is not None else None,
                    driver.failure(), bool(unit.talk.sends) and unit.talk.may_type())
        action = watch(unit.spec, seen)
        if isinstance(action, StopUnit):
            log.info("max_runtime_reached", unit=unit.name, max_runtime=unit.spec.schedule.max_runtime)
            self.run_started_at = None  # fire once
            unit.rt.spawn(unit.stop(action.reason, checkpoint=True))
        elif isinstance(action, EndSession):
            log.error("session_failed", unit=unit.name, session=driver.session_id, reason=action.reason)
            unit.end_failed(action.reason)
        elif isinstance(action, Checkpoint):
            if action.trigger is Trigger.STALL:
                log.warning("stalled", unit=unit.name, silent_for=round(driver.silent_for, 1))
            unit.checkpoint_now(action.trigger, interrupt=action.interrupt, deadline=action.deadline)
        elif isinstance(action, TypeQueued):
            unit.rt.spawn(unit.talk.type(unit.talk.sends.popleft()))
