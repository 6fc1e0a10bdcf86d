"""Reading a plan file, explaining what is wrong with it, and the rules that need the project's units.

:func:`parse_plan` reads and validates one ``plans/NAME.toml`` into a
:class:`~supervisor.plan.spec.PlanSpec`; every error names the file, the line,
the task and the key (``plans/night.toml:14: [[task]] "auth" done_when: is
required; ...``).  :func:`check_plan` adds what needs the units, for ``agentd
check`` and ``agentd plan start`` alike:

* each task's unit exists, takes the wakeup (the task reaches the agent there)
  and lets agentd type (failures reach the agent as its next turn);
* the units of one plan each have a scope, and the scopes are disjoint:
  agentd tells one unit's work from another's by scope (docs/plan.md,
  "Isolation");
* no unit of the project may write the plan file or agentd's state
  directory, so the checks, the budgets and the ``[notify]`` command are the
  person's, never an agent's (a unit whose scope is the whole project, or
  covers ``plans/``, is refused).
"""

from __future__ import annotations

import re
import tomllib
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..config.check import cycle_from
from .spec import PLAN_NAME_RE, PlanModel, PlanSpec, Task

if TYPE_CHECKING:  # pragma: no cover
    from ..config.units import UnitSpec

MAX_PLAN_BYTES = 1 << 20


class PlanError(Exception):
    """A plan file that cannot be used; the message names the file, the line and what to do."""



def plans_dir(root: Path) -> Path:
    return Path(root) / "plans"


def plan_path(root: Path, name: str) -> Path:
    if not PLAN_NAME_RE.fullmatch(name):
        raise PlanError(f"plan name {name!r} is not valid: it must match {PLAN_NAME_RE.pattern} "
                        "(the file is plans/NAME.toml)")
    return plans_dir(root) / f"{name}.toml"


def plan_names(root: Path) -> list[str]:
    folder = plans_dir(root)
    return sorted(p.stem for p in folder.glob("*.toml") if p.is_file()) if folder.is_dir() else []


def _read(path: Path) -> str:
    try:
        if not path.is_file():
            raise PlanError(f"{path}: no such plan file (plans are plans/NAME.toml in the project)")
        data = path.read_bytes()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError(f"{path}: {len(data)} bytes, over the {MAX_PLAN_BYTES}-byte limit for a plan file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path}: not UTF-8 text: {exc}") from None


def parse_plan(path: Path, text: str | None = None, name: str | None = None) -> PlanSpec:
    """Parse and validate one plan file on its own (the units are :func:`check_plan`'s); raises PlanError."""
    path = Path(path)
    name = name or path.stem
    if not PLAN_NAME_RE.fullmatch(name):
        raise PlanError(f"{path}: plan name {name!r} is not valid: it must match {PLAN_NAME_RE.pattern} (rename the file)")
    text = _read(path) if text is None else text
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not valid TOML: {exc}") from None
    try:
        model = PlanModel(**data)
    except ValidationError as exc:
        raise PlanError(_explain(path, text, data, exc)) from None
    except TypeError as exc:
        raise PlanError(f"{path}: bad structure: {exc}") from None
    spec = PlanSpec(name, path, model, text)
    problem = _after_problem(spec)
    if problem:
        raise PlanError(f"{path}:{problem}")
    return spec


def _after_problem(spec: PlanSpec) -> str | None:
    """Unknown or circular ``after`` ids, as ``LINE: message``."""
    ids = [t.id for t in spec.model.task]
    for index, task in enumerate(spec.model.task):
        for dep in task.after:
            if dep not in ids or dep == task.id:
                why = "a task cannot wait for itself" if dep == task.id else f"no task has that id (tasks: {', '.join(ids)})"
                return f"{find_line(spec.source, 'task', index, 'after')}: [[task]] {task.id!r} after: {dep!r}: {why}"
    edges = {t.id: list(t.after) for t in spec.model.task}
    for start in ids:
        if cycle := cycle_from(edges, start):
            index = ids.index(cycle[0])
            return (f"{find_line(spec.source, 'task', index, 'after')}: [[task]] after forms a cycle: "
                    f"{' -> '.join(cycle)}; no task of it could ever start: remove one of these dependencies")
    return None


def find_line(text: str, section: str, index: int | None, key: str | None) -> int:
    """The line (1-based) of ``key`` in ``[section]`` (``[[section]]`` number ``index``), or of the header."""
    header = re.compile(rf"^\s*\[\[\s*{re.escape(section)}\s*\]\]" if index is not None else rf"^\s*\[\s*{re.escape(section)}\s*\]")
    lines = text.splitlines()
    seen, start = -1, None
    for i, line in enumerate(lines):
        if header.match(line):
            seen += 1
            if index is None or seen == index:
                start = i
                break
    if start is None:
        return 1
    if key is not None:
        key_re = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for j in range(start + 1, len(lines)):
            if re.match(r"^\s*\[", lines[j]):
                break
            if key_re.match(lines[j]):
                return j + 1
    return start + 1


def _explain(path: Path, text: str, data: dict[str, Any], exc: ValidationError) -> str:
    """One message per problem: ``file:line: [section] key: what is wrong; what to do``."""
    out = []
    for err in exc.errors():
        loc = [p for p in err["loc"]]
        msg = err["msg"].removeprefix("Value error, ")
        section = str(loc[0]) if loc else None
        if section == "task" and len(loc) >= 2 and isinstance(loc[1], int):
            index, key = loc[1], (str(loc[2]) if len(loc) > 2 else None)
            tasks = data.get("task") if isinstance(data.get("task"), list) else []
            ident = tasks[index].get("id") if index < len(tasks) and isinstance(tasks[index], dict) else None
            where = f"[[task]] {ident!r}" if isinstance(ident, str) else f"[[task]] number {index + 1}"
            line = find_line(text, "task", index, key)
            model: Any = Task
        else:
            key = str(loc[1]) if len(loc) > 1 else None
            where = f"[{section}]" if section else "(file)"
            line = find_line(text, section, None, key) if section else 1
            model = PlanModel.model_fields[section].annotation if section in PlanModel.model_fields else None
        if err["type"] == "extra_forbidden":
            if key is None or section not in PlanModel.model_fields:
                allowed = ", ".join(f"[{s}]" if s != "task" else "[[task]]" for s in PlanModel.model_fields)
                msg, key = f"unknown section; allowed: {allowed}", None
            else:
                fields = getattr(model, "model_fields", None) or getattr(_unwrap(model), "model_fields", {})
                msg = f"unknown key; allowed keys: {', '.join(fields)}"
        elif err["type"] == "missing":
            msg = "is required" + _HINTS.get((section, key), "")
        out.append(f"{path}:{line}: {where}{' ' + key if key else ''}: {msg}")
    return "\n".join(dict.fromkeys(out))


def _unwrap(annotation: Any) -> Any:
    for arg in getattr(annotation, "__args__", ()):
        if hasattr(arg, "model_fields"):
            return arg
    return annotation


_HINTS = {
    ("plan", "deadline"): ' (when the plan must stop: "07:00", an ISO date and time, or "8h" after the start)',
    ("plan", "tokens"): " (the whole plan's token budget, e.g. 3_000_000)",
    ("task", "done_when"): ' (the commands that must exit 0, e.g. ["pytest -q tests/api"])',
    ("task", "unit"): " (the unit whose agent does the task: units/NAME.toml)",
    ("task", "ask"): " (what the agent is asked to do)",
    ("task", "id"): " (a short name other tasks' after = [...] can use)",
    (None, None): "",
}



# ---------------------------------------------------------------------------------------- with the units

def _rel(path: Path, root: Path) -> str | None:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def _may_write(unit: UnitSpec, rel: str, root: Path) -> bool:
    from ..config.runnable import may_write

    return may_write(unit, rel, root)


def _paths_in(command: str | tuple[str, ...]) -> list[str]:
    """The project paths a check command *runs*: a program given as a path, the script an interpreter runs,
    and test paths (``tests/api``); not the data it reads (a check may well read the agent's work)."""
    import shlex

    try:
        words = shlex.split(command, posix=True) if isinstance(command, str) else list(command)
    except ValueError:
        words = str(command).split()
    found: list[str] = []
    expect_program = True
    interpreter = False
    for word in words:
        if word in ("&&", "||", ";", "|") or word.endswith(";"):
            expect_program, interpreter = True, False
            continue
        pathlike = not word.startswith(("-", "/", "~", "$")) and ("/" in word or "." in word.strip("."))
        name = word.rsplit("/", 1)[-1]
        if expect_program:
            expect_program = False
            interpreter = re.fullmatch(r"(python[\d.]*|sh|bash|node|ruby|perl|pytest|py\.test|make)", name) is not None
            if pathlike and "/" in word:
                found.append(word.removeprefix("./"))
            continue
        if word.startswith("-"):
            continue
        if (interpreter and pathlike) or (pathlike and "test" in word.lower()):
            found.append(word.removeprefix("./"))
            interpreter = False
    return found


def check_plan(spec: PlanSpec, units: dict[str, UnitSpec], refused: dict[str, str], root: Path,
               state_dir: Path) -> tuple[list[str], list[str]]:
    """The errors and warnings of ``spec`` against the project's units (``refused``: unit name -> its error)."""
    from ..scope.rules import overlaps

    errors: list[str] = []
    warnings: list[str] = []
    text, path = spec.source, spec.path

    def at(index: int, key: str) -> str:
        task = spec.model.task[index]
        return f"{path}:{find_line(text, 'task', index, key)}: [[task]] {task.id!r} {key}"

    used: dict[str, int] = {}
    for index, task in enumerate(spec.model.task):
        unit = units.get(task.unit)
        if unit is None:
            if task.unit in refused:
                errors.append(f"{at(index, 'unit')}: unit {task.unit!r} is refused ({refused[task.unit]}); fix its file")
            else:
                close = get_close_matches(task.unit, list(units), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                errors.append(f"{at(index, 'unit')}: no unit {task.unit!r} in units/{hint} "
                              f"(known: {', '.join(sorted(units)) or 'none'})")
            continue
        used.setdefault(task.unit, index)
        if not unit.agent.types_own_text:
            errors.append(f"{at(index, 'unit')}: unit {task.unit!r} talks to a shell ([agent] talks_to = \"shell\"): agentd "
                          "types nothing of its own into it, so a failed check could never reach it; use an agent unit")
        if not unit.wakeup.on_start:
            errors.append(f"{at(index, 'unit')}: unit {task.unit!r} has [wakeup] on_start = false: the task reaches the "
                          "agent in its wakeup; remove that line")
        elif unit.wakeup.command:
            warnings.append(f"{at(index, 'unit')}: unit {task.unit!r} has its own [wakeup] command: the agent sees the "
                            f"task only if that command prints .agent/tasks/{unit.module}.md")
        for command in task.done_when:
            for token in _paths_in(command):
                if unit.scope.paths and (_may_write(unit, token, root) or _may_write(unit, token.rstrip("/") + "/x", root)):
                    warnings.append(f"{at(index, 'done_when')}: the check runs {token!r}, which unit {task.unit!r}'s "
                                    "agent may change: keep what a check runs outside the unit's scope (a task's commit "
                                    "takes only its unit's scope, so files outside it come from the plan branch)")
    plan_units = [units[n] for n in used]
    if len(plan_units) > 1:
        for unit in plan_units:
            if not [g for g in unit.scope.paths if g.strip()]:
                errors.append(f"{at(used[unit.name], 'unit')}: unit {unit.name!r} has no [scope] paths: with several units "
                              "in one plan, agentd tells their work apart by scope; give it the paths its module owns")
        for i, a in enumerate(plan_units):
            for b in plan_units[i + 1:]:
                if a.scope.paths and b.scope.paths and (example := overlaps(a.scope, b.scope, [])) is not None:
                    errors.append(f"{at(used[b.name], 'unit')}: units {a.name!r} and {b.name!r} may both write {example!r}: "
                                  "a task's commit is its unit's scope, so the scopes of one plan must be disjoint")
    guarded = [(p, what) for p, what in ((_rel(path, root), "the plan file"), (_rel(state_dir, root), "agentd's state"),
                                         ("units", "the unit files")) if p is not None]
    for name, unit in sorted(units.items()):
        for rel, what in guarded:
            probe = {"the plan file": rel, "the unit files": f"{rel}/{name}.toml"}.get(what,
                                                                                     f"{rel}/plans/{spec.name}/state.json")
            if not _may_write(unit, probe, root):
                continue
            problem = (f"{path}: unit {name!r} may write {what} ({probe}): an agent could change this plan's checks, "
                       "budgets or [notify] command, or its own unit; narrow its [scope] paths / writable so that "
                       "plans/, units/ and agentd's state directory are outside them")
            if name in used or unit.unit.enabled:
                errors.append(problem)
            else:  # a disabled unit runs only when someone starts it
                warnings.append(f"{problem} (it is disabled: do not start it during the run)")
        if unit.scope.fence == "off":
            warnings.append(f"{path}: unit {name!r} has [scope] fence = \"off\": its agent's writes are watched, not "
                            "prevented; agentd reads this plan only at `agentd plan start`, so check the file before then")
    if spec.notify is not None:
        from ..config.runnable import command_problem

        problem = command_problem("[notify] command", spec.notify.command, Path(root), units, root)
        if problem:
            errors.append(f"{path}:{_line_of(text, 'command')}: {problem}")
    return errors, warnings


def _line_of(text: str, key: str) -> int:
    """The line of the first ``key =`` in ``text`` (1 when there is none)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(f"{key} ") or line.strip().startswith(f"{key}="):
            return number
    return 1


def load_checked(root: Path, name: str, units: dict[str, UnitSpec], refused: dict[str, str],
                 state_dir: Path) -> tuple[PlanSpec, list[str]]:
    """The plan ``name`` parsed and checked against the units; raises PlanError listing every error."""
    spec = parse_plan(plan_path(root, name))
    errors, warnings = check_plan(spec, units, refused, root, state_dir)
    if errors:
        raise PlanError("\n".join(errors))
    return spec, warnings
