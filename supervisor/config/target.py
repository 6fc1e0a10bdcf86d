"""Which module a memory command writes to: the one rule for the CLI and the MCP tools.

Kept apart from :mod:`.units` (pydantic models) so that ``agentd note`` and
``agentd decide`` from a person load no unit file and no pydantic at all; an
agent's own command (``$AGENTD_UNIT``) loads its unit for the module and scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MemoryTarget:
    """Where a memory command (CLI or MCP tool) acts: module (None = global), scope globs, the unit they came from."""

    module: str | None
    scope: tuple[str, ...] = ()
    unit: str | None = None


def memory_target(units_dir: Path, environ: Mapping[str, str], module: str | None = None,
                  global_: bool = False, scope: Sequence[str] = ()) -> MemoryTarget:
    """The one rule for which module a memory command writes to.

    ``--module M`` (``global`` = the global log) or ``--global``, else
    ``$AGENTD_MODULE`` (with the unit's scope from ``$AGENTD_SCOPE`` when the daemon
    set both for the agent's session, or from its unit file), else the module of the unit named by ``$AGENTD_UNIT``
    (and its scope), else the global log.  Raises :class:`UnitLoadError` when
    ``$AGENTD_UNIT`` names a unit whose file cannot be loaded.
    """
    if global_:
        return MemoryTarget(None, tuple(scope))
    if module:
        return MemoryTarget(None if module == "global" else module, tuple(scope))
    env_module = environ.get("AGENTD_MODULE", "").strip()
    unit = environ.get("AGENTD_UNIT", "").strip()
    own = _own_scope(environ) if unit else None
    if own is not None and own[0] == env_module:  # the agent's own shell: its session's module and scope
        module = None if env_module == "global" else env_module
        return MemoryTarget(module, tuple(scope) or own[1], unit)
    spec = None
    if unit:
        from .units import UnitLoadError, load_unit  # pydantic: only for an agent's own command

        try:
            spec = load_unit(units_dir, unit)
        except (UnitLoadError, ValueError):
            if not env_module:
                raise
    if env_module:
        module = None if env_module == "global" else env_module
        # the unit's own scope when the module is the unit's (an agent's decide hashes its scope, not the project)
        own = spec is not None and spec.module == module
        return MemoryTarget(module, tuple(scope) or (spec.scope.paths if own and spec else ()), unit if own else None)
    if spec is not None:
        return MemoryTarget(spec.module, tuple(scope) or spec.scope.paths, unit)
    return MemoryTarget(None, tuple(scope))


def _own_scope(environ: Mapping[str, str]) -> tuple[str, tuple[str, ...]] | None:
    """``$AGENTD_SCOPE`` (what the daemon gives an agent's session): its unit's module and scope paths."""
    import json

    try:
        value = json.loads(environ.get("AGENTD_SCOPE", ""))
        module, paths = value["module"], value["paths"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(module, str) or not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        return None
    return module, tuple(paths)
