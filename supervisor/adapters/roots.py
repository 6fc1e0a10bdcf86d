"""Where an agent's own sandbox lets it write, besides its workdir (Codex's writable roots, Claude Code's added dirs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..config.units import UnitSpec

__all__ = ["writable_roots"]


def writable_roots(spec: UnitSpec, root: Path, tmp: Path | None = None) -> list[Path]:
    """The unit's scope as directories (:func:`supervisor.scope.allowset.scope_allowset`; the whole project
    when the scope is empty), ``[scope] writable`` and ``tmp``: absolute, existing, none beneath another.
    A scope of single files gives no directory (the agent's sandbox cannot grant one file; agentd's fence
    can).  Not ``.agent/``: an agent's memory commands go through its inbox, and the daemon writes the store
    (:mod:`supervisor.memory.channel`)."""
    from ..scope.allowset import AllowSetError, scope_allowset

    root = Path(root).resolve()
    out: list[Path] = []
    try:
        allowed = scope_allowset(root, spec.scope.paths, spec.scope.forbid)
        out += [root / d if d else root for d in allowed.dirs]
    except AllowSetError:
        pass  # too fine-grained: the workdir (always writable) is all the agent's sandbox gets
    for extra in getattr(spec.scope, "writable", ()) or ():
        path = Path(extra).expanduser()
        out.append(path if path.is_absolute() else root / path)
    if tmp is not None:
        out.append(Path(tmp))
    kept: list[Path] = []
    for path in out:
        if path.exists() and not any(path == k or k in path.parents for k in kept):
            kept = [k for k in kept if path not in k.parents] + [path]
    return kept
