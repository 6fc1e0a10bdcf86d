"""The units a project may run: every unit file validated, then the rules between units.

:func:`load_project_units` is what both the daemon (at start and reload) and
``agentd check`` call, so ``check`` refuses exactly what ``start`` refuses:

* each file on its own (:func:`supervisor.config.units.load_units`);
* two enabled units whose writable scopes overlap are both refused, unless
  the overlap is listed as ``shared`` in both.
"""

from __future__ import annotations

from pathlib import Path

from .units import UnitError, UnitSpec, load_units

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


def load_project_units(units_dir: Path, root: Path) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """The units the daemon would run, and every refusal with its file and reason."""
    specs, errors = load_units(units_dir, root)
    specs, overlap_errors = refuse_overlaps(specs, root)
    return specs, errors + overlap_errors
