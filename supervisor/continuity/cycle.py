"""The continuity cycle: checkpoint, verify, quit, respawn, deliver the wakeup; and its recovery.

:func:`run` is the whole protocol for one unit:

1. wait for the turn to end (never type into a running turn; at the hard limit
   or on a stall interrupt it first; while a person types in an attached
   terminal, wait);
2. type the checkpoint prompt;
3. wait for the flush: the next turn end and a change of the memory files
   (engram, decision logs, task), until the deadline, plus a short grace for
   files written just after the turn;
4. verify; when nothing changed, write an ``[auto]`` checkpoint so nothing is lost;
   when even that cannot be written (a read-only or full ``.agent/``), the
   session is the only place the notes live: it is kept (the unit runs on,
   named, and backs off) unless the unit is stopping;
   then keep the agent's trail and its uncommitted work (a WIP commit) for the
   next wakeup's "Where you stopped", whether or not it wrote anything
   (:mod:`.keeper`; best effort, never a reason to stop);
5. quit the old session (the adapter's quit keys, then its whole tree ends);
6. then either stop, or start a fresh session whose first message is the
   wakeup (:func:`deliver_wakeup` types it when the adapter did not already
   pass it in argv or a system prompt) and record how the cycle went, with
   the probe recall of what the adapter delivered (:func:`recall`, issue 16).

:func:`finish_interrupted` completes the record of a cycle that a daemon crash
cut short.  The cycle talks to the agent only through :class:`Agent` (the
:class:`~supervisor.adapters.driver.Driver` fits) and to the unit only
through :class:`Host`, so it is unit-tested with fakes and a fake clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..adapters.base import ContextFigure
from ..unitstate import UnitState
from .keeper import Keeper, keep, moment_for
from .policy import After, Trigger
from .records import CycleRecord

#: How a cycle's outcome starts when the unit was stopped (a stop asked meanwhile) instead of respawning.
STOPPED_INSTEAD = "stopped instead of respawning"
#: How a cycle's outcome starts when it kept the session because the notes could not be written.
KEPT = "kept the session"


class Agent(Protocol):
    """What the cycle needs of a running session."""

    @property
    def session_id(self) -> str: ...
    @property
    def exited(self) -> bool: ...
    @property
    def idle(self) -> bool: ...
    @property
    def turns_ended(self) -> int: ...

    async def type(self, text: str) -> None: ...
    async def interrupt(self) -> None: ...
    async def wait_turns(self, count: int, deadline: float) -> bool: ...
    async def wait_ready(self, deadline: float, activity: Callable[[str], None] = ...) -> bool: ...
    def context(self) -> ContextFigure | None: ...
    def tail(self, n_bytes: int) -> str: ...
    def trail(self) -> Any: ...  # the agent's own Trail, or None (blocking)


class Memory(Protocol):
    """The unit's memory files, as the cycle checks them (blocking; run in a thread)."""

    def fingerprint(self) -> str: ...
    def write_auto(self, reason: str, tail: str) -> None: ...


class ModuleMemory:
    """A module's memory files in the project (the :class:`Memory` the daemon uses)."""

    def __init__(self, root: Any, module: str, env: Mapping[str, str] | None = None) -> None:
        self.root, self.module = root, module
        self.env = env  # the unit's environment: its secret values are redacted from what is written

    def fingerprint(self) -> str:
        from ..memory import memory_fingerprint

        return memory_fingerprint(self.root, self.module)

    def write_auto(self, reason: str, tail: str) -> None:
        from ..memory import write_auto_checkpoint

        write_auto_checkpoint(self.root, self.module, reason, tail, env=self.env)


class Host(Protocol):
    """The unit, as the cycle drives it (:class:`~supervisor.daemon.unit.UnitSupervisor`)."""

    clock: Callable[[], float]

    def set_state(self, state: UnitState, reason: str) -> None: ...
    def set_activity(self, text: str | None, until: float | None = ...) -> None: ...
    async def pause(self, seconds: float) -> None: ...
    async def mark(self, marker: dict[str, Any] | None) -> None: ...
    async def delivered(self) -> str | None: ...
    async def end_session(self) -> None: ...
    def stopped(self, why: str) -> None: ...
    async def respawn(self, why: str) -> tuple[Agent | None, str | None, int | None]: ...


@dataclass(frozen=True)
class Plan:
    """One cycle: why, what follows, and its time limits (seconds)."""

    trigger: Trigger
    prompt: str | None  # None: type nothing (the agent is a shell); the flush is checked, else [auto]
    after: After = After.RESPAWN
    interrupt: bool = False
    deadline: float = 300.0
    grace: float = 15.0
    why: str | None = None  # for a stop: the reason shown when the unit is inactive


async def run(host: Host, agent: Agent, memory: Memory, plan: Plan, *, unit: str,
              keeper: Keeper | None = None) -> CycleRecord:
    """The protocol (module docstring); returns the record (the caller appends it to history)."""
    clock = host.clock
    record = CycleRecord(unit=unit, trigger=plan.trigger.value, old_session=agent.session_id)
    figure = agent.context()
    if figure is not None:
        record.tokens_before, record.window, record.exact = figure.used, figure.window, figure.exact
    else:
        record.notes.append("context unavailable")
    host.set_state(UnitState.CHECKPOINTING, f"checkpoint ({plan.trigger.value})")
    before = await asyncio.to_thread(memory.fingerprint)
    await host.mark({"trigger": plan.trigger.value, "fingerprint": before, "session": agent.session_id,
               "started": record.started})
    host.set_activity("waiting for the wakeup delivery to finish")
    await host.delivered()  # a wakeup still being typed finishes first (it has its own deadline)
    deadline = clock() + plan.deadline

    t = clock()
    if plan.interrupt and not agent.exited and not agent.idle:
        record.notes.append(f"interrupted a running turn ({plan.trigger.value.replace('_', ' ')})")
        await agent.interrupt()
    ready = await agent.wait_ready(deadline, lambda text: host.set_activity(text, deadline))
    record.step("wait_turn_end", t, clock())
    flushed = False
    if ready and plan.prompt is None:
        record.notes.append("no prompt typed: the unit talks to a shell")
    elif ready and plan.prompt is not None:
        turns = agent.turns_ended
        t = clock()
        host.set_activity("typing the checkpoint prompt")
        try:
            await agent.type(plan.prompt)
        except ConnectionError:  # the session ended under us: the wait below sees the exit
            pass
        record.step("type_prompt", t, clock())
        t = clock()
        host.set_activity("waiting for the agent to write its notes", deadline)
        turn_done = await agent.wait_turns(turns + 1, deadline)
        changed = await asyncio.to_thread(memory.fingerprint) != before
        if turn_done and not changed:
            grace_end = min(deadline, clock() + plan.grace)
            while not changed and clock() < grace_end and not agent.exited:
                await host.pause(0.25)
                changed = await asyncio.to_thread(memory.fingerprint) != before
        record.step("wait_flush", t, clock())
        flushed = turn_done and changed
        if agent.exited and not turn_done:
            record.notes.append("the agent exited during the checkpoint")
        elif changed and not turn_done:
            record.notes.append("files changed but the turn did not end before the deadline")
    else:
        record.notes.append("the agent exited" if agent.exited else "the turn did not end before the deadline")

    t = clock()
    if flushed:
        record.flush = "verified"
    else:
        reason = "; ".join(record.notes) or "the agent did not write its notes"
        try:
            await asyncio.to_thread(memory.write_auto, reason, agent.tail(4000))
            record.flush = "auto"
        except Exception as exc:  # noqa: BLE001 - the cycle must still end in a fresh session
            record.flush = "failed"
            record.notes.append(f"auto-checkpoint failed: {exc}")
    record.step("verify", t, clock())
    if record.flush == "failed" and plan.after is After.RESPAWN and not agent.exited:
        record.outcome = f"{KEPT}: the notes could not be written ({record.notes[-1]}); it goes on"
        host.set_activity(None)
        host.set_state(UnitState.RUNNING, "checkpoint not written: the session is kept")
        await host.mark(None)
        return record
    verified = clock()  # the "verified -> the new session took its wakeup" latency starts here
    if keeper is not None:
        t = clock()
        host.set_activity("keeping the agent's trail and its uncommitted work")
        kept = await keep(keeper, moment_for(plan.trigger, plan.why), agent.session_id, agent.trail)
        record.wip, record.stopped = kept.wip, kept.summary()
        record.step("keep", t, clock())

    t = clock()
    host.set_activity("stopping the old session")
    if plan.after is After.STOP:
        host.set_state(UnitState.STOPPING, plan.why or f"checkpoint ({plan.trigger.value}) then stop")
    else:
        host.set_state(UnitState.RESPAWNING, f"checkpoint ({plan.trigger.value}) done; fresh session")
    await host.end_session()
    record.step("stop_session", t, clock())
    await host.mark(None)
    if plan.after is After.STOP:
        record.outcome = "stopped"
        host.set_activity(None)
        host.stopped(plan.why or "stopped after checkpoint")
        return record

    t = clock()
    fresh, problem, wakeup_tokens = await host.respawn(f"fresh session after checkpoint ({plan.trigger.value})")
    if fresh is None:
        record.outcome = problem if problem and problem.startswith(STOPPED_INSTEAD) else f"failed: {problem}"
        return record
    record.new_session = fresh.session_id
    record.wakeup_tokens = wakeup_tokens
    record.notes.append(f"wakeup {await host.delivered() or 'none'}")
    record.step("verified_to_wakeup", verified, clock())
    if keeper is not None and hasattr(keeper, "recall"):  # issue 16: did it receive what it needs?
        record.recall = await recall(keeper, fresh)
    record.step("respawn", t, clock())
    record.outcome = "respawned"
    record.finish_ratio()
    return record


async def recall(keeper: Any, fresh: Any) -> dict[str, Any] | None:
    """Probe recall of the fresh session, from what its adapter delivered (best effort: None on failure)."""
    from ..report.probes import delivered_text

    try:
        return await asyncio.to_thread(keeper.recall, delivered_text(getattr(fresh, "launched", None)))
    except Exception:  # noqa: BLE001 - a measurement never fails the cycle
        return None


#: What the wait for a fresh agent's prompt says (never the checkpoint's "turn to end", which --now skips).
WAKEUP_WAIT = "waiting for the agent to be ready for its wakeup"
#: What the wait for the answer to the wakeup says.
WAKEUP_ANSWER = "waiting for the agent to take the wakeup"


async def deliver_wakeup(agent: Agent, text: str, timeout: float, clock: Callable[[], float],
                         activity: Callable[[str | None], None]) -> str:
    """Type the wakeup as the first message once the agent is idle; confirm a turn followed.

    Returns the delivery state for ``status``: ``delivered via first-message``,
    ``typed; no answer yet``, or ``failed: ...``.  Each wait (:data:`WAKEUP_WAIT`,
    :data:`WAKEUP_ANSWER`) lasts ``timeout`` seconds at most.
    """
    activity(WAKEUP_WAIT)

    def waiting(why: str) -> None:
        activity(f"{WAKEUP_WAIT}: a person is typing" if why.startswith("waiting: a person") else WAKEUP_WAIT)

    try:
        if not await agent.wait_ready(clock() + timeout, waiting) or agent.exited:
            return "failed: the agent was not ready"
        activity("typing the wakeup")
        turns = agent.turns_ended
        await agent.type(text)
        activity(WAKEUP_ANSWER)
        answered = await agent.wait_turns(turns + 1, clock() + timeout)
    except ConnectionError:
        return "failed: the session ended"
    finally:
        activity(None)
    return "delivered via first-message" if answered else "typed; no answer yet"


def finish_interrupted(unit: str, marker: dict[str, Any], memory: Memory, tail: str) -> CycleRecord:
    """A daemon died during a checkpoint: make sure nothing the cycle owed is lost (blocking)."""
    record = CycleRecord(unit=unit, trigger=f"{marker.get('trigger')} (interrupted: daemon restart)",
                         old_session=marker.get("session"))
    try:
        if memory.fingerprint() != marker.get("fingerprint"):
            record.flush = "verified"
        else:
            memory.write_auto("the daemon stopped in the middle of a checkpoint", tail)
            record.flush = "auto"
    except Exception as exc:  # noqa: BLE001 - never block the daemon's start on this
        record.flush = "failed"
        record.notes.append(f"auto-checkpoint failed: {exc}")
    record.outcome = "fresh session at daemon start"
    return record
