"""Unit files: ``units/NAME.toml``, one per module-scoped agent.

A unit is validated into a frozen :class:`UnitSpec`.  Unknown keys are
rejected, so a typo never passes silently, and every error names the file, the
key and what is allowed.  :func:`load_units` never raises for one bad file: it
returns the good units and one :class:`UnitError` per bad file, so a malformed
unit never takes the others down.

Files named ``*.example.toml`` are examples and are skipped.

Sections::

    [unit]        description, enabled, after, requires
    [agent]       kind (config/kinds.py: generic|codex|claude), command (argv list), workdir, env, rows, cols,
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
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError, model_validator

from .agent_sections import ClaudeSection, CodexSection, FreezeSection
from .resources import ResourcesSection
from .unit_sections import (
    AgentSection,
    CheckpointSection,
    ContextSection,
    RestartSection,
    ScheduleSection,
    ScopeSection,
    UnitSection,
    WakeupSection,
    BaseSection,
    module_name,
)
from .unitfile import (  # noqa: F401 - re-exported
    EXAMPLE_SUFFIX,
    NAME_RE,
    UnitFileError,
    read_unit_text,
    unit_files,
    unit_path,
    valid_name,
)


class UnitSpec(BaseSection):
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
