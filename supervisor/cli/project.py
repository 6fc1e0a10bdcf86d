"""What the CLI says when the project it found has nothing to supervise.

Used by ``start`` (which refuses), ``check`` (exit 1) and ``doctor --env``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..config.paths import Location, PlainPaths
    from ..config.settings import Settings


def units_problem(settings: Settings | PlainPaths, where: Location) -> str | None:
    """Why there is nothing to start (several lines: what, where the project came from, how to fix), or None."""
    from ..config.unitfile import EXAMPLE_SUFFIX, unit_files

    units = settings.units_path
    if unit_files(units):
        return None
    root = settings.project_root
    found = where.root_source() if where.project_root() == root else "the settings"
    examples = sorted(p.name for p in units.glob(f"*{EXAMPLE_SUFFIX}")) if units.is_dir() else []
    if examples:
        what = (f"no unit file in {units}: only examples ({', '.join(examples)}; *.example.toml are skipped).\n"
                f"  Copy one to {units.name}/NAME.toml and edit it.")
    elif units.is_dir():
        what = (f"no unit file in {units}: nothing to supervise.\n"
                "  Write units/NAME.toml (agentd's source has units/demo.toml, which runs the fake agent).")
    else:
        what = (f"no units/ folder in {root}: nothing to supervise.\n"
                "  `agentd init` creates .agent/ and units/example.toml (a commented example to edit),\n"
                "  or copy units/demo.toml from agentd's source (it runs the fake agent).")
    return f"{what}\n  Project: {root} ({found}); another one: --project PATH or $AGENTD_PROJECT."
