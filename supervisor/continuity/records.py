"""What happened in each continuity cycle: :class:`CycleRecord`, kept in ``<state>/history/UNIT.jsonl``."""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..durable import append_jsonl, read_jsonl
from ..session.redact import redact_value


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
    wip: str | None = None  # the WIP commit that saved the old session's uncommitted work
    stopped: dict[str, Any] | None = None  # where the old session stopped (Stopped.summary())
    recall: dict[str, Any] | None = None  # probe recall of the new session (supervisor/report/probes.py)

    def step(self, name: str, started: float, now: float) -> None:
        """Record that step ``name`` took from ``started`` to ``now`` (monotonic seconds)."""
        self.steps[name] = round(now - started, 3)

    def finish_ratio(self) -> None:
        if self.wakeup_tokens is not None and self.tokens_before:
            self.ratio = round(self.wakeup_tokens / self.tokens_before, 4)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def history_path(state_dir: Path, unit: str) -> Path:
    return state_dir / "history" / f"{unit}.jsonl"


def append_history(state_dir: Path, record: CycleRecord) -> None:
    """Append the record; its text (notes, outcome, reasons) is redacted first."""
    append_jsonl(history_path(state_dir, record.unit), redact_value(record.as_dict()))


def read_history(state_dir: Path, unit: str) -> Iterator[dict[str, Any]]:
    """Records oldest first; a torn last line is skipped."""
    return read_jsonl(history_path(state_dir, unit))


class StartReason(str, enum.Enum):
    """Why a unit's new session started."""

    START = "start"  # the daemon started the unit, or `agentd start`
    CRASH = "crash"  # the previous session exited on its own; the restart policy brought it back
    CYCLE = "cycle"  # the continuity cycle (a checkpoint, then a fresh session)
    SCHEDULE = "schedule"  # a cron start
    LIMIT_RESET = "limit_reset"  # a usage limit's wait is over
    RESTART = "restart"  # `agentd restart --now`, a reload, reset-failed


@dataclass
class SessionRecord:
    """One new session of a unit and why it started (``history/UNIT.sessions.jsonl``)."""

    unit: str
    session: str
    why: StartReason
    detail: str
    previous: str | None = None  # the session it followed
    previous_exit: str | None = None  # how that one ended, when it ended on its own
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    started_ns: int = field(default_factory=time.time_ns)  # orders sessions started within one second
    wakeup: str | None = None  # where the wakeup went: argv, system-prompt, first-message, file, none
    recall: dict[str, Any] | None = None  # probe recall of its wakeup, for a start outside a cycle (crash, schedule)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["why"] = self.why.value
        return data


def sessions_path(state_dir: Path, unit: str) -> Path:
    return state_dir / "history" / f"{unit}.sessions.jsonl"


def append_session(state_dir: Path, record: SessionRecord) -> None:
    append_jsonl(sessions_path(state_dir, record.unit), record.as_dict())


def read_sessions(state_dir: Path, unit: str) -> Iterator[dict[str, Any]]:
    """Session records oldest first (the newest is the unit's current or last session)."""
    return read_jsonl(sessions_path(state_dir, unit))


def compaction_record(unit: str, session: str, compacted: bool, context: Any, wakeup_tokens: int | None) -> CycleRecord:
    """The record of the agent's own compaction (``compacted``) or its announcement (before it)."""
    record = CycleRecord(unit=unit, trigger="agent compacted" if compacted else "agent about to compact",
                         old_session=session, new_session=session, flush="skipped",
                         outcome="wakeup re-injected" if wakeup_tokens is not None else "recorded",
                         wakeup_tokens=wakeup_tokens)
    if context is not None:
        record.tokens_before, record.window, record.exact = context.used, context.window, context.exact
    record.finish_ratio()
    return record
