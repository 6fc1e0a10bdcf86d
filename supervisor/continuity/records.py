"""What happened in each continuity cycle: :class:`CycleRecord`, kept in ``<state>/history/UNIT.jsonl``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..durable import append_jsonl, read_jsonl
from ..session.redact import redact_text


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


def append_history(state_dir: Path, record: CycleRecord) -> None:
    """Append the record; its text (notes, outcome, reasons) is redacted first."""
    append_jsonl(history_path(state_dir, record.unit), _redacted(record.as_dict()))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def read_history(state_dir: Path, unit: str) -> Iterator[dict[str, Any]]:
    """Records oldest first; a torn last line is skipped."""
    return read_jsonl(history_path(state_dir, unit))
