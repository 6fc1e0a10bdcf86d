"""What a plan is: ``plans/NAME.toml``, what the person wants done overnight and how to check each step.

The file's schema (pydantic models, unknown keys refused) and the validated,
frozen :class:`PlanSpec` with the plan's defaults applied to each task;
durations and the deadline.  Reading a file and explaining its errors with
file and line is :mod:`.planfile`'s.

Sections::

    [plan]      description, deadline, timezone, tokens, branch, stop_before
    [defaults]  max_attempts, tokens, time, check_timeout (for every task)
    [spinning]  turns, same_failure, tokens_without_diff
    [schedule]  start (cron), timezone, grace
    [notify]    command (argv list), events
    [[task]]    id, unit, ask, done_when, after, max_attempts, tokens, time, check_timeout

Durations are seconds or text such as ``"45m"``, ``"1h30m"``; the deadline is
``"07:00"`` (its next occurrence after the start), an ISO date and time, a
TOML datetime, or a duration after the start (``"8h"``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..config.notify import NotifySection as Notify

ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PLAN_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_DURATION_RE = re.compile(r"^\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s)?\s*$")
_CLOCK_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*$")


def duration(value: Any, what: str = "") -> float:
    """Seconds from a number or ``"1h30m"``/``"45m"``/``"90s"``; ValueError (naming ``what`` when given)."""
    lead = f"{what}: " if what else ""
    if isinstance(value, bool):
        raise ValueError(f"{lead}expected seconds or text such as \"45m\", got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION_RE.match(value)) and any(m.groups()):
        h, mi, s = (int(g or 0) for g in m.groups())
        seconds = float(h * 3600 + mi * 60 + s)
    else:
        raise ValueError(f"{lead}expected seconds or text such as \"45m\" or \"1h30m\", got {value!r}")
    if seconds <= 0:
        raise ValueError(f"{lead}must be more than 0 seconds, got {value!r}")
    return seconds


def _tz(name: str | None) -> dt.tzinfo:
    from zoneinfo import ZoneInfo

    return ZoneInfo(name) if name else dt.datetime.now().astimezone().tzinfo or dt.timezone.utc


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanSection(_Section):
    description: str = ""
    deadline: str
    timezone: str | None = None
    tokens: int = Field(gt=0, description="the whole plan's token budget")
    branch: str | None = None
    stop_before: float | None = Field(default=None, description="seconds before the deadline the wind-down begins")

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, value: Any) -> str:
        if isinstance(value, dt.datetime | dt.time):
            return value.isoformat()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{int(value)}s"
        if not isinstance(value, str):
            raise ValueError(f'expected "07:00", an ISO date and time, or a duration such as "8h"; got {value!r}')
        deadline_at(value, 0.0, None)  # raises with the reason
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None:
            from zoneinfo import ZoneInfoNotFoundError

            try:
                _tz(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Europe/Berlin')") from None
        return value

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        if value is not None and not valid_branch(value):
            raise ValueError(f"{value!r} is not a branch name git accepts (no spaces, '..', '~', '^', ':', '?', '*', "
                             "'[', '\\\\', no leading '-' or trailing '/' or '.lock')")
        return value

    @field_validator("stop_before", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> float | None:
        return None if value is None else duration(value, "stop_before")


class Defaults(_Section):
    max_attempts: int = Field(default=3, ge=1, le=100)
    tokens: int | None = Field(default=None, gt=0)
    time: float | None = None
    check_timeout: float = 600.0

    @field_validator("time", "check_timeout", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> float | None:
        return None if value is None else duration(value)


class Spinning(_Section):
    """When a task counts as spinning (then it is parked, named as such)."""

    turns: int = Field(default=8, ge=1, description="turns in a row without a productive edit")
    same_failure: int = Field(default=3, ge=2, description="checks in a row failing the same way")
    tokens_without_diff: int = Field(default=300_000, gt=0, description="tokens spent since the last productive edit")


class Schedule(_Section):
    start: str
    timezone: str = "UTC"
    grace: float = Field(default=300.0, ge=0)

    @property
    def stop(self) -> None:
        """A plan has no scheduled stop (its deadline ends it); the scheduler asks."""
        return None

    @field_validator("start")
    @classmethod
    def _cron(cls, value: str) -> str:
        from ..schedule import parse_cron

        parse_cron(value, "UTC")
        return value


class Task(_Section):
    id: str
    unit: str
    ask: str = Field(min_length=1)
    done_when: tuple[str | tuple[str, ...], ...] = Field(min_length=1)
    after: tuple[str, ...] = ()
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    tokens: int | None = Field(default=None, gt=0)
    time: float | None = None
    check_timeout: float | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not ID_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid task id: letters, digits, '_', '.', '-' (up to 64)")
        return value

    @field_validator("done_when", mode="before")
    @classmethod
    def _commands(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        return value

    @field_validator("done_when")
    @classmethod
    def _nonempty(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        for command in value:
            if (isinstance(command, str) and not command.strip()) or (not isinstance(command, str) and not command):
                raise ValueError("a command is empty: give a shell command (\"pytest -q\") or an argv list")
        return value

    @field_validator("time", "check_timeout", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> float | None:
        return None if value is None else duration(value)


class PlanModel(_Section):
    plan: PlanSection
    defaults: Defaults = Field(default_factory=Defaults)
    spinning: Spinning = Field(default_factory=Spinning)
    schedule: Schedule | None = None
    notify: Notify | None = None
    task: tuple[Task, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ids(self) -> PlanModel:
        seen: set[str] = set()
        for task in self.task:
            if task.id in seen:
                raise ValueError(f"task id {task.id!r} is used twice: each [[task]] needs its own id")
            seen.add(task.id)
        return self


@dataclass(frozen=True)
class TaskSpec:
    """One task with the plan's defaults applied."""

    id: str
    unit: str
    ask: str
    done_when: tuple[str | tuple[str, ...], ...]
    after: tuple[str, ...]
    max_attempts: int
    tokens: int | None
    time: float | None
    check_timeout: float

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "unit": self.unit, "ask": self.ask, "done_when": [c if isinstance(c, str) else list(c)
                for c in self.done_when], "after": list(self.after), "max_attempts": self.max_attempts,
                "tokens": self.tokens, "time": self.time, "check_timeout": self.check_timeout}


@dataclass(frozen=True)
class PlanSpec:
    """A validated plan file (see the module docstring); :meth:`as_dict` is what a run freezes."""

    name: str
    path: Path
    model: PlanModel
    source: str  # the file's text: a run keeps its own copy

    @property
    def tasks(self) -> tuple[TaskSpec, ...]:
        d = self.model.defaults
        return tuple(TaskSpec(t.id, t.unit, t.ask.strip(), t.done_when, t.after, t.max_attempts or d.max_attempts,
                              t.tokens or d.tokens, t.time or d.time, t.check_timeout or d.check_timeout)
                     for t in self.model.task)

    def task(self, task_id: str) -> TaskSpec:
        return next(t for t in self.tasks if t.id == task_id)

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.unit for t in self.model.task))

    @property
    def branch(self) -> str:
        return self.model.plan.branch or f"agentd/{self.name}"

    @property
    def notify(self) -> Notify | None:
        return self.model.notify

    @property
    def spinning(self) -> Spinning:
        return self.model.spinning

    def deadline(self, start: float) -> float:
        """The deadline as epoch seconds, for a run that starts at ``start``."""
        return deadline_at(self.model.plan.deadline, start, self.model.plan.timezone)

    def frozen(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "source": self.source}


def valid_branch(name: str) -> bool:
    bad = (" ", "..", "~", "^", ":", "?", "*", "[", "\\", "@{", "\x7f")
    return (bool(name) and not any(b in name for b in bad) and not name.startswith(("-", "/")) and
            not name.endswith(("/", ".lock", ".")) and "//" not in name and
            all(32 < ord(c) for c in name) and not any(p.startswith(".") for p in name.split("/")))


def deadline_at(text: str, start: float, zone: str | None) -> float:
    """Epoch seconds of ``text`` ("07:00", ISO, a duration) for a run starting at ``start``."""
    tz = _tz(zone)
    if m := _CLOCK_RE.match(text):
        hour, minute = int(m.group(1)), int(m.group(2))
        if hour > 23 or minute > 59:
            raise ValueError(f"{text!r} is not a time of day (00:00 to 23:59)")
        begin = dt.datetime.fromtimestamp(start, tz)
        at = begin.replace(hour=hour, minute=minute, second=0, microsecond=0)
        return (at if at > begin else at + dt.timedelta(days=1)).timestamp()
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        pass
    else:
        return (when if when.tzinfo else when.replace(tzinfo=tz)).timestamp()
    if re.fullmatch(r"\d{2}:\d{2}:\d{2}(\.\d+)?", text):  # a TOML local time (07:00:00)
        return deadline_at(text[:5], start, zone)
    try:
        return start + duration(text, "deadline")
    except ValueError:
        raise ValueError(f'{text!r}: expected a time of day ("07:00"), an ISO date and time '
                         f'("2026-12-04T07:00+01:00") or a duration after the start ("8h")') from None
