"""The continuity cycle's policy and records: when to checkpoint, what to type, what happened.

Pure parts (no processes): :func:`due` decides whether a session needs a
checkpoint now; :class:`CycleRecord` is the record of one cycle, appended as a
JSON line to ``<state>/history/UNIT.jsonl``; :func:`unit_wakeup` builds the
briefing a unit's fresh session starts from, exactly as ``agentd wakeup UNIT``
prints it.  The daemon (:mod:`supervisor.daemon.arbiter`) runs the protocol:

1. wait for the turn to end (never type into a running turn; at the hard limit
   interrupt first; while a person is typing in an attached terminal, wait);
2. type the checkpoint prompt;
3. wait for the flush: the next turn end and a change of the memory files
   (engram, decision logs, current task), until the deadline;
4. verify; if nothing changed, write an ``[auto]`` checkpoint so nothing is lost;
5. stop the old session, start a fresh one whose first message is the wakeup,
   and confirm the agent received it.
"""

from __future__ import annotations


from ..adapters.base import ContextFigure
from ..config.units import UnitSpec

DEFAULT_PROMPT = (
    "CHECKPOINT requested by agentd: your session will be restarted from a short briefing. "
    "Before that, write down what you have confirmed since the last checkpoint: "
    "(1) append each fact you confirmed to .agent/engram.md, one line each, as "
    "`agentd note \"...\" --confirmed` (or --hypothesis for what you believe but did not prove); "
    "(2) record each irreversible decision with `agentd decide \"...\" --why \"because ..., so ...\"`; "
    "(3) update the line \"State at interruption:\" in .agent/current-task.md with where you are and what comes next. "
    "Reply DONE when the files are written."
)

#: Seconds a person's keystrokes hold back agentd's own typing.
PERSON_IDLE = 10.0


def due(spec: UnitSpec, figure: ContextFigure | None, session_age: float) -> str | None:
    """The trigger that makes a checkpoint due now, or None.

    ``hard_limit`` (act even mid-turn) before ``threshold`` (wait for the turn
    end) before the proactive ``max_session_age`` / ``restart_every``.
    """
    ctx = spec.context
    if figure is not None and figure.window > 0:
        if figure.ratio >= ctx.hard_limit:
            return "hard_limit"
        if figure.ratio >= ctx.checkpoint_at:
            return "threshold"
    if ctx.max_session_age is not None and session_age >= ctx.max_session_age:
        return "max_session_age"
    every = ctx.restart_every or spec.schedule.restart_every
    if every is not None and session_age >= every:
        return "restart_every"
    return None


def checkpoint_prompt(spec: UnitSpec) -> str:
    return spec.checkpoint.prompt or DEFAULT_PROMPT


