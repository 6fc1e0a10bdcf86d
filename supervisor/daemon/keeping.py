"""Keeping a unit's work when its session ends outside the continuity cycle.

The cycle keeps the agent's trail and its uncommitted work itself
(:func:`supervisor.continuity.cycle.run`).  The other ends of a session go
through :class:`WorkKeeping`, one per :class:`~supervisor.daemon.unit.UnitSupervisor`:

* the agent exited on its own (a crash, ``kill -9``, a usage limit):
  :meth:`WorkKeeping.after_exit` keeps it in the background, off the loop,
  without holding the unit's state machine (the reaper goes on at once);
  the next session's start waits for it (:meth:`WorkKeeping.settled`, at most
  :data:`SETTLE_WAIT` seconds) so its wakeup shows where the agent stopped;
* a stop or a restart without a checkpoint (``--now``): :meth:`WorkKeeping.ended`
  after the session ended, so nothing the agent wrote is missed;
* the scope guard reverts a file: :meth:`WorkKeeping.before_revert`, the
  running session's work first.

A keep that saved a WIP commit is recorded in the unit's history (trigger:
the moment; the commit; where the agent stopped), so ``agentd history`` names
it; every keep is logged (``work_kept`` / ``work_not_kept`` with its notes).
A failure is logged and noted, never raised.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import structlog

from ..continuity.keeper import Kept, Moment, keep, moment_for
from ..continuity.policy import Trigger
from ..continuity.records import CycleRecord

log = structlog.get_logger("agentd")

#: How long a new session's start waits for the keep of the session before it.
SETTLE_WAIT = 30.0


class Keeping(Protocol):
    """The unit whose work is kept (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    name: str
    spec: Any  # its UnitSpec
    rt: Any  # supervisor.daemon.runtime.Runtime
    driver: Any  # the running session's Driver, or None


class WorkKeeping:
    """See the module docstring."""

    def __init__(self, unit: Keeping) -> None:
        self.unit = unit
        self.pending: asyncio.Task[Any] | None = None

    def after_exit(self, driver: Any, outcome: str) -> None:
        """The agent exited on its own: keep its work in the background."""
        self.pending = self.unit.rt.spawn(self.keep(driver, Moment.CRASH, outcome))

    async def ended(self, driver: Any, why: str, *, usage_limit: bool = False) -> Kept | None:
        """A session ended by a stop or restart without a checkpoint (``why``), or for a usage
        limit: keep its work now."""
        if driver is None:
            return None
        moment = Moment.USAGE_LIMIT if usage_limit else moment_for(Trigger.STOP, why)
        return await self.keep(driver, moment, why if usage_limit else f"stopped at once: {why}")

    async def before_revert(self, path: str) -> Kept | None:
        """The scope guard is about to put ``path`` back: keep the running session's work first."""
        driver = self.unit.driver
        if driver is None:
            return None
        return await self.keep(driver, Moment.REVERT, f"kept before reverting {path}")

    async def keep(self, driver: Any, moment: Moment, outcome: str) -> Kept:
        unit = self.unit
        kept = await keep(unit.rt.keeper(unit.spec, driver.env), moment, driver.session_id, driver.trail)
        log.info("work_kept" if kept.stopped is not None or kept.wip else "work_not_kept", unit=unit.name,
                 session=driver.session_id, moment=moment.value, wip=kept.wip, notes=list(kept.notes))
        if kept.wip or kept.resumed:  # history names the commit or the report's figures; nothing else: only logged
            record = CycleRecord(unit=unit.name, trigger=moment.value, old_session=driver.session_id, flush="skipped",
                                 outcome=outcome, wip=kept.wip, stopped=kept.summary())
            record.notes.extend(kept.notes)
            unit.rt.record_cycle(record)
        return kept

    async def settled(self, timeout: float = SETTLE_WAIT) -> None:
        """Wait (bounded) for a keep still running, so the next wakeup can show it."""
        task, self.pending = self.pending, None
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                log.warning("work_keep_slow", unit=self.unit.name, waited=timeout)
