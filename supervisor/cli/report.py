"""``agentd report [UNIT] [--json] [--since ...]``: did each resumed session come back whole?

Thin: reads the units' history (``<state>/history/UNIT.jsonl``), joins it with
:func:`supervisor.report.table.rows` and prints the table or JSON.  No daemon
needed.  The figures are recorded by the keeper at each session's end and the
probe recall by the cycle at each respawn (:mod:`supervisor.report`).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import click

from .context import AppContext, pass_app


@click.command(epilog="""\b
Examples:
  agentd report                 # every unit's resumed sessions, the share that fragmented, medians
  agentd report web --since 7d  # one unit, the last week
  agentd report --json          # sessions, per-unit and project medians as one JSON object""")
@click.argument("unit", required=False)
@click.option("--json", "as_json", is_flag=True, help="one JSON object: sessions, units, project")
@click.option("--since", help="only sessions started since: an age (30m, 2h, 7d) or a date (2026-12-01)")
@pass_app
def report(app: AppContext, unit: str | None, as_json: bool, since: str | None) -> None:
    """How each resumed session came back, and whether it received what it needed.

    Per session that followed another, oldest first: tool calls to its first
    productive edit (the unit's cold session beside it), re-reads of files
    unchanged since the session before read them (by blob hash; for a REPL, the
    cat/less/head/tail/sed -n lines of its screen), repeated commands, edits
    made twice (the same change again), constraint breaks, seconds and tokens
    to the first edit, and probe recall (found/probes: the task, the latest
    decisions, the files in flight, the real last command, the WIP commit,
    every hard constraint, looked for in what the adapter delivered).  A recall
    below 1 is flagged with the missing probes.  The headline, per unit and for
    the project: the share of resumes that fragmented (re-read, repeated, did
    an edit twice or broke a constraint).
    """
    from ..config.unitfile import unit_path, valid_name
    from ..continuity.records import read_history, read_sessions
    from ..report.table import parse_since, render, rows, summary
    from .timeline import recorded

    if unit is not None and not valid_name(unit):
        raise click.ClickException(f"unit name {unit!r} is not valid")
    state = app.paths.state_path
    if unit is not None and not recorded(state, unit) and not os.path.lexists(unit_path(app.paths.units_path, unit)):
        raise click.ClickException(f"no such unit {unit!r}: no {unit_path(app.paths.units_path, unit)} "
                                   f"and nothing recorded under {state / 'history'}")
    try:
        cutoff = parse_since(since, datetime.now(timezone.utc)) if since else None
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    folder = state / "history"
    names = [unit] if unit else sorted(p.name[:-len(".jsonl")] for p in folder.glob("*.jsonl")
                                       if not p.name.endswith(".sessions.jsonl")) if folder.is_dir() or unit else []
    found = [r for name in names for r in rows(name, read_history(state, name), cutoff, read_sessions(state, name))]
    if as_json:
        click.echo(json.dumps({"sessions": [r.as_dict() for r in found], **summary(found)}, indent=1))
        return
    if not found:
        click.echo(f"no resumed session recorded{f' for {unit}' if unit else ''} yet"
                   f"{f' since {since}' if since else ''}: figures are recorded when a session that followed "
                   "another ends, recall when the cycle starts one")
        return
    click.echo(render(found))
