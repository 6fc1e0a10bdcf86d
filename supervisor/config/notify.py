"""The ``[notify]`` section: a command agentd runs with a JSON event on its stdin (the person's, never an agent's).

In ``etc/agentd.toml`` (every plan and every unit) or in a plan file (that
plan's events)::

    [notify]
    command = ["sh", "-c", "curl -s -H 'Title: agentd' --data-binary @- https://ntfy.sh/my-night"]
    events = ["task_parked", "task_blocked", "unit_failed", "unit_frozen", "plan_ended"]   # default: all

Like systemd's ``OnFailure=`` or a git hook: agentd speaks no chat protocol, the
command does (docs/plan.md shows ntfy and a Slack webhook).  It runs outside
any fence, with a timeout, one event per run; agents cannot set it (agentd
reads it from the settings at daemon start and from a plan file at ``agentd
plan start``, and refuses a plan whose file an agent may write).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Every event there is (also what /metrics counts and the dashboard's Plan page streams).
EVENTS = ("task_done", "task_parked", "task_blocked", "unit_failed", "unit_frozen", "plan_ended")


class NotifySection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] = Field(min_length=1)
    events: tuple[str, ...] = EVENTS
    timeout: float = Field(default=30.0, gt=0, le=600, description="seconds before the command is killed")

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError('must be an argv list such as ["notify-send", "agentd"], not a shell string')
        return value

    @field_validator("command")
    @classmethod
    def _program(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0].strip():
            raise ValueError("the program (first element) is empty")
        return value

    @field_validator("events")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [e for e in value if e not in EVENTS]
        if unknown:
            raise ValueError(f"unknown event(s) {', '.join(map(repr, unknown))}; known: {', '.join(EVENTS)}")
        return value
