"""What a plan run does next: pure rules over its state, decisions returned as values.

No processes, no files, no clock of its own (``now`` is an argument, epoch
seconds), as :mod:`supervisor.continuity.policy` and
:mod:`supervisor.daemon.lifecycle`: the runner (:mod:`.runner`) carries the
decisions out, and the tests replay whole nights with a fake clock.

* :func:`reconcile` looks at the whole run after every event and once a
  second (the deadline and the budgets are hard; a task past its time budget
  is parked; an agent that ended its turn without claiming the task is
  reminded; tasks after a parked one are blocked; each idle unit gets its next
  ready task, or is released; the run finishes once every task is settled);
* :func:`turn_ended` counts a turn (tokens, a productive edit or not) and
  parks a task over its token budget or spinning;
* :func:`verdict` turns agentd's own check into the next step: integrate,
  tell the agent the failure's tail, or park;
* :func:`claim_in` finds the agent's claim in its turn-end event (the claim
  is only ever a request for a check, never the verdict).

Spinning, named as such: no productive edit in ``[spinning] turns`` turns, the
same check failing the same way ``same_failure`` times in a row, or
``tokens_without_diff`` tokens since the last productive edit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .spec import PlanSpec, TaskSpec
from .state import BUSY, PlanState, RunStatus, Status, TaskState

#: Seconds an agent may sit at its turn end without claiming the task before agentd reminds it
#: (its claim may come a moment after the turn end: a hook, a notify).
NUDGE_AFTER = 3.0
#: Characters of a failed check's output typed back to the agent (its end, where the error is).
TAIL_CHARS = 1800
CLAIM_RE = re.compile(r"^\s*TASK DONE(?:\s*:\s*(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]*))?\s*\.?\s*$")
#: Fields of an agent's turn-end event that carry its last message (Codex notify, Claude Code's Stop hook).
MESSAGE_KEYS = ("last-assistant-message", "last_assistant_message")


@dataclass(frozen=True)
class Assign:
    """Begin ``task`` on ``unit`` in a fresh session."""

    unit: str
    task: str


@dataclass(frozen=True)
class Release:
    """``unit`` has no ready task: end its session (its work so far is committed or parked)."""

    unit: str


@dataclass(frozen=True)
class Check:
    """The agent claimed ``task`` done: run its checks."""

    task: str


@dataclass(frozen=True)
class Integrate:
    """The checks passed: make the task's commit."""

    task: str


@dataclass(frozen=True)
class Tell:
    """Type ``text`` to the task's agent as its next turn (``why``: retry | nudge)."""

    task: str
    text: str
    why: str


@dataclass(frozen=True)
class Park:
    task: str
    kind: str  # tokens | time | attempts | spinning | unit | conflict
    reason: str


@dataclass(frozen=True)
class Block:
    task: str
    by: tuple[str, ...]


@dataclass(frozen=True)
class WindDown:
    """Stop the run: every unit checkpoints and stops, the report is written."""

    kind: str  # deadline | budget | stopped | finished
    reason: str


Decision = Assign | Release | Check | Integrate | Tell | Park | Block | WindDown


# ---------------------------------------------------------------------------------------- texts

def header(plan: str, task: TaskSpec, attempt: int) -> str:
    """The line every text about a task starts with (the fake agent reads it; people see where they are)."""
    return f"[plan {plan} / task {task.id} / attempt {attempt} of {task.max_attempts}]"


def trailers(plan: str, task: str, attempt: int) -> str:
    """The lines that name a task's commit (and find it again after a crash)."""
    return f"Agentd-Plan: {plan}\nAgentd-Task: {task}\nAgentd-Attempt: {attempt}"


def command_text(command: str | Sequence[str]) -> str:
    import shlex

    return command if isinstance(command, str) else shlex.join(command)


def task_text(plan: str, task: TaskSpec, attempt: int, last_failure: str | None = None) -> str:
    """The module's task file while ``task`` is its current task (the wakeup's "Current task" shows it)."""
    checks = "\n".join(f"  $ {command_text(c)}" for c in task.done_when)
    text = (f"{header(plan, task, attempt)}\n{task.ask}\n\n"
            f"agentd checks the task itself, in a clean tree of the plan's branch plus your changes, by running:\n"
            f"{checks}\n"
            f"When you believe the task is done, claim it: run `agentd task-state --done`, or end your reply "
            f"with this line on its own:\n"
            f"TASK DONE: {task.id}\n"
            f"Your claim only asks for the check; a failure comes back to you as your next message.")
    if last_failure:
        text += f"\n\nThe last check failed:\n{last_failure}"
    return text


def failure_text(results: Sequence[Mapping[str, Any]], limit: int = TAIL_CHARS) -> str:
    """What failed, for the agent: the failing command, its exit, the end of its output."""
    failed = next((r for r in results if not r.get("ok")), None)
    if failed is None:
        return "(no command failed)"
    how = "timed out" if failed.get("timed_out") else f"exited {failed.get('exit')}"
    tail = str(failed.get("tail") or "").rstrip()
    if len(tail) > limit:
        tail = "…" + tail[-limit:]
    return f"$ {failed.get('command')}  ({how})\n{tail}" if tail else f"$ {failed.get('command')}  ({how}, no output)"


def retry_text(plan: str, task: TaskSpec, attempt: int, failure: str) -> str:
    return (f"{header(plan, task, attempt + 1)}\nagentd ran the checks of task {task.id}: attempt {attempt} "
            f"FAILED.\n{failure}\n\nFix the cause, then claim the task again: run `agentd task-state --done`, "
            f"or end your reply with the line TASK DONE: {task.id}")


def nudge_text(plan: str, task: TaskSpec, attempt: int) -> str:
    checks = "; ".join(command_text(c) for c in task.done_when)
    return (f"{header(plan, task, attempt)}\nTask {task.id} is still open: {task.ask}\n"
            f"agentd will check it with: {checks}\n"
            f"Keep working on it. When you believe it is done, run `agentd task-state --done`, or end your reply "
            f"with the line TASK DONE: {task.id}")


# ---------------------------------------------------------------------------------------- claims and failures

@dataclass(frozen=True)
class Claim:
    """The agent says its task is done (``task``: the id it named, None when it named none)."""

    task: str | None


def claim_in(event: Mapping[str, Any]) -> Claim | None:
    """The claim when the event's last message ends with the line ``TASK DONE: <id>``, else None."""
    for key in MESSAGE_KEYS:
        text = event.get(key)
        if isinstance(text, str) and text.strip():
            last = [ln for ln in text.strip().splitlines() if ln.strip()][-1]
            m = CLAIM_RE.match(last)
            return Claim(m.group("id")) if m else None
    return None


def signature(results: Sequence[Mapping[str, Any]]) -> str:
    """How a check failed, with what varies between runs (numbers, hex ids, temp paths) taken out."""
    failed = next((r for r in results if not r.get("ok")), {})
    tail = str(failed.get("tail") or "")[-TAIL_CHARS:]
    tail = re.sub(r"/tmp/\S+|0x[0-9a-f]+|\b[0-9a-f]{7,40}\b", "~", tail)
    tail = re.sub(r"\d+(\.\d+)?", "#", " ".join(tail.split()))
    key = f"{failed.get('command')}|{failed.get('exit')}|{failed.get('timed_out')}|{tail}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------- the rules

def used_seconds(task: TaskState, now: float) -> float:
    return task.seconds + (now - task.span_from if task.span_from is not None else 0.0)


def _ready(spec: PlanSpec, state: PlanState, task: TaskSpec) -> bool:
    return state.tasks[task.id].status is Status.PENDING and all(
        state.tasks[d].status is Status.DONE for d in task.after)


def reconcile(spec: PlanSpec, state: PlanState, now: float, running: frozenset[str] = frozenset(),
              quiet: frozenset[str] = frozenset()) -> list[Decision]:
    """Everything due now for the whole run (see the module docstring); ``running``: units with a session;
    ``quiet``: units idle at their turn end with nothing queued (the ones that may be reminded)."""
    if state.status is not RunStatus.RUNNING:
        return []
    if now >= state.wind_down_at:
        return [WindDown("deadline", f"the deadline ({_clock(state.deadline)}) is near: every unit stops by it")]
    if state.tokens >= state.tokens_budget:
        return [WindDown("budget", f"the plan's token budget is spent ({state.tokens} of {state.tokens_budget})")]
    out: list[Decision] = []
    for task in spec.tasks:
        ts = state.tasks[task.id]
        if ts.status is Status.ACTIVE:
            if task.time is not None and used_seconds(ts, now) >= task.time:
                out.append(Park(task.id, "time", f"its time budget is spent ({_dur(task.time)})"))
            elif ts.turn_ended_at is not None and now - ts.turn_ended_at >= NUDGE_AFTER and task.unit in quiet:
                out.append(Tell(task.id, nudge_text(spec.name, task, ts.attempts + 1), "nudge"))
    settled_badly = {t for t, s in state.tasks.items() if s.status in (Status.PARKED, Status.BLOCKED)}
    for task in spec.tasks:
        if state.tasks[task.id].status is Status.PENDING:
            by = tuple(d for d in task.after if d in settled_badly)
            if by:
                out.append(Block(task.id, by))
    parked_now = {d.task for d in out if isinstance(d, Park)}
    blocked_now = {d.task for d in out if isinstance(d, Block)}
    busy_units = {t.unit for t in state.tasks.values() if t.status in BUSY and t.id not in parked_now}
    assigned: set[str] = set()
    for task in spec.tasks:
        if task.unit in busy_units or task.unit in assigned or task.id in blocked_now:
            continue
        if _ready(spec, state, task):
            out.append(Assign(task.unit, task.id))
            assigned.add(task.unit)
    for unit in sorted(running - busy_units - assigned):
        out.append(Release(unit))
    return out


def finished(state: PlanState) -> bool:
    return all(t.settled for t in state.tasks.values())


def turn_ended(spec: PlanSpec, state: PlanState, task_id: str, tokens: int, edited: bool, now: float,
               claimed: bool = False) -> Park | None:
    """Count one turn of ``task_id`` (``tokens`` read for it; ``edited``: its scope changed since the last turn)."""
    task, ts = spec.task(task_id), state.tasks[task_id]
    ts.turns += 1
    ts.tokens += max(0, tokens)
    if edited:
        ts.quiet_turns = ts.quiet_tokens = 0
    else:
        ts.quiet_turns += 1
        ts.quiet_tokens += max(0, tokens)
    ts.turn_ended_at = None if claimed else now
    spin = spec.spinning
    if task.tokens is not None and ts.tokens >= task.tokens:
        return Park(task_id, "tokens", f"its token budget is spent ({ts.tokens} of {task.tokens})")
    if claimed:
        return None
    if ts.quiet_turns >= spin.turns:
        return Park(task_id, "spinning", f"spinning: no productive edit in {ts.quiet_turns} turns")
    if ts.quiet_tokens >= spin.tokens_without_diff:
        return Park(task_id, "spinning", f"spinning: {ts.quiet_tokens} tokens spent with no change to its files")
    return None


def verdict(spec: PlanSpec, state: PlanState, task_id: str, passed: bool, results: Sequence[Mapping[str, Any]],
            now: float) -> Integrate | Tell | Park:
    """agentd's check of ``task_id`` ended: the next step."""
    task, ts = spec.task(task_id), state.tasks[task_id]
    ts.attempts += 1
    if passed:
        return Integrate(task_id)
    ts.failures.append(signature(results))
    same = spec.spinning.same_failure
    if len(ts.failures) >= same and len(set(ts.failures[-same:])) == 1:
        return Park(task_id, "spinning", f"spinning: the same check failed the same way {same} times in a row")
    if ts.attempts >= task.max_attempts:
        return Park(task_id, "attempts", f"{ts.attempts} checks failed (max_attempts = {task.max_attempts})")
    if task.time is not None and used_seconds(ts, now) >= task.time:
        return Park(task_id, "time", f"its time budget is spent ({_dur(task.time)})")
    return Tell(task_id, retry_text(spec.name, task, ts.attempts, failure_text(results)), "retry")


def decide_for_person(ts: TaskState, spec_task: TaskSpec) -> str | None:
    """What the person must decide about a task in the morning (None: nothing)."""
    if ts.status is Status.PARKED:
        where = f" Its work so far is on {ts.parked_ref}." if ts.parked_ref else ""
        return (f"Parked: {ts.reason}.{where} Fix it by hand, change the ask or its checks, or give it more "
                f"budget, then run the plan again.")
    if ts.status is Status.BLOCKED:
        return f"Blocked by {', '.join(ts.blocked_by)}: it runs once {'those are' if len(ts.blocked_by) > 1 else 'that is'} done."
    if ts.status is not Status.DONE:
        return f"Not finished ({ts.reason or ts.status.value}): the next run of the plan picks it up."
    return None


def _clock(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(epoch))


def _dur(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
