"""``agentd status --fleet``: the units of this daemon and of its ``[fleet] peers``, on one table.

This daemon answers on its control socket; each peer is asked for its
dashboard's overview over HTTP with its token (:mod:`supervisor.web.fleet`),
every peer at once, each within ``[fleet] timeout``.  A peer that does not
answer is named with its reason; the others (and the local units) are shown
all the same.  The merge is the dashboard's (:func:`supervisor.web.fleet.merge`).

Exit code: 0 when every host answered, 3 when one did not (this daemon included).
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click

from ..config.settings import Settings
from ..visible import visible
from .context import client_call, daemon_running


def local_cards(settings: Settings, host: str, result: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """This daemon's status rows as the dashboard's cards (limits from the unit files)."""
    from ..config.units import ContextSection, load_units
    from ..continuity.records import read_history
    from ..web.model import UnitFacts, card

    specs, _errors = load_units(settings.units_path)
    cards = []
    for row in result.get("units", []):
        spec = specs.get(row["unit"])
        ctx = spec.context if spec is not None else ContextSection()
        last = next(iter(deque(read_history(settings.state_path, row["unit"]), maxlen=1)), None)  # the newest
        facts = UnitFacts(
            checkpoint_at=ctx.checkpoint_at, hard_limit=ctx.hard_limit,
            stall_after=spec.schedule.stall_after if spec is not None else None,
            checkpoint_deadline=spec.checkpoint.deadline + spec.checkpoint.grace if spec is not None else 0.0,
            silent_for=None, checkpoint_started=None, last_cycle=last)  # stall and deadline: the dashboard's
        cards.append(card(row, facts, host, now))
    return cards


def fleet_view(settings: Settings) -> dict[str, Any]:
    """The merged view: this daemon (over its socket) and every peer (over HTTP), asked at once."""
    from ..web.fleet import fetch_all, merge

    fleet = settings.fleet
    host = fleet.host_name()
    with ThreadPoolExecutor(max_workers=1) as pool:
        peers = pool.submit(fetch_all, fleet.peers, fleet.timeout, settings.state_path)
        local: list[dict[str, Any]] | None = None
        error = daemon = errors = None
        now = time.time()
        if not daemon_running(settings):
            error = "agentd is not running"
        else:
            try:
                result = client_call(settings, "status", timeout=max(fleet.timeout, 10.0))
                assert isinstance(result, dict)
                local = local_cards(settings, host, result, now)
                daemon, errors = result.get("daemon"), result.get("errors")
            except click.ClickException as exc:
                error = exc.message
        views = peers.result()
    return merge(host, local, views, now, local_error=error, daemon=daemon, local_errors=errors)


def render_fleet(view: dict[str, Any], colour: bool = False, limit: int | None = None) -> str:
    """The fleet table, the hosts that did not answer, then the alarms and warnings."""
    from .render import fmt_count
    from .style import fit, paint, state

    hosts = view["hosts"]
    down = [h for h in hosts if not h["ok"]]
    head = (f"fleet: {len(hosts)} hosts, {len(view['cards'])} units"
            + (f", {len(down)} not answering" if down else ""))
    rows = []
    for c in view["cards"]:
        ctx = c.get("context")
        context = "-"
        try:
            if ctx:
                context = f"{'' if ctx.get('exact') else '~'}{fmt_count(ctx['used'])}/{fmt_count(ctx['window'])} " \
                          f"{ctx['ratio'] * 100:.0f}%"
        except (TypeError, KeyError, ValueError, AttributeError):
            context = "?"  # a peer's card in a shape this version does not know
        alarm = (c.get("alarms") or [{}])[0].get("text")
        warning = (c.get("warnings") or [None])[0]
        note = alarm or warning or c.get("waiting_for") or c.get("activity") \
            or (c.get("reason") if c.get("state") != "running" else "") or ""
        shown = visible(str(c.get("state")))
        rows.append([visible(str(c.get("host"))), visible(str(c["unit"])), state(shown, colour, shown),
                     visible(str(c.get("pid") or "-")), visible(str(c.get("restarts", 0))), context, visible(str(note))])
    table = fit(["HOST", "UNIT", "STATE", "PID", "RESTARTS", "CONTEXT", "NOTE"], rows, limit, drop=("PID", "RESTARTS"))
    lines = [head, table if rows else "(no units)"]
    for h in down:
        where = f" ({h['url']})" if h.get("url") else ""
        lines.append(paint(f"not answering: {visible(h['name'])}{where}: {visible(h['error'])}", "red", colour))
    for h in hosts:
        for err in h.get("errors") or []:
            lines.append(f"error on {visible(h['name'])}: {visible(err)}")
    for a in view["alarms"]:
        if a["unit"] is not None:
            lines.append(paint(f"alarm: {visible(a['host'])}/{visible(a['unit'])}: {visible(a['kind'])}: {visible(a['text'])}",
                               "red", colour))
    for w in view["warnings"]:
        lines.append(paint(f"warning: {visible(w['host'])}/{visible(w['unit'])}: {visible(w['text'])}", "yellow", colour))
    return "\n".join(lines)


def status_fleet(settings: Settings, as_json: bool) -> int:
    """Print the fleet view; the exit code (0: every host answered, 3: one did not)."""
    import json

    view = fleet_view(settings)
    if as_json:
        click.echo(json.dumps(view, indent=2, default=str))
    else:
        from .style import colour_on, width

        click.echo(render_fleet(view, colour=colour_on(), limit=width()))
    return 0 if all(h["ok"] for h in view["hosts"]) else 3
