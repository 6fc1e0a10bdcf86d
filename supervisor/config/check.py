"""The units a project may run: every unit file validated, then the rules between units.

:func:`load_project_units` is what both the daemon (at start and reload) and
``agentd check`` call, so ``check`` refuses exactly what ``start`` refuses:

* each file on its own (:func:`supervisor.config.units.load_units`);
* units whose ``requires``/``after`` form a cycle are refused, naming the cycle;
* settings that each pass on their own but not together (:func:`unit_problems`):
  ``checkpoint_at`` above ``hard_limit``, a ``workdir`` outside the project;
* two enabled units whose writable scopes overlap are both refused, unless
  the overlap is listed as ``shared`` in both;
* a unit whose ``[wakeup] command`` runs a file an agent may write, or whose
  ``[agent] command`` runs one another unit's agent may write
  (:mod:`.runnable`);
* a unit that ``requires`` a unit that does not exist, or that is refused, is
  refused too (it could never start: ``reload`` left it inactive while
  ``check`` said ok), except under ``run-unit`` where the service manager
  runs the requirement.

:func:`drift` says when a loaded unit is no longer what its file says (the
file changed, or no longer loads), so ``start`` and ``restart`` never run the
last good definition in silence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .units import UnitError, UnitLoadError, UnitSpec, load_units, parse_unit

#: Project files looked at for an example of an overlap.
OVERLAP_FILES = 20000


def refuse_overlaps(specs: dict[str, UnitSpec], root: Path) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """Two enabled units whose writable scopes overlap are both refused (unless shared)."""
    from ..memory.gitfiles import list_files
    from ..scope.rules import overlaps

    enabled = [s for s in specs.values() if s.unit.enabled and s.scope.paths]
    if len(enabled) < 2:
        return specs, []
    try:
        files = list_files(root, ["**"], limit=OVERLAP_FILES)
    except Exception:  # noqa: BLE001 - not a git work tree, or git missing: synthetic examples only
        files = []
    errors: list[UnitError] = []
    refused: set[str] = set()
    for i, a in enumerate(enabled):
        for b in enabled[i + 1:]:
            example = overlaps(a.scope, b.scope, files)
            if example is None:
                continue
            for spec, other in ((a, b), (b, a)):
                refused.add(spec.name)
                errors.append(UnitError(spec.path, (
                    f"[scope] paths overlap with unit {other.name!r} ({other.path.name}): both may write "
                    f"{example!r}; make the scopes disjoint, or list the overlap in [scope] shared of both units")))
    return {n: s for n, s in specs.items() if n not in refused}, errors


def cycle_from(edges: Mapping[str, Sequence[str]], start: str) -> list[str] | None:
    """The first cycle a depth-first walk of ``edges`` from ``start`` finds (its first node repeated at its
    end), or None.  One walk for the units' requires/after and the plans' task order."""
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        path.append(node)
        for nxt in edges.get(node, ()):
            if (found := walk(nxt)) is not None:
                return found
        path.pop()
        return None

    return walk(start)


def refuse_cycles(specs: dict[str, UnitSpec]) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """Units in a cycle of ``requires``/``after`` are refused, each naming the whole cycle."""
    edges = {n: sorted((set(s.unit.requires) | set(s.unit.after)) & set(specs)) for n, s in specs.items()}
    in_cycle: dict[str, list[str]] = {}
    for start in sorted(specs):
        cycle = cycle_from(edges, start)
        if cycle:
            for name in cycle[:-1]:
                in_cycle.setdefault(name, cycle)
    errors = [UnitError(specs[n].path, "[unit] requires/after form a cycle: " + " -> ".join(c)
                        + "; a unit cannot start before itself: remove one of these dependencies")
              for n, c in sorted(in_cycle.items())]
    return {n: s for n, s in specs.items() if n not in in_cycle}, errors


def load_project_units(units_dir: Path, root: Path, only: set[str] | None = None, *, commands: bool = True
                       ) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """The units the daemon would run, and every refusal with its file and reason.

    ``only``: just these units (``agentd run-unit``); other unit files' errors are not reported.
    ``commands=False``: the agents' programs are not looked up on this machine's PATH (they run
    elsewhere: ``agentd export k8s``).
    """
    specs, errors = load_units(units_dir, root if commands else None)
    if only is not None:
        errors = [e for e in errors if e.path.name.removesuffix(".toml") in only]
        specs = {n: s for n, s in specs.items() if n in only}
        missing = sorted(only - set(specs) - {e.path.name.removesuffix(".toml") for e in errors})
        errors += [UnitError(units_dir / f"{n}.toml", "no such unit file") for n in missing]
    specs, inconsistent = refuse_inconsistent(specs, root)
    if commands:  # a command whose script an agent may write runs the agent's code (config/runnable.py)
        from .runnable import refuse_agent_writable

        specs, agent_writable = refuse_agent_writable(specs, root)
        inconsistent += agent_writable
    specs, cycle_errors = refuse_cycles(specs)
    specs, overlap_errors = refuse_overlaps(specs, root)
    errors += inconsistent + cycle_errors + overlap_errors
    if only is None:
        specs, missing_errors = refuse_missing_requirements(specs, {e.path.name.removesuffix(".toml") for e in errors})
        errors += missing_errors
    return specs, errors


def refuse_missing_requirements(specs: dict[str, UnitSpec], refused: set[str]
                                ) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """Units that ``requires`` a unit that does not exist or is refused (``refused``: their names), refused
    in turn until none is left (a chain of requirements falls together)."""
    from difflib import get_close_matches

    specs, refused = dict(specs), set(refused)
    errors: list[UnitError] = []
    while True:
        found = {}
        for name, spec in sorted(specs.items()):
            for req in spec.unit.requires:
                if req in specs:
                    continue
                if req in refused:
                    found[name] = (f"[unit] requires {req!r}, which is refused (see its error): {name!r} could never "
                                   f"start; fix units/{req}.toml, or remove {req!r} from requires")
                else:
                    close = get_close_matches(req, list(specs), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    found[name] = (f"[unit] requires {req!r}, which does not exist (no units/{req}.toml){hint}: "
                                   f"{name!r} could never start; add that unit, or remove it from requires")
                break
        if not found:
            return specs, errors
        for name, message in found.items():
            errors.append(UnitError(specs.pop(name).path, message))
            refused.add(name)


def unit_problems(spec: UnitSpec, root: Path) -> list[str]:
    """Why a unit whose keys are each valid cannot run as written (empty when it can).

    * ``checkpoint_at`` above ``hard_limit``: the hard limit would interrupt
      the running turn before the gentle threshold is ever reached, so every
      checkpoint would be a forced one.
    * a ``workdir`` outside the project: the scope guard, the Landlock fence
      and the memory store (``.agent/``) all cover the project only, so such an
      agent would work unwatched, be refused its own writes, or lose its notes.
    """
    problems = []
    ctx = spec.context
    if ctx.checkpoint_at > ctx.hard_limit:
        problems.append(
            f"[context] checkpoint_at = {ctx.checkpoint_at:g} is above hard_limit = {ctx.hard_limit:g}: the hard limit "
            "would interrupt the agent's turn before the threshold checkpoint is ever due; set checkpoint_at below "
            "hard_limit (defaults 0.70 and 0.90)")
    workdir = spec.workdir_path(root).resolve()
    project = root.resolve()
    if workdir != project and project not in workdir.parents:
        problems.append(
            f"[agent] workdir = {spec.agent.workdir!r} is {workdir}, outside the project {project}: the scope guard, "
            "the fence and the memory store (.agent/) cover the project only; use a directory inside it (relative "
            "to the project root), or put the units/ directory in the project the agent works on")
    return problems


def refuse_inconsistent(specs: dict[str, UnitSpec], root: Path) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """Units with :func:`unit_problems` are refused, one error per unit naming every problem."""
    errors = [UnitError(spec.path, "; ".join(problems)) for spec in specs.values()
              if (problems := unit_problems(spec, root))]
    refused = {e.path for e in errors}
    return {n: s for n, s in specs.items() if s.path not in refused}, errors


def drift(spec: UnitSpec, root: Path) -> str | None:
    """Why the loaded ``spec`` is not what its unit file says now, with what to do (None: it still is)."""
    try:
        now = parse_unit(spec.path, project_root=root)
    except UnitLoadError as exc:
        return (f"{spec.path.name} does not load now ({exc.error.message}); {spec.name!r} runs its last good "
                "definition, loaded before: fix the file, then `agentd reload`")
    if now.fingerprint() != spec.fingerprint():
        return (f"{spec.path.name} changed since it was loaded; {spec.name!r} runs the loaded definition: "
                "`agentd reload` to use the new one")
    return None


def drifted(specs: list[UnitSpec], root: Path) -> list[str]:
    """``UNIT: why`` for each of ``specs`` that :func:`drift` finds (blocking: it reads the files)."""
    return [f"{spec.name}: {why}" for spec in specs if (why := drift(spec, root))]
