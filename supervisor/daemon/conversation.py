"""What agentd types into one unit's agent, and what the agent tells agentd.

A :class:`Conversation` belongs to one :class:`~supervisor.daemon.unit.UnitSupervisor`:

* text to type (``agentd send``, ``agentd task``, broadcasts of global
  decisions, scope warnings, a wakeup to re-inject) is typed at once when the
  agent is idle and nobody types in an attached terminal, else queued and
  typed at the next turn end; nothing is typed during a checkpoint;
* a person typing through ``agentd attach`` holds agentd's own typing back
  for :data:`~supervisor.continuity.policy.PERSON_IDLE` seconds;
* events from the agent itself (``agentd notify``: Codex's notify, Claude
  Code's hooks) are read by the adapter; a compaction is recorded and
  answered with the wakeup, an announced one starts a checkpoint;
* a write the scope watcher saw the agent make (:meth:`Conversation.wrote`):
  what the adapter has to say about it (a generic agent's module facts, the
  first time it writes in a module; hooks give the others theirs) is typed at
  the next turn end.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..adapters.base import Meaning
from ..continuity import cycle
from ..continuity.policy import PERSON_IDLE, Trigger
from ..continuity.records import compaction_record
from ..continuity.wakeup import Wakeup, unit_wakeup
from .lifecycle import UnitState

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from ..adapters.base import ContextFigure
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from .runtime import Runtime

log = structlog.get_logger("agentd")


class Speaker(Protocol):
    """The unit, as its conversation sees it (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    name: str
    spec: UnitSpec
    rt: Runtime
    state: UnitState
    driver: Driver | None
    adapter: Any
    activity: str | None
    wakeup_state: str | None

    def set_activity(self, text: str | None, until: float | None = ...) -> None: ...
    context: ContextFigure | None
    last_cycle: dict[str, Any] | None
    last_wakeup: Wakeup | None

    @property
    def busy(self) -> bool: ...
    @property
    def delivering(self) -> bool: ...
    def checkpoint_now(self, trigger: Trigger) -> None: ...


class Conversation:
    """The unit's typing queue, its people at attached terminals, and the agent's own events."""

    def __init__(self, unit: Speaker) -> None:
        self.unit = unit
        self.sends: deque[str] = deque()
        self.viewers = 0
        self.person_input_at = 0.0
        self.delivery: asyncio.Task[str] | None = None  # typing the wakeup as the first message
        self.own_compaction: tuple[str, int] | None = None  # (session, turns ended) at the agent's own compaction
        self.wakeup_turn: tuple[str, int] | None = None  # (session, the count of turns ended once it answers its wakeup)
        self._writes = asyncio.Lock()  # one write's facts at a time: a module's are given once

    # ------------------------------------------------------------------ the wakeup as the first message
    @property
    def delivering(self) -> bool:
        return self.delivery is not None and not self.delivery.done()

    def deliver(self, driver: Driver, text: str, wake: Wakeup) -> None:
        """Type the wakeup as the first message once the agent is ready (in the background)."""
        self.delivery = self.unit.rt.spawn(self._deliver(driver, text, wake))

    async def _deliver(self, driver: Driver, text: str, wake: Wakeup) -> str:
        unit = self.unit

        timeout = unit.spec.checkpoint.ready_timeout
        ends = {cycle.WAKEUP_WAIT: unit.rt.clock() + timeout}

        def activity(text: str | None) -> None:  # each wait of the delivery, with when it ends
            if text == "typing the wakeup":  # the turn the wakeup starts: its session's first (a storm's test)
                self.wakeup_turn = (driver.session_id, driver.turns_ended + 1)
            if text == cycle.WAKEUP_ANSWER:
                ends[text] = unit.rt.clock() + timeout
            if unit.driver is driver:
                unit.set_activity(text, ends.get(text.split(":")[0]) if text else None)

        state = await cycle.deliver_wakeup(driver, text, timeout, unit.rt.clock, activity)
        if unit.driver is driver:
            unit.wakeup_state = state
        log.info("wakeup_delivered" if state.startswith("delivered") else "wakeup_not_delivered", unit=unit.name,
                 session=driver.session_id, via="first-message", tokens=wake.tokens, state=state)
        return state

    async def delivered(self) -> str | None:
        """Wait for the wakeup delivery in progress (if any); the delivery state."""
        if self.delivery is not None and not self.delivery.done():
            await asyncio.wait({self.delivery})
        return self.unit.wakeup_state

    def cancel_delivery(self) -> None:
        if self.delivery is not None and not self.delivery.done():
            self.delivery.cancel()
        self.delivery = None

    # ------------------------------------------------------------------ text to type

    def person_typing(self) -> bool:
        return bool(self.person_input_at) and self.unit.rt.clock() - self.person_input_at < PERSON_IDLE

    def may_type(self) -> bool:
        return self.unit.driver is not None and self.unit.driver.idle and not self.person_typing()

    async def type(self, text: str) -> None:
        driver = self.unit.driver
        if driver is None:
            return
        try:
            await driver.type(text)
        except ConnectionError:
            return
        log.info("sent", unit=self.unit.name, session=driver.session_id, bytes=len(text.encode()))

    async def send(self, text: str, enter: bool = True, raw: bool = False) -> dict[str, Any]:
        """Type ``text``: now if the turn has ended, else at the next turn end.  ``raw``: the bytes as
        given, control keys included, at once (the one explicit way to type them)."""
        if self.unit.state in (UnitState.CHECKPOINTING, UnitState.RESPAWNING):
            raise ValueError(f"unit {self.unit.name!r} is {self.unit.state.value} ({self.unit.activity or 'busy'}): nothing is typed "
                             "into an agent during a checkpoint; send again when `agentd status` shows it running")
        if self.unit.state not in (UnitState.RUNNING, UnitState.STARTING):
            raise ValueError(f"unit {self.unit.name!r} is {self.unit.state.value}, not running: nothing to type into")
        driver = self.unit.driver
        if raw or not enter:
            if driver is None:
                raise ValueError(f"unit {self.unit.name!r} is still starting")
            if raw:
                driver.send_raw(text.encode())
            else:
                await driver.type_unsubmitted(text)
            return {"unit": self.unit.name, "delivered": "now", "bytes": len(text.encode())}
        if not self.unit.busy and not self.unit.delivering and not self.sends and self.may_type():
            await self.type(text)
            return {"unit": self.unit.name, "delivered": "now", "bytes": len(text.encode())}
        self.sends.append(text)
        return {"unit": self.unit.name, "delivered": "queued", "position": len(self.sends),
                "note": "the agent is busy; agentd types it at the next turn end"}

    def queue(self, text: str) -> dict[str, Any]:
        """Text agentd composed (a task, a broadcast, a warning, a wakeup to re-inject), for the next turn end.

        Never typed into a shell or REPL (``[agent] talks_to = "shell"``): it would run it."""
        if self.unit.state in (UnitState.INACTIVE, UnitState.FAILED):
            return {"queued": False, "reason": f"unit is {self.unit.state.value}"}
        if not self.unit.spec.agent.types_own_text:
            log.info("not_typed", unit=self.unit.name, reason="the unit talks to a shell", bytes=len(text.encode()))
            return {"queued": False, "reason": "the unit talks to a shell: agentd types nothing of its own into it"}
        self.sends.append(text)
        return {"queued": True, "position": len(self.sends)}

    async def wrote(self, path: Path) -> dict[str, Any] | None:
        """The agent wrote ``path`` (absolute; the scope watcher saw it): the adapter's word on it, queued for the
        next turn end (read off the loop: facts files)."""
        driver = self.unit.driver
        if driver is None or not self.unit.spec.agent.types_own_text:
            return None
        async with self._writes:
            text = await asyncio.to_thread(driver.written, path)
        if not text or self.unit.driver is not driver:
            return None
        log.info("facts_queued", unit=self.unit.name, session=driver.session_id, path=str(path))
        return self.queue(text)

    # ------------------------------------------------------------------ the agent's own events
    async def agent_event(self, event: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        """An event from the agent itself (``agentd notify``): turn ends, compactions, hooks."""
        driver = self.unit.driver
        if driver is None or self.unit.adapter is None:
            return {"ignored": f"unit {self.unit.name!r} has no running session"}
        if session_id and session_id != driver.session_id:
            return {"ignored": f"session {session_id} is not the current one ({driver.session_id})"}
        meanings = driver.on_agent_event(event)
        log.info("agent_event", unit=self.unit.name, session=driver.session_id, meanings=[m.value for m in meanings],
                 type=event.get("type") or event.get("hook_event_name"))
        compacted, about = Meaning.COMPACTED in meanings, Meaning.PRE_COMPACT in meanings
        wakeup: Wakeup | None = None
        if compacted or Meaning.INJECT_WAKEUP in meanings:
            wakeup = await asyncio.to_thread(unit_wakeup, self.unit.spec, self.unit.rt.root)
        if compacted or about:
            record = compaction_record(self.unit.name, driver.session_id, compacted, self.unit.context,
                                       wakeup.tokens if wakeup else None)
            self.unit.last_cycle = record.as_dict()
            self.unit.rt.record_cycle(record)
        if Meaning.OWN_COMPACTION in meanings:
            self.own_compaction = (driver.session_id, driver.turns_ended)
        if about and self.unit.spec.checkpoint.enabled:
            self.unit.checkpoint_now(Trigger.PRE_COMPACT)
        if Meaning.INJECT_WAKEUP in meanings and wakeup is not None:
            self.queue(wakeup.text)
        output = await asyncio.to_thread(driver.hook_output, event, meanings, wakeup.text if wakeup else None)
        return {"meanings": [m.value for m in meanings], "output": output}

    def idle_after_compaction(self, now: float) -> float | None:
        """Seconds the agent has sat idle at the turn end after its own compaction (None: it has not,
        or it went on: a later turn began and ended, or it is busy)."""
        driver = self.unit.driver
        if self.own_compaction is None or driver is None:
            return None
        session, turns = self.own_compaction
        if session != driver.session_id or driver.turns_ended > turns + 1:
            self.own_compaction = None  # another session, or it continued
            return None
        ended_at = getattr(driver.watcher, "ended_at", None)
        if not driver.idle or driver.turns_ended < turns or ended_at is None or self.sends:
            return None
        return now - ended_at

    def first_turn(self, driver: Driver) -> bool:
        """The session has a wakeup and has not ended a turn past the one that answers it."""
        if self.unit.last_wakeup is None:
            return False
        turn = self.wakeup_turn
        last = turn[1] if turn is not None and turn[0] == driver.session_id else 1  # a wakeup in argv: the first
        return driver.turns_ended <= last

    def thaw(self) -> None:
        """A freeze is being acted on: forget the compaction it came from."""
        self.own_compaction = None

    # ------------------------------------------------------------------ attach
    def person_input(self) -> None:
        self.person_input_at = self.unit.rt.clock()

    def viewer(self, delta: int) -> int:
        self.viewers = max(0, self.viewers + delta)
        if delta < 0:
            self.person_input_at = 0.0  # the person left: agentd may type again
        return self.viewers
