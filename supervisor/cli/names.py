"""Unit names for the CLI: "did you mean", and shell completion.

The known units are the unit files (``units/NAME.toml``) and whatever left
files in the state directory (transcripts, history: a removed unit's logs
stay readable).  Only file names are read, nothing is parsed, so completion
stays fast.  Commands that ask the daemon get the daemon's own "did you
mean" (:func:`supervisor.daemon.commands.unit_of`).
"""

from __future__ import annotations

from difflib import get_close_matches
from pathlib import Path
from typing import Any

import click

from ..config.paths import DEFAULT_STATE_DIR


def known_units(units_dir: Path, state_dir: Path | None = None) -> list[str]:
    names = {p.stem for p in units_dir.glob("*.toml") if not p.name.endswith(".example.toml")} if units_dir.is_dir() else set()
    if state_dir is not None:
        transcripts = state_dir / "transcripts"
        if transcripts.is_dir():
            names |= {p.name for p in transcripts.iterdir() if p.is_dir()}
        history = state_dir / "history"
        if history.is_dir():
            names |= {p.name.split(".", 1)[0] for p in history.glob("*.jsonl")}
    return sorted(names)


def unknown_unit(name: str, known: list[str]) -> str:
    """The message for a unit name that is not known: with the closest name, and the list."""
    close = get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = ", ".join(known) if known else "none (agentd init writes an example)"
    return f"no such unit {name!r}{hint} (known units: {listed})"


def check_unit(paths: Any, name: str) -> None:
    """A ClickException unless ``name`` is a known unit (``paths``: the settings or the plain paths)."""
    from ..config.unitfile import valid_name

    known = known_units(paths.units_path, paths.state_path)
    if name in known:
        return
    if not valid_name(name):
        raise click.ClickException(f"unit name {name!r} is not valid; " + unknown_unit(name, known)[3:])
    raise click.ClickException(unknown_unit(name, known))


def complete_units(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of unit names (click's completion; see docs/cli.md)."""
    try:
        root = ctx.find_root()
        app = root.obj
        if app is None:  # completion runs before the group's callback: find the project the same way
            from .context import AppContext

            app = AppContext(root.params.get("config"), root.params.get("project"))
        paths = app.paths
        names = known_units(paths.units_path, paths.state_path)
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        names = known_units(Path("units"), DEFAULT_STATE_DIR)
    return [n for n in names if n.startswith(incomplete)]


def add_completion(command: click.Command) -> None:
    """Complete unit names for ``command``'s UNIT/UNITS arguments (and its subcommands')."""
    for param in command.params:
        if isinstance(param, click.Argument) and param.name in ("unit", "units"):
            param._custom_shell_complete = complete_units  # click >= 8.0: what shell_complete= sets
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_completion(sub)
