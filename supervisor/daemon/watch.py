"""A unit's watch over its running session, once a second.

:meth:`SessionWatch.tick` reads the context figure, lets the turn watcher
poll, looks for a usage-limit message in new output, and asks the policy
(:func:`supervisor.continuity.policy.watch`) for the one thing to do now: a
checkpoint (at the threshold, the hard limit, a session age, a stall), a
checkpointed stop (``max_runtime``), ending a failed session, or typing the
next queued message.  The unit carries it out.

A blocking screen (trust, login, update, approval, an unreachable model API:
:mod:`supervisor.adapters.screens`) is named at once, whatever else the
session is doing (a wakeup still to deliver, a turn that never ends):
:attr:`SessionWatch.blocked` is what ``status`` shows as ``blocked`` with what
to do.  ``[freeze] after`` delays only the action below.

It also names a frozen session (:class:`~supervisor.continuity.policy.Freeze`):
a blocking screen or approval prompt, a context stuck above the hard limit,
an agent idle after its own compaction, a checkpoint long past its deadline,
a stopped (SIGSTOP) process.
The freeze is shown in ``status`` (:attr:`SessionWatch.frozen`), written once
to history, and acted on as the unit's ``[freeze]`` says: ``restart`` (the
cycle, or a restart for an overdue checkpoint or a stopped process) or ``notify``
(named only).  A blocking screen the unit lets agentd answer (``[codex] trust = "accept"``)
is answered instead.

Two freezes of the cycle itself are backed off instead (a restart is what repeats
them): a **cycle storm** (a fresh session due for a checkpoint within its first turn
after the wakeup: each cycle would only start another) and **notes that cannot be
written** (the checkpoint kept the session).  Threshold cycles are then held back
for :func:`~supervisor.continuity.policy.hold` seconds, doubled each time it happens
again in a row, and status says what to change.

**A quiet session is not looked at every second.**  A running session whose
:attr:`~supervisor.adapters.driver.Driver.activity` (its output, its turns) has not changed
since the last look is looked at again only when something may be due by time alone: a rule
of the policy (:func:`~supervisor.continuity.policy.next_due`), the turn watcher's own quiet
spell (``due()``), the end of a backoff, a usage-limit scan still owed, and at the latest
:data:`LOOK_EVERY` seconds after the last look (what no output shows: a SIGSTOPped process, an
agent's own files).  A unit that is busy, delivering, failed or has text queued is looked at
every second, as is a session whose turn watcher cannot say when it may see a turn end.  Fifty
idle agents then cost a comparison each per second instead of a look each.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..adapters.base import Turn, TurnWatcher
from ..continuity.policy import (Checkpoint, EndSession, Freeze, Frozen, Seen, StopUnit, Trigger, TypeQueued, hold,
                                 next_due, overdue, watch)
from ..continuity.records import CycleRecord
from ..schedule import USAGE_SCAN_EVERY, UsageScanner
from .lifecycle import UnitState

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.base import ContextFigure
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from ..schedule import UsageLimit
    from .conversation import Conversation
    from .runtime import Runtime

log = structlog.get_logger("agentd")

#: The longest a running session with nothing new goes without a look (seconds).
LOOK_EVERY = 10.0


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
    def bump(self) -> None: ...
    def end_failed(self, reason: str) -> None: ...
    def checkpoint_now(self, trigger: Trigger, *, interrupt: bool = ..., deadline: float | None = ...) -> None: ...
    @property
    def stop_timeout(self) -> float: ...
    async def stop(self, why: str, checkpoint: bool = ...) -> Any: ...
    async def restart(self, now: bool = ...) -> Any: ...


class SessionWatch:
    def __init__(self, unit: Watched) -> None:
        self.unit = unit
        self.usage = UsageScanner()
        self.run_started_at: float | None = None  # when this run began (respawns do not reset it)
        self.frozen: dict[str, Any] | None = None  # the freeze status shows (None: not frozen)
        self._session: str | None = None
        self._blocked: tuple[str, float] | None = None  # (screen kind, first seen)
        self.blocked: dict[str, Any] | None = None  # the blocking screen status shows (None: none on screen)
        self._blocked_todo = ""
        self._above_since: float | None = None
        self._checkpoint_since: float | None = None
        self._stopped_since: float | None = None
        self.storms = 0  # cycle storms in a row (a session that got past its first turn ends the run)
        self.unwritable = 0  # checkpoints in a row whose notes could not be written
        self.held_until: float | None = None  # threshold cycles are held back until then (clock)
        self._storm_session: str | None = None  # the session whose storm was named
        self._activity: object = None  # the driver's activity at the last look (None: look at the next tick)
        self._next_look = 0.0  # clock time by which the session is looked at again, nothing new or not

    def run_began(self, now: float) -> None:
        self.run_started_at = now

    def frozen_now(self, session: str | None) -> dict[str, Any] | None:
        """The freeze to show while ``session`` runs: none once another session runs (the tick that forgets
        the old session's freeze may be up to a second away)."""
        return self.frozen if session is not None and session == self._session else None

    def blocked_now(self, session: str | None) -> dict[str, Any] | None:
        """The blocking screen to show while ``session`` runs, with how long it has been on screen."""
        if session is None or session != self._session or self.blocked is None or self._blocked is None:
            return None
        return {**self.blocked, "for": round(max(0.0, self.unit.rt.clock() - self._blocked[1]), 1)}

    def _new_session(self, session: str | None) -> None:
        if session != self._session:
            self._session = session
            self.unwritable = 0  # a checkpoint that cannot write its notes keeps its session
            self.frozen = self.blocked = None
            self._blocked = self._above_since = self._stopped_since = None
            self.held_until = None
            self._activity = None

    def _see_screen(self, driver: Driver, now: float) -> None:
        """Name a blocking screen at once (status), or answer it when the unit lets agentd (a running unit
        with nothing else under way); forget it once it is gone."""
        unit = self.unit
        blocked = driver.blocked()
        if blocked is not None and blocked.answer is not None:
            if unit.state is UnitState.RUNNING and not unit.busy:
                log.warning("screen_answered", unit=unit.name, session=driver.session_id, screen=blocked.kind.value)
                unit.rt.spawn(driver.send_keys(blocked.answer))
            blocked = None
        if blocked is None:
            if self._blocked is not None:
                log.info("screen_gone", unit=unit.name, session=driver.session_id, screen=self._blocked[0])
                self._blocked = self.blocked = None
                unit.bump()  # the dashboard's streams and status watchers see it at once
            return
        kind = blocked.kind.value
        named = self._blocked is None or self._blocked[0] != kind
        if named:
            self._blocked = (kind, now)
            log.warning("blocked", unit=unit.name, session=driver.session_id, screen=kind, todo=blocked.todo)
        freeze = "approval_wait" if kind == "approval" else "blocked_screen"
        self.blocked = {"screen": kind, "todo": blocked.todo, "freeze": freeze,
                        "action": getattr(unit.spec.freeze, freeze), "after": unit.spec.freeze.after,
                        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (now - self._blocked[1])))}
        self._blocked_todo = blocked.todo
        if named:
            unit.bump()

    def tick(self) -> None:
        unit = self.unit
        driver = unit.driver
        now = unit.rt.clock()
        self._new_session(driver.session_id if driver is not None else None)
        if driver is not None and unit.state in (UnitState.RUNNING, UnitState.CHECKPOINTING):
            self._see_screen(driver, now)  # named at once, whatever else goes on
        if unit.state in (UnitState.CHECKPOINTING, UnitState.RESPAWNING) and unit.busy:
            self._checkpoint_since = self._checkpoint_since or now
            late = overdue(unit.spec, now - self._checkpoint_since, unit.stop_timeout)
            if late is not None:
                self._freeze(late, driver.session_id if driver else None)
            return
        self._checkpoint_since = None
        if unit.state is not UnitState.RUNNING or driver is None:
            self._activity = None
            return
        activity = driver.activity
        if activity is not None and activity == self._activity and now < self._next_look:
            return  # nothing new, nothing due
        seen = self._look(driver, now)
        if activity is None or seen is None or unit.talk.sends:
            self._activity = None  # look again at the next tick
            return
        self._activity = activity
        self._next_look = self._look_again(driver, seen, now)

    def _look(self, driver: Driver, now: float) -> Seen | None:
        """Look at the running session and do what the policy says; what was seen (None: the unit is
        occupied, failed or hit its usage limit, and is looked at again at the next tick)."""
        unit = self.unit
        unit.context = driver.context()
        driver.watcher.tick()
        if unit.busy or unit.failure is not None:
            return None
        limit = self.usage.scan(driver.transcript_bytes, driver.tail, now)
        if limit is not None:
            unit.limit_hit(limit)  # also while a wakeup waits to be delivered: it never would be
            return None
        if unit.delivering:
            self._blocked_delivery(driver, now)
            return None
        seen = Seen(unit.context, driver.uptime, driver.silent_for,
                    now - self.run_started_at if self.run_started_at is not None else None,
                    driver.failure(), bool(unit.talk.sends) and unit.talk.may_type(),
                    **self._freeze_facts(driver, now))
        action = watch(unit.spec, seen)
        if not isinstance(action, Frozen) and not seen.held and self.frozen is not None:
            self.frozen = None
            unit.bump()
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
        elif isinstance(action, Frozen) and action.freeze is Freeze.CYCLE_STORM:
            self.storms += 1
            self._storm_session = driver.session_id
            self._back_off(action, driver.session_id, self.storms, now)
        elif isinstance(action, Frozen):
            self._freeze(action, driver.session_id)
        return None if action is not None else seen

    def _look_again(self, driver: Driver, seen: Seen, now: float) -> float:
        """When to look at a session that shows nothing new (see the module): the soonest of the policy's
        time-based rules, the turn watcher's quiet spell, a backoff's end, a usage-limit scan owed."""
        times = [now + LOOK_EVERY]
        scan = USAGE_SCAN_EVERY - driver.silent_for  # output within the usage scan's pause may not be scanned yet
        if scan > 0:
            times.append(now + scan)
        due = next_due(self.unit.spec, seen)
        if due is not None:
            times.append(now + due)
        watcher = driver.watcher
        if watcher.state is not Turn.IDLE:  # when the watcher may see the turn end with no new output
            if _cannot_say(watcher):
                times.append(now)
            elif (at := watcher.due()) is not None and at > watcher.clock():  # (one past was seen at this look)
                times.append(now + (at - watcher.clock()))
        if self.held_until is not None:
            times.append(self.held_until)
        return min(times)

    def _blocked_delivery(self, driver: Driver, now: float) -> None:
        """A wakeup waits to be typed and a blocking screen is in the way: after ``[freeze] after`` the
        freeze is acted on as on any session (nothing else is, until the wakeup is delivered)."""
        if self._blocked is None:
            return
        seen = Seen(None, 0.0, 0.0, None, None, False, blocked=self._blocked[0], blocked_for=now - self._blocked[1],
                    blocked_todo=self._blocked_todo)
        action = watch(self.unit.spec, seen)  # only the blocking screen's freeze can come of these facts
        if isinstance(action, Frozen):
            if action.restart:
                self.unit.talk.cancel_delivery()  # the cycle types its own prompt; the wakeup comes after it
            self._freeze(action, driver.session_id)

    def memory_unwritable(self, detail: str) -> None:
        """A checkpoint could not write its notes and kept the session: name it, hold cycles back."""
        driver = self.unit.driver
        if driver is None:
            return
        self.unwritable += 1
        self._back_off(Frozen(Freeze.MEMORY_UNWRITABLE, detail, restart=False), driver.session_id, self.unwritable,
                       self.unit.rt.clock(), record=False)

    def _back_off(self, action: Frozen, session: str, times: int, now: float, record: bool = True) -> None:
        """Name a freeze of the cycle itself and hold threshold cycles back (longer each time in a row)."""
        seconds = hold(times)
        self.held_until = now + seconds
        self.frozen = None  # named anew, with this backoff
        self._freeze(Frozen(action.freeze, f"{action.detail}; backing off {seconds:g}s (#{times} in a row)",
                            restart=False), session, act=f"back off {seconds:g}s", record=record)

    def _freeze_facts(self, driver: Driver, now: float) -> dict[str, Any]:
        """What :class:`Seen` needs to tell a frozen session: a blocking screen (named, or answered, by
        :meth:`_see_screen`), how long the context has been above the hard limit, idle after compaction."""
        unit = self.unit
        facts: dict[str, Any] = {}
        if self._blocked is not None:  # seen by _see_screen this tick
            facts.update(blocked=self._blocked[0], blocked_for=now - self._blocked[1], blocked_todo=self._blocked_todo)
        figure = unit.context
        if figure is not None and figure.window > 0 and figure.ratio >= unit.spec.context.hard_limit:
            self._above_since = self._above_since or now
            facts["above_hard_limit_for"] = now - self._above_since
        else:
            self._above_since = None
        facts["idle_after_compaction"] = unit.talk.idle_after_compaction(now)
        if driver.process_stopped():
            self._stopped_since = self._stopped_since or now
            facts["stopped_for"] = now - self._stopped_since
        else:
            self._stopped_since = None
        wakeup = unit.talk.unit.last_wakeup
        first_turn = unit.talk.first_turn(driver)
        if not first_turn and wakeup is not None:
            self.storms = 0  # this session got past its first turn: the storm (if any) is over
        facts.update(first_turn=first_turn, storm_named=self._storm_session == driver.session_id,
                     held=self.held_until is not None and now < self.held_until,
                     wakeup_tokens=wakeup.tokens if wakeup is not None else None)
        return facts

    def _freeze(self, action: Frozen, session: str | None, act: str | None = None, record: bool = True) -> None:
        """Name the freeze (status; history and the log once), then act as the unit says."""
        unit = self.unit
        if self.frozen is not None and self.frozen["state"] == action.freeze.value:
            return  # already named and acted on
        act = act or ("restart" if action.restart else "notify")
        self.frozen = {"state": action.freeze.value, "detail": action.detail, "action": act,
                       "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        unit.bump()  # named: the dashboard's streams see it at once
        log.warning("frozen", unit=unit.name, session=session, freeze=action.freeze.value, detail=action.detail, action=act)
        if record:
            unit.rt.record_cycle(CycleRecord(
                unit=unit.name, trigger=f"freeze: {action.freeze.value}", old_session=session, new_session=session,
                flush="skipped", outcome="restarting" if action.restart else act if act.startswith("back off")
                else "notified", notes=[action.detail]))
        if not action.restart:
            return
        if action.freeze in (Freeze.CHECKPOINT_OVERDUE, Freeze.STOPPED_PROCESS):
            unit.rt.spawn(unit.restart(now=True))
        else:
            unit.talk.thaw()
            unit.checkpoint_now(Trigger.FREEZE, interrupt=True)


def _cannot_say(watcher: TurnWatcher) -> bool:
    """A turn watcher that polls (a file, a quiet spell) without saying when a turn end may show (``due()``):
    its session is looked at every second while a turn runs."""
    kind = type(watcher)
    return kind.poll is not TurnWatcher.poll and kind.due is TurnWatcher.due
