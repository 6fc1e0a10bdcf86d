"""A plan run's durable state: what each task has done, written atomically at every step.

Everything the runner knows about a run lives in :class:`PlanState` and goes
to ``<state>/plans/<name>/state.json`` with the one atomic write
(:func:`supervisor.durable.write_json`) before anything it decided is acted
on, so a daemon killed with -9 at any point resumes from the last step: a task
that was checking is checked again, one that was integrating finds its commit
on the branch (the commit names the task) or makes it, a task that was worked
on gets a fresh session.  No task is done twice and no commit is lost.

Also in that directory: ``plan.toml`` (the plan file as it was at the start:
the run never reads the person's file again, so a change to it, by anyone,
takes effect only at the next ``agentd plan start``), ``events.jsonl`` (what
happened, one JSON line each: the notify events among them) and
``checks/<task>-<attempt>.log`` (each check's whole output, redacted).
"""

from __future__ import annotations

import enum
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..durable import append_jsonl, atomic_write, read_jsonl, write_json

FORMAT = 1


class Status(str, enum.Enum):
    PENDING = "pending"  # not begun: waiting for its unit or for a task it comes after
    ACTIVE = "active"  # its unit's agent works on it
    CHECKING = "checking"  # the agent claimed it done: agentd's checks run
    INTEGRATING = "integrating"  # the checks passed: the commit is being made
    DONE = "done"
    PARKED = "parked"  # given up on, with the reason (attempts, a budget, spinning, a failed unit)
    BLOCKED = "blocked"  # comes after a parked or blocked task


SETTLED = frozenset({Status.DONE, Status.PARKED, Status.BLOCKED})
BUSY = frozenset({Status.ACTIVE, Status.CHECKING, Status.INTEGRATING})


class RunStatus(str, enum.Enum):
    RUNNING = "running"
    WINDING_DOWN = "winding_down"  # the deadline, a budget or `plan stop`: units checkpoint and stop
    ENDED = "ended"


@dataclass
class TaskState:
    """One task's progress (see the module docstring).  Times are epoch seconds."""

    id: str
    unit: str
    status: Status = Status.PENDING
    attempts: int = 0  # checks run to a verdict
    turns: int = 0
    tokens: int = 0
    seconds: float = 0.0  # time the task was worked on or checked
    sessions: int = 0  # sessions that worked on it (the plan's fresh ones and the cycles' respawns)
    cycles: int = 0  # sessions beyond the ones agentd started for the task (continuity cycles, crashes)
    started_at: float | None = None
    ended_at: float | None = None
    base: str | None = None  # the unit's scope (a git tree) when the task began
    claimed: str | None = None  # the scope when the agent claimed it done
    scope_seen: str | None = None  # the scope at the last turn end
    quiet_turns: int = 0  # turns in a row without a productive edit
    quiet_tokens: int = 0  # tokens since the last productive edit
    failures: list[str] = field(default_factory=list)  # each failed check's signature, in order
    checks: list[dict[str, Any]] = field(default_factory=list)  # each verdict: attempt, passed, results, log
    tree: str | None = None  # the tree that passed its checks (what the commit must hold)
    commit: str | None = None
    diffstat: dict[str, Any] | None = None
    parked_ref: str | None = None  # a parked task's work, kept on a ref for the person
    reason: str | None = None  # why parked, blocked or left unfinished
    kind: str | None = None  # tokens | time | attempts | spinning | unit | conflict | deadline | stopped
    blocked_by: list[str] = field(default_factory=list)
    violations: int = 0
    violations_at_start: int | None = None
    freezes: list[dict[str, Any]] = field(default_factory=list)
    session: str | None = None  # the session working on it now
    turn_ended_at: float | None = None  # the last turn end without a claim (when to remind the agent)
    nudges: int = 0
    span_from: float | None = None  # when the current stretch of work began (not counted in ``seconds`` yet)

    @property
    def settled(self) -> bool:
        return self.status in SETTLED

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def of(cls, data: dict[str, Any]) -> TaskState:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values.get("status", "pending"))
        return cls(**values)


@dataclass
class PlanState:
    """A run of a plan."""

    name: str
    branch: str
    started_at: float
    deadline: float
    wind_down_at: float
    tokens_budget: int
    base_commit: str  # HEAD when the run started
    tip: str  # the newest commit agentd put on the branch (the branch's expected value)
    tasks: dict[str, TaskState]
    status: RunStatus = RunStatus.RUNNING
    trigger: str = "command"  # or "schedule"
    units: dict[str, dict[str, Any]] = field(default_factory=dict)  # unit -> {"snapshot": scope after its last pass}
    ended_at: float | None = None
    end_reason: str | None = None
    report: str | None = None  # the Markdown report, relative to the project
    sent: list[str] = field(default_factory=list)  # keys of events already announced (none twice after a resume)
    format: int = FORMAT

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.tasks.values())

    def task(self, task_id: str) -> TaskState:
        return self.tasks[task_id]

    def of_unit(self, unit: str, statuses: frozenset[Status] = BUSY) -> TaskState | None:
        return next((t for t in self.tasks.values() if t.unit == unit and t.status in statuses), None)

    def as_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["status"] = self.status.value
        data["tasks"] = [t.as_dict() for t in self.tasks.values()]
        return data

    @classmethod
    def of(cls, data: dict[str, Any]) -> PlanState:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = RunStatus(values.get("status", "running"))
        values["tasks"] = {t["id"]: TaskState.of(t) for t in data.get("tasks", [])}
        return cls(**values)


class StateError(Exception):
    """A plan's state cannot be read (the message names the file)."""


class PlanStore:
    """The files of one plan's latest run under ``<state>/plans/<name>/``."""

    def __init__(self, state_dir: Path, name: str) -> None:
        self.name = name
        self.dir = Path(state_dir) / "plans" / name

    @staticmethod
    def names(state_dir: Path) -> list[str]:
        folder = Path(state_dir) / "plans"
        return sorted(p.name for p in folder.iterdir() if (p / "state.json").is_file()) if folder.is_dir() else []

    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    @property
    def frozen_path(self) -> Path:
        return self.dir / "plan.toml"

    @property
    def events_path(self) -> Path:
        return self.dir / "events.jsonl"

    def work_dir(self) -> Path:
        return self.dir / "work"

    def check_log(self, task: str, attempt: int) -> Path:
        return self.dir / "checks" / f"{task}-{attempt}.log"

    def exists(self) -> bool:
        return self.state_path.is_file()

    def load(self) -> PlanState | None:
        try:
            import json

            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StateError(f"{self.state_path}: cannot read the plan's state: {exc}") from None
        if not isinstance(data, dict) or data.get("format", 0) > FORMAT:
            raise StateError(f"{self.state_path}: not a plan state this agentd understands")
        return PlanState.of(data)

    def save(self, state: PlanState) -> None:
        write_json(self.state_path, state.as_dict(), mode=0o600, indent=1)

    def begin(self, source: str) -> None:
        """A new run: the last one (if any) moves aside, the plan file's text is frozen for this one."""
        if self.dir.exists():
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(os.stat(self.dir).st_mtime))
            old = self.dir.parent / ".previous" / f"{self.name}-{stamp}-{os.getpid()}"
            old.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.dir, old)
        self.dir.mkdir(parents=True, mode=0o700)
        atomic_write(self.frozen_path, source, mode=0o600)

    def frozen_source(self) -> str:
        return self.frozen_path.read_text()

    def event(self, record: dict[str, Any]) -> None:
        append_jsonl(self.events_path, record)

    def events(self) -> Iterator[dict[str, Any]]:
        yield from read_jsonl(self.events_path)

    def clear_work(self) -> None:
        shutil.rmtree(self.work_dir(), ignore_errors=True)
