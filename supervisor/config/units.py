"""Unit files: ``units/NAME.toml``, one per module-scoped agent.

A unit is validated into a frozen :class:`UnitSpec`.  Unknown keys are
rejected, so a typo never passes silently, and every error names the file, the
key and what is allowed.  :func:`load_units` never raises for one bad file: it
returns the good units and one :class:`UnitError` per bad file, so a malformed
unit never takes the others down.

Files named ``*.example.toml`` are examples and are skipped.

Sections::

    [unit]        description, enabled, after, requires
    [agent]       kind (generic|codex|claude), command (argv list), workdir, env, rows, cols,
                  index (summary|full: what the event index keeps of the output), prompt, ...
    [scope]       module, paths (globs), forbid (globs), shared (globs), on_violation,
                  fence (auto|on|off), writable (paths)
    [resources]   memory_max, cpu_weight (cgroup limits, where available)
    [restart]     policy (no|on-failure|always), initial_delay, max_delay, multiplier,
                  reset_after, burst, interval, stop_timeout
    [wakeup]      command (argv list, optional), budget (tokens), on_start
    [context]     window, checkpoint_at, hard_limit, max_session_age, restart_every
    [checkpoint]  enabled, prompt, deadline, grace, on_stop, ready_timeout
    [schedule]    start, stop (cron), timezone, grace, max_runtime, restart_every, stall_after,
                  usage_limit_wait
    [freeze]      after, idle_after_compaction, stuck_above_hard_limit, checkpoint_overdue,
                  approval_wait, blocked_screen (what to do when a session freezes)
    [codex]       the codex adapter (docs/codex.md)
    [claude]      the claude adapter (docs/claude.md)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .agent_sections import ClaudeSection, CodexSection, FreezeSection
from .resources import ResourcesSection
from .unitfile import (  # noqa: F401 - re-exported
    EXAMPLE_SUFFIX,
    NAME_RE,
    UnitFileError,
    read_unit_text,
    unit_files,
    unit_path,
    valid_name,
)




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


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UnitSection(_Section):
    description: str = ""
    enabled: bool = True
    after: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


class AgentSection(_Section):
    kind: Literal["generic", "codex", "claude"] = "generic"
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


class ScopeSection(_Section):
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


class RestartSection(_Section):
    policy: Literal["no", "on-failure", "always"] = "on-failure"
    initial_delay: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=300.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    reset_after: float = Field(default=600.0, ge=0)
    burst: int = Field(default=5, ge=1)
    interval: float = Field(default=300.0, gt=0)
    stop_timeout: float | None = Field(default=None, gt=0)


class WakeupSection(_Section):
    command: tuple[str, ...] | None = None
    budget: int = Field(default=2500, ge=200, le=100_000)
    on_start: bool = Field(default=True, description="every fresh session starts from the wakeup")

    @field_validator("command", mode="before")
    @classmethod
    def _argv_only(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("must be an argv list such as [\"bash\", \"etc/wakeup.sh\"], not a shell string")
        return value


class ContextSection(_Section):
    """When a session needs a checkpoint: context thresholds and session age."""

    window: int = Field(default=200_000, gt=0)
    checkpoint_at: float = Field(default=0.70, gt=0, lt=1)
    hard_limit: float = Field(default=0.90, gt=0, le=1)
    max_session_age: float | None = Field(default=None, gt=0)
    restart_every: float | None = Field(default=None, gt=0)


class CheckpointSection(_Section):
    """How a checkpoint runs (see supervisor.continuity.policy)."""

    enabled: bool = True
    prompt: str | None = None
    deadline: float = Field(default=300.0, gt=0, description="seconds for the agent's turn after the prompt")
    grace: float = Field(default=15.0, ge=0, description="seconds after that turn for the files to change")
    on_stop: bool = Field(default=True, description="checkpoint before a graceful stop or restart")
    ready_timeout: float = Field(default=60.0, gt=0, description="seconds for a fresh agent to become idle")


class ScheduleSection(_Section):
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


class UnitSpec(_Section):
    """One validated unit file."""

    name: str
    path: Path
    unit: UnitSection = Field(default_factory=UnitSection)
    agent: AgentSection
    scope: ScopeSection = Field(default_factory=ScopeSection)
    restart: RestartSection = Field(default_factory=RestartSection)
    wakeup: WakeupSection = Field(default_factory=WakeupSection)
    context: ContextSection = Field(default_factory=ContextSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    schedule: ScheduleSection = Field(default_factory=ScheduleSection)
    codex: CodexSection = Field(default_factory=CodexSection)
    resources: ResourcesSection = Field(default_factory=ResourcesSection)
    claude: ClaudeSection = Field(default_factory=ClaudeSection)
    freeze: FreezeSection = Field(default_factory=FreezeSection)

    @model_validator(mode="after")
    def _module_defaults_to_name(self) -> UnitSpec:
        if self.scope.module is None:
            try:
                module_name(self.name)
            except ValueError as exc:
                raise ValueError(f"[scope] module: the unit's name is used as its module, and {exc}; "
                                 "set [scope] module explicitly") from None
            object.__setattr__(self, "scope", self.scope.model_copy(update={"module": self.name}))
        return self

    @property
    def module(self) -> str:
        return self.scope.module or self.name

    def fingerprint(self) -> str:
        """A digest of everything that, when changed, needs the agent restarted."""
        data = self.model_dump_json(exclude={"path": True, "unit": {"description"}, "agent": {"index"}})
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    def workdir_path(self, project_root: Path) -> Path:
        path = Path(self.agent.workdir).expanduser()
        return path if path.is_absolute() else (project_root / path)


@dataclass(frozen=True)
class UnitError:
    """A unit file that could not be loaded, with a message for the user."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class UnitLoadError(Exception):
    def __init__(self, error: UnitError) -> None:
        super().__init__(str(error))
        self.error = error


def _format_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        if loc and loc[0] in UnitSpec.model_fields and len(loc) > 1:
            key = f"[{loc[0]}] {'.'.join(loc[1:])}"
        elif loc:
            key = f"[{loc[0]}]"
        else:
            key = "(file)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            from difflib import get_close_matches

            section = loc[0] if len(loc) > 1 else None
            names = (list(getattr(UnitSpec.model_fields[section].annotation, "model_fields", {}))
                     if section in UnitSpec.model_fields else [f for f in UnitSpec.model_fields if f not in ("name", "path")])
            close = get_close_matches(loc[-1] if loc else "", names, n=1)
            mean = f"; did you mean `{close[0]}`?" if close else ""  # a typo: `promt` for `prompt`
            if section in UnitSpec.model_fields:
                msg = f"unknown key{mean}; allowed keys in [{section}]: {', '.join(names)}"
            else:
                msg = f"unknown section{mean}; allowed sections: {', '.join(names)}"
        elif err["type"] == "missing":
            msg = "is required"
        got = err.get("input")
        if err["type"] in ("literal_error", "enum") and got is not None:
            msg += f" (got {got!r})"
        parts.append(f"{key}: {msg}")
    return "; ".join(parts)


def command_problem(spec: UnitSpec, project_root: Path, path_env: str | None = None) -> str | None:
    """Why the unit's program cannot be run, or None when it can."""
    program = spec.agent.command[0]
    workdir = spec.workdir_path(project_root)
    if not workdir.is_dir():
        return f"[agent] workdir: directory {workdir} does not exist"
    search = agent_path(spec.agent.env.get("PATH", path_env if path_env is not None else os.environ.get("PATH", "")))
    if "/" in program:
        candidate = Path(program) if Path(program).is_absolute() else workdir / program
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            return f"[agent] command: program {program!r} is not an executable file"
        return None
    if shutil.which(program, path=search) is None:
        return f"[agent] command: program {program!r} not found on PATH (give a full path or fix PATH in [agent] env)"
    return None


def agent_path(path_env: str) -> str:
    """PATH for agents: agentd's own bin directory first, so agents can call ``agentd``."""
    bindir = str(Path(sys.executable).parent)
    parts = [p for p in path_env.split(os.pathsep) if p and p != bindir]
    return os.pathsep.join([bindir, *parts])


def parse_unit(path: Path, text: str | None = None, project_root: Path | None = None) -> UnitSpec:
    """Parse and validate one unit file; raises :class:`UnitLoadError`."""
    name = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    if not valid_name(name):
        raise UnitLoadError(
            UnitError(path, f"unit name {name!r} is not valid: it must match {NAME_RE.pattern} (rename the file)")
        )
    try:
        if text is None:
            text = read_unit_text(path)
        data = tomllib.loads(text)
    except UnitFileError as exc:
        raise UnitLoadError(UnitError(path, str(exc))) from None
    except UnicodeDecodeError as exc:
        raise UnitLoadError(UnitError(path, f"not UTF-8 text: {exc}")) from None
    except tomllib.TOMLDecodeError as exc:
        raise UnitLoadError(UnitError(path, f"not valid TOML: {exc}")) from None
    except OSError as exc:
        raise UnitLoadError(UnitError(path, f"cannot read: {exc.strerror}")) from None
    for reserved in ("name", "path"):
        if reserved in data:
            raise UnitLoadError(UnitError(path, f"[{reserved}]: unknown section (the name comes from the file name)"))
    try:
        spec = UnitSpec(name=name, path=path, **data)
    except ValidationError as exc:
        raise UnitLoadError(UnitError(path, _format_validation_error(exc))) from None
    except TypeError as exc:  # e.g. a section that is not a table
        raise UnitLoadError(UnitError(path, f"bad structure: {exc}")) from None
    if project_root is not None:
        problem = command_problem(spec, project_root)
        if problem:
            raise UnitLoadError(UnitError(path, problem))
    return spec


def load_unit(units_dir: Path, name: str, project_root: Path | None = None) -> UnitSpec:
    """Load one unit by name; raises :class:`UnitLoadError` or ValueError for a bad name."""
    path = unit_path(units_dir, name)
    if not os.path.lexists(path):
        raise UnitLoadError(UnitError(path, "no such unit file"))
    return parse_unit(path, project_root=project_root)


def load_units(units_dir: Path, project_root: Path | None = None) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """Load every ``*.toml`` in ``units_dir`` (examples skipped), sorted by name."""
    specs: dict[str, UnitSpec] = {}
    errors: list[UnitError] = []
    for path in unit_files(units_dir):
        try:
            spec = parse_unit(path, project_root=project_root)
        except UnitLoadError as exc:
            errors.append(exc.error)
            continue
        specs[spec.name] = spec
    return specs, errors


def start_order(specs: dict[str, UnitSpec]) -> list[str]:
    """Names in an order that honours ``after``/``requires`` (cycles broken by name)."""
    order: list[str] = []
    seen: set[str] = set()
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in specs or name in visiting:
            return
        visiting.add(name)
        spec = specs[name]
        for dep in sorted(set(spec.unit.after) | set(spec.unit.requires)):
            visit(dep)
        visiting.discard(name)
        seen.add(name)
        order.append(name)

    for name in sorted(specs):
        visit(name)
    return order
