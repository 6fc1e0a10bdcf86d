"""``agentd wip list|show|restore``: the WIP commits agentd saved of each unit's uncommitted work.

Thin: parse, call :mod:`supervisor.memory.wip`, print.  No daemon needed
(the commits are refs in the project's own git repository).
"""

from __future__ import annotations

import json

import click

from .context import AppContext, pass_app


def _root(app: AppContext):  # -> Path
    """The project root.  This process's libgit2 work goes to a helper it kills after a while (a FIFO planted
    in .git/ would block it for ever), and agentd's record of the WIPs it made is in its state directory."""
    from ..memory.gitworker import isolate

    isolate()
    return app.paths.project_root


def _record(app: AppContext):  # -> Path
    from ..memory.wiprecord import DIR

    return app.paths.state_path / DIR


@click.group(epilog="""\b
Examples:
  agentd wip list                 # every unit's saved work, oldest first
  agentd wip show web             # the newest: message, files, diff
  agentd wip restore web 3        # its files back into the work tree""")
def wip() -> None:
    """The WIP commits agentd saves before every respawn, restart and stop, and after a crash.

    Each is the unit's uncommitted work in its scope (changed, new and deleted
    files) as a commit on refs/agentd/wip/UNIT/N whose parent is the HEAD it
    was made on.  Saving never touches HEAD, the branch, the index or the work
    tree; each unit keeps its newest 20.
    """


@wip.command("list", epilog="""\b
Examples:
  agentd wip list
  agentd wip list web --json""")
@click.argument("unit", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one WIP commit per line")
@pass_app
def list_cmd(app: AppContext, unit: str | None, as_json: bool) -> None:
    """List the saved WIP commits (of UNIT, or of every unit)."""
    from ..memory.wip import WipError
    from ..memory.wipview import list_wips

    try:
        wips = list_wips(_root(app), unit, _record(app))
    except WipError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        for item in wips:
            click.echo(json.dumps(item.as_dict()))
        return
    if not wips:
        click.echo(f"no WIP commits{f' for {unit}' if unit else ''}")
        return
    from tabulate import tabulate

    from ..visible import visible

    rows = [[w.unit, w.number, w.commit[:12], visible(w.time), visible(w.moment), visible(w.session or "-"),
             f"{len(w.changes) + w.more} file(s)" + (" FOREIGN" if w.foreign else "")] for w in wips]
    click.echo(tabulate(rows, headers=["UNIT", "N", "COMMIT", "SAVED", "BEFORE", "SESSION", "FILES"]))
    for w in wips:
        if w.note:
            click.echo(f"{w.unit} {w.number}: {w.note}")


@wip.command("show", epilog="""\b
Examples:
  agentd wip show web             # the newest
  agentd wip show web 3 --stat    # files only""")
@click.argument("unit")
@click.argument("number", type=int, required=False)
@click.option("--stat", "stat_only", is_flag=True, help="the files, without the diff")
@pass_app
def show_cmd(app: AppContext, unit: str, number: int | None, stat_only: bool) -> None:
    """Show UNIT's WIP commit NUMBER (default: the newest): its message, its files and its diff."""
    from ..memory.wip import WipError
    from ..memory.wipview import find_wip, show_wip
    from ..visible import visible

    try:
        text = show_wip(_root(app), find_wip(_root(app), unit, number, _record(app)), patch=not stat_only)
        # the message and the diff are the agent's bytes: their escapes made visible, line by line
        click.echo("\n".join(visible(line).replace("\\t", "\t") for line in text.split("\n")))
    except WipError as exc:
        raise click.ClickException(str(exc)) from None


@wip.command("restore", epilog="""\b
Examples:
  agentd wip restore web          # the newest; refuses to overwrite local changes
  agentd wip restore web 3 --force""")
@click.argument("unit")
@click.argument("number", type=int, required=False)
@click.option("--force", is_flag=True, help="overwrite files that changed since the WIP was saved")
@pass_app
def restore_cmd(app: AppContext, unit: str, number: int | None, force: bool) -> None:
    """Write the files of UNIT's WIP commit NUMBER (default: the newest) back into the work tree.

    Only the files the WIP saved are written (or deleted); HEAD and the index
    stay as they are, so `git status` then shows them as local changes.  A file
    that changed since the WIP was saved is not overwritten unless --force.
    """
    from ..memory.wip import WipError
    from ..memory.wipview import find_wip, restore_wip
    from ..visible import visible

    try:
        item = find_wip(_root(app), unit, number, _record(app))
        applied = restore_wip(_root(app), item, force=force)
    except WipError as exc:
        raise click.ClickException(str(exc)) from None
    for change in applied:
        click.echo(visible(change.describe()))
    click.echo(f"restored {len(applied)} file(s) from {item.ref} ({item.commit[:12]})")
