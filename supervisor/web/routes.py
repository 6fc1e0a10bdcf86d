"""The dashboard's routes (aiohttp).

Pages (plain HTML; the data comes from the API and the event stream)::

    GET  /                      the overview
    GET  /unit/{name}           a unit: context chart, cycles, wakeup, memory, violations, live terminal
    GET  /timeline              decisions of every module and the global log, cycles and violations
    GET  /fleet                 every unit of this daemon and of its [fleet] peers, the hosts, merged alarms
    GET  /static/...            CSS, JS, the vendored xterm.js

API (JSON)::

    GET  /api/overview          every unit's card (see supervisor.web.model)
    GET  /api/units/{name}      one card, the context history, and what the unit page reads from files
    GET  /api/timeline          decisions, cycles, violations (each item has "t", epoch seconds)
    GET  /api/fleet             this daemon's cards and its peers' last answers (supervisor.web.fleet)
    GET  /api/events[?unit=N]   the page's live stream (supervisor.web.stream)
    POST /api/units/{name}/{action}   start | stop | restart | checkpoint | send | reset-failed  (JSON body: now, text)
    GET  /metrics               Prometheus (supervisor.web.metrics)

Every route needs the token (:mod:`supervisor.web.auth`); ``/metrics`` may be
public on loopback.  Actions go through the daemon's own control command
table, so the page is refused exactly what ``agentd`` is refused.  An action's
answer names the unit's state and change count as it was given (``unit``), so
the page can tell a failure that came a moment after "started".
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from aiohttp import web

from ..control.framing import ControlError
from . import data
from .auth import Guard, security_headers
from .metrics import CONTENT_TYPE
from .plan import plan_routes
from .stream import PageStream

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    from ..config.web import WebSettings
    from ..control.attach import AttachTarget


class Served(Protocol):
    """What the routes need of the dashboard's server (:class:`supervisor.web.host.WebHost`)."""

    daemon: Any  # supervisor.web.host.WebDaemon: units, bus, status
    attach: AttachTarget
    settings: WebSettings
    commands: Mapping[str, Any]
    token: str
    closing: asyncio.Event
    series: dict[str, Any]
    guard: Any

    async def cards(self, names: set[str] | None = ..., stats: bool = ...) -> dict[str, Any]: ...
    async def overview(self) -> dict[str, Any]: ...
    async def metrics(self) -> bytes: ...

log = structlog.get_logger("agentd.web")

STATIC = Path(__file__).resolve().parent / "static"
#: Seconds an action's answer waits for the daemon; longer ones (a checkpointed stop) go on, and the
#: page sees their progress on its stream.
ACTION_WAIT = 2.0
ACTIONS = {
    "start": lambda name, body: ("start", {"units": [name]}),
    "stop": lambda name, body: ("stop", {"units": [name], "now": bool(body.get("now"))}),
    "restart": lambda name, body: ("restart", {"units": [name], "now": bool(body.get("now"))}),
    "checkpoint": lambda name, body: ("checkpoint", {"unit": name}),
    "send": lambda name, body: ("send", {"unit": name, "text": body.get("text")}),
    "reset-failed": lambda name, body: ("reset-failed", {"units": [name]}),
}


def make_app(host: Served) -> web.Application:
    guard = host.guard = Guard(host.token, host.settings.loopback, host.settings.metrics_public, host.settings.port)
    app = web.Application(middlewares=[guard.middleware], client_max_size=64 * 1024)
    app.on_response_prepare.append(security_headers)
    pending: set[asyncio.Task[Any]] = set()

    def page(name: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.FileResponse(STATIC / name, headers={"Content-Type": "text/html; charset=utf-8"})
        return handler

    def unit_name(request: web.Request) -> str:
        name = request.match_info["name"]
        if name not in host.daemon.units:
            raise web.HTTPNotFound(text=f"no such unit {name!r}", content_type="text/plain")
        return name

    async def unit_page(request: web.Request) -> web.StreamResponse:
        unit_name(request)
        return await page("unit.html")(request)

    async def overview(request: web.Request) -> web.StreamResponse:
        return web.json_response(await host.overview())

    async def fleet(request: web.Request) -> web.StreamResponse:
        return web.json_response(await host.fleet_view())

    async def unit_api(request: web.Request) -> web.StreamResponse:
        name = unit_name(request)
        unit = host.daemon.units[name]
        settings = host.daemon.settings
        detail = await asyncio.to_thread(data.unit_detail, settings.state_path, settings.project_root, unit.spec)
        cards = await host.cards({name}, stats=True)
        return web.json_response({**detail, "card": cards["cards"][0] if cards["cards"] else None,
                                  "now": cards["now"], "series": list(host.series.get(name, ()))})

    async def timeline(request: web.Request) -> web.StreamResponse:
        settings = host.daemon.settings
        found = await asyncio.to_thread(data.timeline, settings.state_path, settings.project_root,
                                        list(host.daemon.units))
        return web.json_response({**found, "units": sorted(host.daemon.units)})

    async def events(request: web.Request) -> web.StreamResponse:
        unit = request.query.get("unit")
        if unit is not None and unit not in host.daemon.units:
            raise web.HTTPNotFound(text=f"no such unit {unit!r}", content_type="text/plain")
        stream = PageStream(host.daemon.bus, host.cards, host.overview, host.closing,
                            host.attach if unit else None, unit)
        return await stream.serve(request)

    async def action(request: web.Request) -> web.StreamResponse:
        name = unit_name(request)
        what = request.match_info["action"]
        if what not in ACTIONS:
            raise web.HTTPNotFound(text=f"no such action {what!r} (known: {', '.join(ACTIONS)})")
        body: dict[str, Any] = {}
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"error": "the body must be a JSON object"}, status=400)
            if not isinstance(body, dict):
                return web.json_response({"error": "the body must be a JSON object"}, status=400)
        cmd, args = ACTIONS[what](name, body)
        command = host.commands.get(cmd)
        if command is None:
            return web.json_response({"error": "the daemon is not ready"}, status=503)
        log.info("web_action", unit=name, action=what, peer=request.remote)
        task = asyncio.ensure_future(command.handler(args))
        done, _ = await asyncio.wait({task}, timeout=ACTION_WAIT)
        # The unit as of this answer, read together (no await between): its state and its change count.
        # The page follows the unit from here on, by cards of a later version only, so a unit that
        # fails a moment after "started" is still told, and a card computed before the action is not.
        unit = host.daemon.units.get(name)
        seen = {"state": getattr(getattr(unit, "state", None), "value", None),
                "version": host.daemon.bus.version(name)}
        if not done:
            pending.add(task)
            task.add_done_callback(_finished(pending, name, what))
            return web.json_response({"accepted": True, "note": f"{what} goes on in the daemon", "unit": seen},
                                     status=202)
        try:
            return web.json_response({"ok": True, "result": task.result(), "unit": seen}, dumps=_dumps)
        except ControlError as exc:
            return web.json_response({"error": str(exc), "unit": seen}, status=409)

    async def metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(body=await host.metrics(), headers={"Content-Type": CONTENT_TYPE})

    async def closing(app: web.Application) -> None:
        host.closing.set()  # every open stream ends; actions still running finish in the daemon
        host.daemon.bus.poke_all()

    app.on_shutdown.append(closing)
    app.add_routes([
        web.get("/", page("overview.html")),
        web.get("/timeline", page("timeline.html")),
        web.get("/fleet", page("fleet.html")),
        web.get("/api/fleet", fleet),
        web.get("/unit/{name}", unit_page),
        web.get("/api/overview", overview),
        web.get("/api/timeline", timeline),
        web.get("/api/events", events),
        web.get("/api/units/{name}", unit_api),
        web.post("/api/units/{name}/{action}", action),
        web.get("/metrics", metrics),
        web.static("/static", STATIC, follow_symlinks=False),
    ])
    app.add_routes(plan_routes(host))  # /plans, /api/plans...: the overnight runs (web/plan.py)
    return app


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, default=str)


def _finished(pending: set[asyncio.Task[Any]], unit: str, what: str) -> Any:
    def done(task: asyncio.Task[Any]) -> None:
        pending.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            level = log.warning if isinstance(exc, ControlError) else log.error
            with contextlib.suppress(Exception):
                level("web_action_failed", unit=unit, action=what, error=f"{type(exc).__name__}: {exc}")
    return done
