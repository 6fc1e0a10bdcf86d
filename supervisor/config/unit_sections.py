"""The sections of a unit file that every agent kind has: ``[unit]``, ``[agent]``, ``[scope]``, ``[restart]``,
``[wakeup]``, ``[context]``, ``[checkpoint]``, ``[schedule]``.

Each is a frozen pydantic model that rejects unknown keys; :class:`~.units.UnitSpec`
holds them (with ``[resources]``, :mod:`.resources`, and the kinds' own sections,
:mod:`.agent_sections`).  What each key means: :mod:`.units`' docstring and the
README's unit file reference.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .kinds import KINDS


def module_name(value: str) -> str:
    """``value`` if it can name a module's memory (the memory store's one rule), else ValueError."""
    from ..memory.store import GLOBAL, StoreError, validate_module

    if value == GLOBAL:
        raise ValueError(f"module name {value!r} is reserved for the global log")
    try:
        validate_module(value)
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    return value


class BaseSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UnitSection(BaseSection):
    description: str = ""
    enabled: bool = True
    after: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


class AgentSection(BaseSection):
    kind: str = Field(default="generic", description="the agent kind, one of config/kinds.py's KINDS")
    command: tuple[str, ...] = Field(min_length=1)
    workdir: str = "."
    env: dict[str, str] = Field(default_factory=dict)
    rows: int = Field(default=40, ge=2, le=1000)
    cols: int = Field(default=120, ge=10, le=1000)
    # How the adapter talks to the agent (the generic adapter reads all of these;
    # the codex and claude adapters have their own defaults).
    prompt: str | None = Field(default=None, description="regex for the idle prompt on the screen's cursor line")
    quiet: float = Field(default=0.0, ge=0, description="seconds of silence that also end a turn (0: never)")
    submit_pause: float = Field(default=0.0, ge=0, le=10, description="pause between text and Enter")
    paste: Literal["bracketed", "lines"] = "bracketed"
    quit_command: str | None = None
    wakeup_via: Literal["first-message", "file", "none"] | None = Field(
        default=None, description='how the wakeup reaches the agent (default: "first-message"; "file" for a shell)')
    talks_to: Literal["agent", "shell"] = Field(
        default="agent", description='"shell" for a shell or REPL: agentd types nothing of its own into it')
    index: Literal["summary", "full"] = Field(default="summary", description='what `recall --events` keeps of the '
                                              'output: "summary" (what the agent did and said) or "full" (every byte)')

    @property
    def wakeup_route(self) -> str:
        """Where the wakeup goes: the unit's ``wakeup_via``, else a file for a shell, else the first message."""
        return self.wakeup_via or ("file" if self.talks_to == "shell" else "first-message")

    @property
    def types_own_text(self) -> bool:
        """Whether agentd may type text of its own (prompts, warnings, broadcasts) into this agent."""
        return self.talks_to == "agent"

    @field_validator("prompt")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _argv_only(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                "must be an argv list such as [\"python\", \"-m\", \"tool\"], not a shell string"
            )
        return value

    @field_validator("command")
    @classmethod
    def _nonempty_program(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0].strip():
            raise ValueError("the program (first element) is empty")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"environment variable name {key!r} is not valid")
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(f"unknown agent kind {kind!r}: use one of {', '.join(map(repr, KINDS))}")
        return kind


class ScopeSection(BaseSection):
    module: str | None = None
    paths: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()
    on_violation: Literal["warn", "revert", "stop"] = "warn"
    fence: Literal["auto", "on", "off"] = "auto"  # the kernel fence (supervisor.scope.fencing)
    writable: tuple[str, ...] = ()  # more paths the fenced agent may write (project-relative, absolute or ~)

    @field_validator("module")
    @classmethod
    def _module_name(cls, value: str | None) -> str | None:
        return None if value is None else module_name(value)

    @field_validator("paths", "forbid", "shared")
    @classmethod
    def _relative_globs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for glob in value:
            if glob.startswith("/") or ".." in Path(glob).parts:
                raise ValueError(f"glob {glob!r} must be relative to the project and stay inside it")
        return value


class RestartSection(BaseSection):
    policy: Literal["no", "on-failure", "always"] = "on-failure"
    initial_delay: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=300.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    reset_after: float = Field(default=600.0, ge=0)
    burst: int = Field(default=5, ge=1)
    interval: float = Field(default=300.0, gt=0)
    stop_timeout: float | None = Field(default=None, gt=0)


class WakeupSection(BaseSection):
    command: tuple[str, ...] | None = None
    budget: int = Field(default=2500, ge=200, le=100_000)
    on_start: bool = Field(default=True, description="every fresh session starts from the wakeup")

    @field_validator("command", mode="before")
    @classmethod
    def _argv_only(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be an argv list such as [\"bash\", \"etc/wakeup.sh\"], not a shell string")
        return value


class ContextSection(BaseSection):
    """When a session needs a checkpoint: context thresholds and session age."""

    window: int = Field(default=200_000, gt=0)
    checkpoint_at: float = Field(default=0.70, gt=0, lt=1)
    hard_limit: float = Field(default=0.90, gt=0, le=1)
    max_session_age: float | None = Field(default=None, gt=0)
    restart_every: float | None = Field(default=None, gt=0)


class CheckpointSection(BaseSection):
    """How a checkpoint runs (see supervisor.continuity.policy)."""

    enabled: bool = True
    prompt: str | None = None
    deadline: float = Field(default=300.0, gt=0, description="seconds for the agent's turn after the prompt")
    grace: float = Field(default=15.0, ge=0, description="seconds after that turn for the files to change")
    on_stop: bool = Field(default=True, description="checkpoint before a graceful stop or restart")
    ready_timeout: float = Field(default=60.0, gt=0, description="seconds for a fresh agent to become idle")


class ScheduleSection(BaseSection):
    """Unattended runs: cron start/stop, limits, stalls, usage limits (see supervisor.schedule)."""

    start: str | None = Field(default=None, description="cron: 5 fields, or 6 with seconds first")
    stop: str | None = Field(default=None, description="cron; a scheduled stop goes through the checkpoint")
    timezone: str = "UTC"
    grace: float = Field(default=300.0, ge=0, description="a run missed by less than this fires once")
    max_runtime: float | None = Field(default=None, gt=0, description="seconds; then a checkpointed stop")
    restart_every: float | None = Field(default=None, gt=0, description="seconds; a fresh session through the checkpoint")
    stall_after: float | None = Field(default=None, gt=0, description="seconds without output or turn end")
    usage_limit_wait: float = Field(default=900.0, gt=0, description="seconds to wait when no reset time is given")

    @field_validator("start", "stop")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is not None:
            from ..schedule import parse_cron

            parse_cron(value, "UTC")  # raises ValueError with the reason
        return value

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Europe/Berlin' or 'UTC')") from None
        return value
