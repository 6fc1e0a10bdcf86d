"""When a running unit needs something done: the continuity cycle's policy, as pure functions.

:func:`due` says whether a checkpoint is due from the context figure and the
session's age; :func:`watch` looks at everything a tick sees about a running
session (context, age, silence, runtime, a failure, queued text) and returns
the one :class:`Action` to take now, or None; :func:`next_due` says how soon
one of its time-based rules could act if nothing else changes (so a tick may
skip a session with no new output until then).  No processes, no clock of
their own: the caller passes ``now``, so tests replay situations directly.

The protocol itself (wait for the turn end, prompt, verify, respawn) is
:mod:`supervisor.continuity.cycle`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..adapters.base import ContextFigure
from ..config.units import UnitSpec

DEFAULT_PROMPT = (
    "CHECKPOINT requested by agentd: your session will be restarted from a short briefing. "
    "Before that, write down what you have confirmed since the last checkpoint: "
    "(1) append each fact you confirmed to .agent/engram.md, one line each, as "
    "`agentd note \"...\" --confirmed` (or --hypothesis for what you believe but did not prove); "
    "(2) record each irreversible decision with `agentd decide \"...\" --why \"because ..., so ...\"`; "
    "(3) record where you are and what comes next with `agentd task-state \"...\"` (your module's task). "
    "Reply DONE when the files are written."
)

#: Seconds a person's keystrokes hold back agentd's own typing.
PERSON_IDLE = 10.0


class Trigger(str, enum.Enum):
    """Why a checkpoint runs."""

    THRESHOLD = "threshold"  # context at [context] checkpoint_at
    HARD_LIMIT = "hard_limit"  # context at [context] hard_limit: interrupt the turn first
    MAX_SESSION_AGE = "max_session_age"
    RESTART_EVERY = "restart_every"
    STALL = "stall"  # no output for [schedule] stall_after
    PRE_COMPACT = "pre_compact"  # the agent said it is about to compact
    COMMAND = "command"  # agentd checkpoint UNIT
    RESTART = "restart"  # agentd restart UNIT
    STOP = "stop"  # a graceful stop (command, schedule, max_runtime, scope violation, removal)
    FREEZE = "freeze"  # a frozen session whose unit says restart (see Freeze)


class After(str, enum.Enum):
    """What follows a checkpoint."""

    RESPAWN = "respawn"  # a fresh session that starts from the wakeup (the cycle)
    STOP = "stop"  # the unit stops


def due(spec: UnitSpec, figure: ContextFigure | None, session_age: float) -> Trigger | None:
    """The trigger that makes a checkpoint due now, or None.

    ``hard_limit`` (act even mid-turn) before ``threshold`` (wait for the turn
    end) before the proactive ``max_session_age`` / ``restart_every``.
    """
    ctx = spec.context
    if figure is not None and figure.window > 0:
        if figure.ratio >= ctx.hard_limit:
            return Trigger.HARD_LIMIT
        if figure.ratio >= ctx.checkpoint_at:
            return Trigger.THRESHOLD
    if ctx.max_session_age is not None and session_age >= ctx.max_session_age:
        return Trigger.MAX_SESSION_AGE
    every = ctx.restart_every or spec.schedule.restart_every
    if every is not None and session_age >= every:
        return Trigger.RESTART_EVERY
    return None


def checkpoint_prompt(spec: UnitSpec) -> str:
    return spec.checkpoint.prompt or DEFAULT_PROMPT


# ------------------------------------------------------------------ one tick
@dataclass(frozen=True)
class Checkpoint:
    """Run the cycle now (``interrupt``: stop the running turn first)."""

    trigger: Trigger
    interrupt: bool = False
    deadline: float | None = None  # seconds; None = [checkpoint] deadline


@dataclass(frozen=True)
class StopUnit:
    """Stop the unit through a checkpoint (``max_runtime`` reached)."""

    reason: str


@dataclass(frozen=True)
class EndSession:
    """The session cannot go on (e.g. the model server is unreachable): end it; the restart policy follows."""

    reason: str


@dataclass(frozen=True)
class TypeQueued:
    """The agent is idle: type the next queued message."""


class Freeze(str, enum.Enum):
    """A session that will not go on by itself (each value is also its key in the unit's ``[freeze]``)."""

    IDLE_AFTER_COMPACTION = "idle_after_compaction"  # at a turn end after its own compaction, never continued
    STUCK_ABOVE_HARD_LIMIT = "stuck_above_hard_limit"  # context at or above [context] hard_limit, not coming down
    CHECKPOINT_OVERDUE = "checkpoint_overdue"  # a checkpoint still running long after its deadline
    APPROVAL_WAIT = "approval_wait"  # an approval prompt on screen that nobody answers
    BLOCKED_SCREEN = "blocked_screen"  # a first-run screen: trust, login, update, onboarding
    STOPPED_PROCESS = "stopped_process"  # the agent's process is stopped (SIGSTOP, state T): it looks busy forever
    # these two are backed off, never restarted (a restart is what repeats them); no [freeze] key
    CYCLE_STORM = "cycle_storm"  # a fresh session at the threshold within its first turn after the wakeup
    MEMORY_UNWRITABLE = "memory_unwritable"  # the checkpoint's notes cannot be written: the session is kept


@dataclass(frozen=True)
class Frozen:
    """The session is frozen: name it (status, history); ``restart`` through the cycle, else notify only."""

    freeze: Freeze
    detail: str
    restart: bool


Action = Checkpoint | StopUnit | EndSession | TypeQueued | Frozen


@dataclass(frozen=True)
class Seen:
    """What one tick sees of a running session."""

    context: ContextFigure | None
    session_age: float
    silent_for: float  # seconds since the agent's last output
    run_age: float | None  # seconds since this run of the unit began (None: max_runtime already acted)
    failure: str | None  # the adapter's reason the session cannot go on
    may_type: bool  # idle, nobody typing, queued text waiting
    blocked: str | None = None  # a blocking screen the adapter sees ("trust", "approval", ...)
    blocked_for: float = 0.0  # seconds it has been on screen
    blocked_todo: str = ""  # what a person should do about it
    idle_after_compaction: float | None = None  # seconds idle at the turn end after its own compaction
    above_hard_limit_for: float | None = None  # seconds the context has been at or above hard_limit
    stopped_for: float | None = None  # seconds the agent's process has been stopped (SIGSTOP)
    first_turn: bool = False  # the session has a wakeup and is still in its first turn after it
    storm_named: bool = False  # this session's cycle storm has been named (its backoff is under way or over)
    held: bool = False  # threshold cycles are held back (a storm's or unwritable notes' backoff)
    wakeup_tokens: int | None = None  # the session's wakeup, for what a storm's freeze says to change


def frozen(spec: UnitSpec, freeze: Freeze, detail: str) -> Frozen:
    """The unit's action for ``freeze`` (its ``[freeze]`` key of that name)."""
    return Frozen(freeze, detail, getattr(spec.freeze, freeze.value) == "restart")


#: The first backoff of a cycle storm or of notes that cannot be written, doubled each time it repeats, up to
#: :data:`HOLD_MAX` seconds.
HOLD_FIRST = 60.0
HOLD_MAX = 1800.0


def hold(times: int) -> float:
    """Seconds threshold cycles are held back after the ``times``-th storm (or unwritable flush) in a row."""
    return min(HOLD_MAX, HOLD_FIRST * 2 ** max(0, times - 1))


def cramped(seen: Seen) -> bool:
    """The wakeup took most of the room the session had below the threshold: the tokens used beyond the
    wakeup are fewer than the wakeup's own.  A first turn that works long (an autonomous agent's, the
    demo's periodic work) and then crosses did its work; one whose briefing leaves it no room does none,
    and each checkpoint only starts another."""
    figure = seen.context
    if not seen.wakeup_tokens or figure is None:
        return False
    return figure.used - seen.wakeup_tokens < seen.wakeup_tokens


def storm(spec: UnitSpec, seen: Seen) -> Frozen:
    """A cycle storm, with what to change (the window, the wakeup budget, ``checkpoint_at``)."""
    figure = seen.context
    where = (f"{figure.ratio * 100:.0f}% of a {figure.window}-token window" if figure is not None and figure.window
             else "the threshold")
    wakeup = f"a {seen.wakeup_tokens}-token wakeup" if seen.wakeup_tokens else "its wakeup"
    return Frozen(Freeze.CYCLE_STORM,
                  f"cycle storm: a fresh session reached {where} within its first turn after {wakeup}, so each "
                  f"checkpoint only starts another; change [context] window (if the agent's is larger), "
                  f"[wakeup] budget (now {spec.wakeup.budget}) or [context] checkpoint_at "
                  f"(now {spec.context.checkpoint_at:g})", restart=False)


def overdue(spec: UnitSpec, checkpoint_age: float, stop_timeout: float) -> Frozen | None:
    """A checkpoint running ``checkpoint_age`` seconds is overdue when it outlived everything it may
    wait for (its deadline and grace, two stop timeouts, a fresh agent's ready timeout) by ``[freeze] after``."""
    cp = spec.checkpoint
    limit = cp.deadline + cp.grace + 2 * stop_timeout + cp.ready_timeout + spec.freeze.after
    if checkpoint_age < limit:
        return None
    return frozen(spec, Freeze.CHECKPOINT_OVERDUE,
                  f"a checkpoint has run {checkpoint_age:.0f}s, past its deadline ({cp.deadline:g}s) and every wait after it")


def watch(spec: UnitSpec, seen: Seen) -> Action | None:
    """The one thing to do for a running, otherwise unoccupied session now, or None.

    In order: ``max_runtime`` (a checkpointed stop), a failure (end the
    session), a stopped process, a blocking screen or an approval prompt that stayed ``[freeze]
    after`` seconds (frozen), a due checkpoint (hard limit interrupts; held back
    during a backoff; a cycle storm when a fresh session is due within its first
    turn after the wakeup), a stall
    (checkpoint, interrupting the turn, within ``stall_after``), a context
    stuck above the hard limit and an agent idle after its own compaction
    (frozen, each after ``[freeze] after``), then queued text.
    """
    sched = spec.schedule
    after = spec.freeze.after
    if sched.max_runtime and seen.run_age is not None and seen.run_age >= sched.max_runtime:
        return StopUnit(f"max_runtime {sched.max_runtime:g}s reached")
    if seen.failure is not None:
        return EndSession(seen.failure)
    if seen.stopped_for is not None and seen.stopped_for >= after:
        return frozen(spec, Freeze.STOPPED_PROCESS, f"the agent's process has been stopped (SIGSTOP) for "
                      f"{seen.stopped_for:.0f}s: it cannot take a turn; `kill -CONT` it, or restart the unit")
    if seen.blocked is not None and seen.blocked_for >= after:
        kind = Freeze.APPROVAL_WAIT if seen.blocked == "approval" else Freeze.BLOCKED_SCREEN
        return frozen(spec, kind, f"blocked: {seen.blocked} for {seen.blocked_for:.0f}s; {seen.blocked_todo}".rstrip("; "))
    trigger = due(spec, seen.context, seen.session_age) if spec.checkpoint.enabled else None
    if trigger in (Trigger.THRESHOLD, Trigger.HARD_LIMIT):
        if seen.held:
            trigger = None  # backing off: a storm, or notes that cannot be written
        elif seen.first_turn and not seen.storm_named and cramped(seen):
            return storm(spec, seen)
    if trigger is not None:
        return Checkpoint(trigger, interrupt=trigger is Trigger.HARD_LIMIT)
    if sched.stall_after and seen.silent_for >= sched.stall_after:
        # a stalled agent gets a fresh session even where checkpoints are off
        return Checkpoint(Trigger.STALL, interrupt=True, deadline=min(spec.checkpoint.deadline, sched.stall_after))
    if seen.above_hard_limit_for is not None and seen.above_hard_limit_for >= after:
        ratio = f"{seen.context.ratio * 100:.0f}%" if seen.context else "?"
        return frozen(spec, Freeze.STUCK_ABOVE_HARD_LIMIT,
                      f"context at {ratio}, at or above the hard limit ({spec.context.hard_limit * 100:.0f}%) "
                      f"for {seen.above_hard_limit_for:.0f}s")
    if seen.may_type:
        return TypeQueued()
    if seen.idle_after_compaction is not None and seen.idle_after_compaction >= after:
        return frozen(spec, Freeze.IDLE_AFTER_COMPACTION,
                      f"idle for {seen.idle_after_compaction:.0f}s at the turn end after its own compaction")
    return None


def next_due(spec: UnitSpec, seen: Seen) -> float | None:
    """Seconds until a rule of :func:`watch` may act on ``seen`` by time alone, or None when none can.

    What :func:`watch` decides changes in two ways: with what the session shows (output, a turn, a
    queued message: the caller looks again then) and with time, for a session that shows nothing new:
    ``max_runtime``, the freezes measured in seconds (a stopped process, a blocking screen, a context
    above the hard limit, idle after its own compaction: each ``[freeze] after``), a checkpoint by
    session age (``max_session_age``, ``restart_every``) and a stall.  This is the soonest of those,
    counted from the moment ``seen`` describes (0: one may act now).  Queued text (``may_type``) is due
    at once.
    """
    sched, after = spec.schedule, spec.freeze.after
    waits: list[float] = []
    if seen.may_type:
        waits.append(0.0)
    if sched.max_runtime and seen.run_age is not None:
        waits.append(sched.max_runtime - seen.run_age)
    for since in (seen.stopped_for, seen.above_hard_limit_for, seen.idle_after_compaction,
                  seen.blocked_for if seen.blocked is not None else None):
        if since is not None:
            waits.append(after - since)
    if spec.checkpoint.enabled:
        ctx = spec.context
        for limit in (ctx.max_session_age, ctx.restart_every or sched.restart_every):
            if limit is not None:
                waits.append(limit - seen.session_age)
    if sched.stall_after:
        waits.append(sched.stall_after - seen.silent_for)
    return max(0.0, min(waits)) if waits else None
