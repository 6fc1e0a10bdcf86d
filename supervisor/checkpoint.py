"""The continuity cycle's policy and records: when to checkpoint, what to type, what happened.

Pure parts (no processes): :func:`due` decides whether a session needs a
checkpoint now; :class:`CycleRecord` is the record of one cycle, appended as a
JSON line to ``<state>/history/UNIT.jsonl``; :func:`unit_wakeup` builds the
briefing a unit's fresh session starts from, exactly as ``agentd wakeup UNIT``
prints it.  The daemon (:mod:`supervisor.daemon`) runs the protocol:

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

import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .adapters.base import ContextFigure
from .units import UnitSpec

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


@dataclass(frozen=True)
class WakeupText:
    text: str
    tokens: int
    source: str  # "briefing" or the unit's own command


def unit_wakeup(spec: UnitSpec, root: Path) -> WakeupText:
    """The briefing for ``spec``'s next session: what ``agentd wakeup UNIT`` prints (blocking)."""
    from .tokens import estimate_tokens
    from .wakeup import build_wakeup, run_wakeup_command

    if spec.wakeup.command:
        text = run_wakeup_command(root, list(spec.wakeup.command))
        return WakeupText(text, estimate_tokens(text), " ".join(spec.wakeup.command))
    wake = build_wakeup(root, spec.module, list(spec.scope.paths), spec.wakeup.budget)
    return WakeupText(wake.text, wake.tokens, "briefing")


@dataclass
class CycleRecord:
    """One continuity cycle (or a fresh start after a crash), as recorded."""

    unit: str
    trigger: str
    old_session: str | None
    new_session: str | None = None
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    tokens_before: int | None = None
    window: int | None = None
    exact: bool | None = None
    wakeup_tokens: int | None = None
    ratio: float | None = None  # wakeup tokens / tokens before
    flush: str = "pending"  # verified | auto | skipped
    outcome: str = "running"  # respawned | stopped | failed: ...
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    notes: list[str] = field(default_factory=list)

    def step(self, name: str, started: float) -> None:
        self.steps[name] = round(time.monotonic() - started, 3)

    def finish_ratio(self) -> None:
        if self.wakeup_tokens is not None and self.tokens_before:
            self.ratio = round(self.wakeup_tokens / self.tokens_before, 4)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def history_path(state_dir: Path, unit: str) -> Path:
    return state_dir / "history" / f"{unit}.jsonl"


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one whole JSON line under an exclusive lock, fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def append_history(state_dir: Path, record: CycleRecord) -> None:
    append_jsonl(history_path(state_dir, record.unit), record.as_dict())


def read_history(state_dir: Path, unit: str) -> Iterator[dict[str, Any]]:
    """Records oldest first; a torn last line is skipped."""
    path = history_path(state_dir, unit)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            yield item
