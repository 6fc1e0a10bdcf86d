"""``agentd history UNIT``: a unit's session starts and checkpoint cycles, merged by time (the command and its table);
``agentd violations``: the scope violations on record.

Two files under ``<state>/history/`` (:mod:`supervisor.continuity.records`):
``UNIT.sessions.jsonl`` (every new session and why it started: first start,
crash with the previous exit, cycle, schedule, usage-limit reset, restart) and
``UNIT.jsonl`` (every checkpoint cycle).  :func:`timeline` merges them, oldest
first, each item marked with its ``kind``; :func:`render_timeline` is the table.
"""

from __future__ import annotations

import calendar
import os
import time
from pathlib import Path
from typing import Any

import click

from ..continuity.records import history_path, read_history, read_sessions, sessions_path
from ..visible import visible
from .context import AppContext, pass_app

CYCLE = "cycle"
SESSION = "session"


def _when_ns(item: dict[str, Any]) -> int:
    """A record's start in nanoseconds: ``started_ns`` when recorded, else its ``started`` second."""
    if isinstance(item.get("started_ns"), int):
        return int(item["started_ns"])
    try:
        return calendar.timegm(time.strptime(str(item.get("started")), "%Y-%m-%dT%H:%M:%SZ")) * 1_000_000_000
    except ValueError:
        return 0


def recorded(state_dir: Path, unit: str) -> bool:
    """Whether anything was ever recorded for ``unit``."""
    return history_path(state_dir, unit).exists() or sessions_path(state_dir, unit).exists()


def timeline(state_dir: Path, unit: str, sessions: bool = True) -> list[dict[str, Any]]:
    """The unit's cycles (and session starts), oldest first, each with ``kind``.

    A cycle's record carries the second it started, so it sorts before the
    session it started within that second (stable sort, cycles first).
    """
    items = [{**rec, "kind": CYCLE} for rec in read_history(state_dir, unit)]
    if sessions:
        items += [{**rec, "kind": SESSION} for rec in read_sessions(state_dir, unit)]
    return sorted(items, key=_when_ns)


def _session_row(rec: dict[str, Any]) -> list[Any]:
    outcome = str(rec.get("detail") or "-")
    if rec.get("previous_exit"):
        outcome += f" (previous {rec['previous_exit']})"
    outcome += recall_flag(rec.get("recall"))
    return [rec.get("started", "-"), f"session: {rec.get('why')}", "-", rec.get("wakeup") or "-", "-", "-", outcome,
            f"{rec.get('previous') or '-'} -> {rec.get('session') or '-'}", "-", ""]


def _cycle_row(rec: dict[str, Any]) -> list[Any]:
    steps = " ".join(f"{k}={v:.1f}s" for k, v in (rec.get("steps") or {}).items())
    ratio = rec.get("ratio")
    return [
        rec.get("started", "-"),
        f"cycle: {rec.get('trigger')}",
        f"{rec['tokens_before']}/{rec['window']}" if rec.get("tokens_before") is not None else "-",
        rec.get("wakeup_tokens") if rec.get("wakeup_tokens") is not None else "-",
        f"{ratio * 100:.1f}%" if ratio is not None else "-",
        rec.get("flush"),
        str(rec.get("outcome")) + recall_flag(rec.get("recall")),
        f"{rec.get('old_session') or '-'} -> {rec.get('new_session') or '-'}",
        (rec.get("wip") or "-")[:12],
        steps,
    ]


def recall_flag(recall: Any) -> str:
    """`` ! recall 0.86, missing: ...`` for a cycle whose new session's probe recall is below 1 (issue 16)."""
    if not isinstance(recall, dict) or recall.get("recall") is None or recall["recall"] >= 1.0:
        return ""
    return f" ! recall {recall['recall']:g}, missing: {', '.join(recall.get('missing') or [])}"


def render_timeline(items: list[dict[str, Any]], limit: int | None = None) -> str:
    """The table of session starts and cycles (a cycle record without ``kind`` is a cycle), fitted to ``limit``."""
    from .style import fit

    rows = [_session_row(i) if i.get("kind") == SESSION else _cycle_row(i) for i in items]
    return fit(["STARTED", "EVENT", "TOKENS BEFORE", "WAKEUP", "RATIO", "FLUSH", "OUTCOME", "SESSIONS", "WIP", "STEPS"],
               rows, limit, drop=("STEPS", "WIP", "SESSIONS", "TOKENS BEFORE"))


@click.command(epilog="""\b
Examples:
  agentd history web            # the last 20 session starts and cycles
  agentd history web --cycles   # the cycles only
  agentd history web -n 5 --json""")
@click.argument("unit")
@click.option("-n", "count", default=20, show_default=True, help="entries to show")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one cycle record per line (add --sessions for the starts)")
@click.option("--sessions/--cycles", default=None,
              help="with or without the session starts (default: with them in the table, without in --json)")
@pass_app
def history(app: AppContext, unit: str, count: int, as_json: bool, sessions: bool | None) -> None:
    """Show UNIT's session starts (why each began) and checkpoint cycles, by time.

    A cycle: trigger, tokens before, wakeup tokens, ratio, flush, step times.
    A session start: why (start, crash, cycle, schedule, limit_reset,
    restart), how the previous session ended, where the wakeup went.
    """
    import json

    from ..config.unitfile import unit_path, valid_name

    if not valid_name(unit):
        raise click.ClickException(f"unit name {unit!r} is not valid")
    state = app.paths.state_path
    if not recorded(state, unit) and not os.path.lexists(unit_path(app.paths.units_path, unit)):
        from .names import check_unit

        check_unit(app.paths, unit)  # "did you mean"
        raise click.ClickException(f"no such unit {unit!r}: no {unit_path(app.paths.units_path, unit)} "
                                   f"and nothing recorded under {state / 'history'}")
    items = timeline(state, unit, sessions=not as_json if sessions is None else sessions)[-count:]
    if as_json:
        for rec in items:
            if sessions is None:
                rec.pop("kind", None)  # the cycle records exactly as recorded
            click.echo(json.dumps(rec))
        return
    if not items:
        click.echo(f"nothing recorded for {unit} yet")
        return
    from .style import width

    click.echo(render_timeline(items, limit=width()))


@click.command(epilog="""\b
Examples:
  agentd violations             # every unit's
  agentd violations web --json""")
@click.argument("unit", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one violation per line")
@pass_app
def violations(app: AppContext, unit: str | None, as_json: bool) -> None:
    """Scope violations (all units, or UNIT): writes the kernel fence refused and changes the watcher
    blamed, each with how it is known (kernel, watcher, ambiguous)."""
    import json

    from ..durable import read_jsonl

    rows = [r for r in read_jsonl(app.paths.state_path / "violations.jsonl")
            if unit is None or r.get("unit") == unit or unit in (r.get("candidates") or [])]
    if as_json:
        for rec in rows:
            click.echo(json.dumps(rec))
        return
    if not rows:
        click.echo("no violations")
        return
    click.echo(render_violations(rows))


def render_violations(records: list[dict]) -> str:
    """``agentd violations``: one line per violation, paths and rules with their escapes made visible."""
    from tabulate import tabulate

    rows = [[visible(r.get("time", "-")), visible(r.get("unit") or "(" + ", ".join(r.get("candidates") or []) + "?)"),
             visible(r.get("path", "")), visible(r.get("rule", "")), visible(r.get("action", "")),
             visible(r.get("certainty") or "watcher"), visible(r.get("done") or "-")] for r in records]
    return tabulate(rows, headers=["TIME", "UNIT", "PATH", "RULE", "ACTION", "CERTAINTY", "DONE"], disable_numparse=True)
