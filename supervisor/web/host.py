"""The dashboard inside the daemon: :class:`WebHost` serves it on the daemon's own event loop.

The daemon makes one ``WebHost`` and calls :meth:`WebHost.open` once its
control commands exist: with ``[web] enabled = true`` the page is served at
once, else when ``agentd web`` asks (the ``web`` control command,
:meth:`WebHost.serve`).  It stays up until the daemon stops
(:meth:`WebHost.close`) or ``agentd web --stop``.

Why aiohttp: it runs on the daemon's asyncio loop as one more set of tasks
(``AppRunner`` + ``TCPSite``), takes no signals and starts no thread or
process; streaming answers (server-sent events) are plain
``StreamResponse`` writes.  (uvicorn, the usual ASGI server, replaces the
process's SIGINT/SIGTERM handlers while it serves, which would take the
daemon's checkpointing shutdown away.)

This module imports no aiohttp: the daemon pays for it only when it serves.
It sees the daemon through :class:`WebDaemon` (a Protocol) and the attach
server's :class:`~supervisor.control.attach.AttachTarget`.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from .. import __version__
from ..daemon.bus import ChangeBus
from .fleet import FleetWatch, merge
from .model import UnitFacts, card, legend

if TYPE_CHECKING:  # pragma: no cover
    from aiohttp import web

    from ..control.attach import AttachTarget

log = structlog.get_logger("agentd.web")

#: Seconds between the sampler's looks at every unit (context figures change without an event).
SAMPLE_EVERY = 1.0
#: Context points kept per unit for the chart (one at most every POINT_GAP seconds, or when it moved).
POINTS = 2000
POINT_GAP = 5.0
#: Seconds a card built for one page's stream serves the other pages too.
CARD_REUSE = 0.5


class WebDaemon(Protocol):
    """What the dashboard needs of the daemon."""

    units: Mapping[str, Any]  # name -> UnitSupervisor
    settings: Any
    bus: ChangeBus
    load_errors: list[Any]

    async def status(self, names: list[str] | None, stats: bool = ...) -> dict[str, Any]: ...


class WebError(Exception):
    """The web server could not start (the message says why and what to do)."""


def facts_of(unit: Any, fallback_cycle: dict[str, Any] | None = None) -> UnitFacts:
    """A unit's :class:`UnitFacts` (read from its ``UnitSupervisor``)."""
    spec, driver, marker = unit.spec, unit.driver, unit.checkpoint_marker
    return UnitFacts(
        checkpoint_at=spec.context.checkpoint_at, hard_limit=spec.context.hard_limit,
        stall_after=spec.schedule.stall_after,
        checkpoint_deadline=spec.checkpoint.deadline + spec.checkpoint.grace,
        silent_for=driver.silent_for if driver is not None and not driver.exited else None,
        checkpoint_started=marker.get("started") if marker else None,
        last_cycle=unit.last_cycle or fallback_cycle)


def url_host(listen: str) -> str:
    """The host part of the URL to print for ``listen``."""
    if listen in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{listen}]" if ":" in listen else listen


class WebHost:
    """The dashboard's server, its sampler and the context history (see the module docstring)."""

    def __init__(self, daemon: WebDaemon, attach: AttachTarget) -> None:
        self.daemon, self.attach = daemon, attach
        self.settings = daemon.settings.web
        fleet = daemon.settings.fleet
        self.host = fleet.host_name()  # [fleet] name, else the host name: on every card this daemon serves
        self.fleet = FleetWatch(fleet.peers, fleet.timeout, fleet.refresh, daemon.settings.state_path)
        self.commands: Mapping[str, Any] = {}
        self.token = ""
        self.port = 0
        self.closing = asyncio.Event()
        self.series: dict[str, deque[list[float]]] = {}
        self.last_cycles: dict[str, dict[str, Any]] = {}
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._seen: dict[str, tuple[Any, ...]] = {}
        self._metrics: Any = None
        self.guard: Any = None  # the auth middleware (supervisor.web.auth.Guard), made with the app
        self._lock = asyncio.Lock()
        self._recent: dict[str, tuple[float, int | None, dict[str, Any]]] = {}  # unit -> (when, bus version, card)

    # ------------------------------------------------------------------ life
    @property
    def serving(self) -> bool:
        return self._runner is not None

    @property
    def token_path(self) -> Path:
        path = self.settings.token_file
        return path if path.is_absolute() else self.daemon.settings.state_path / path

    async def open(self, commands: Mapping[str, Any]) -> None:
        """The daemon's command table is ready: serve now if ``[web] enabled``."""
        self.commands = commands
        if self.settings.enabled:
            try:
                await self.start()
            except WebError as exc:
                log.error("web_unavailable", error=str(exc))

    async def serve(self, stop: bool = False) -> dict[str, Any]:
        """The ``web`` control command: start serving (or stop), and say where."""
        if stop:
            await self.close()
            return {"serving": False}
        try:
            return await self.start()
        except WebError as exc:
            from ..control.framing import ControlError

            raise ControlError(str(exc)) from None

    def info(self) -> dict[str, Any]:
        listen = self.settings.listen
        base = f"http://{url_host(listen)}:{self.port}/"
        return {"serving": self.serving, "url": f"{base}?token={self.token}", "base": base, "listen": listen,
                "port": self.port, "loopback": self.settings.loopback, "token_file": str(self.token_path),
                "metrics_public": self.settings.metrics_public}

    async def start(self) -> dict[str, Any]:
        async with self._lock:
            if self._runner is not None:
                return self.info()
            from aiohttp import web

            from .auth import load_token
            from .metrics import Metrics
            from .routes import make_app

            try:
                self.token = await asyncio.to_thread(load_token, self.token_path)
            except OSError as exc:
                raise WebError(f"web token file {self.token_path}: {exc.strerror or exc}") from None
            self.closing = asyncio.Event()
            self._metrics = Metrics(self.host, __version__, self.daemon.settings.state_path)
            from .plan import register_metrics

            register_metrics(self._metrics.registry, self.daemon, self.host)  # the plans' series (web/plan.py)
            runner = web.AppRunner(make_app(self), access_log=None, handle_signals=False, shutdown_timeout=2.0)
            await runner.setup()
            site = web.TCPSite(runner, self.settings.listen, self.settings.port, reuse_address=True)
            try:
                await site.start()
            except OSError as exc:
                await runner.cleanup()
                raise WebError(f"cannot listen on {self.settings.listen}:{self.settings.port}: "
                               f"{exc.strerror or exc} (set [web] port, or AGENTD_WEB__PORT)") from None
            self._runner = runner
            self.port = self.guard.port = runner.addresses[0][1]  # the cookie's name has the real port
            await asyncio.to_thread(self._load_last_cycles)
            self._sampler = asyncio.ensure_future(self._sample())
            self.fleet.start()  # [fleet] peers: asked on the watch's threads, never on a page's request
            info = self.info()
            log.info("web_serving", listen=self.settings.listen, port=self.port, loopback=self.settings.loopback,
                     token_file=str(self.token_path))
            if not self.settings.loopback:
                log.warning("web_not_loopback", listen=self.settings.listen,
                            note="reachable from other machines: every request needs the token; no TLS here, "
                                 "put it behind a TLS proxy")
            return info

    async def close(self) -> None:
        async with self._lock:
            if self._runner is None:
                return
            self.closing.set()
            self.daemon.bus.poke_all()
            if self._sampler is not None:
                self._sampler.cancel()
            await self.fleet.close()
            runner, self._runner = self._runner, None
            await runner.cleanup()
            log.info("web_stopped")

    # ------------------------------------------------------------------ the units as the page sees them
    def _load_last_cycles(self) -> None:
        from ..continuity.records import read_history

        for name in list(self.daemon.units):
            last = None
            for last in read_history(self.daemon.settings.state_path, name):
                pass
            if last is not None:
                self.last_cycles[name] = last

    def facts(self, name: str) -> UnitFacts:
        return facts_of(self.daemon.units[name], self.last_cycles.get(name))

    async def cards(self, names: set[str] | None = None, stats: bool = False) -> dict[str, Any]:
        """The cards of ``names`` (None: every unit), and the names of units no longer there.

        Without ``stats`` the cards carry the last CPU/RSS sample (live updates do not sample
        every agent's process tree); a card computed for another page moments ago is reused.
        """
        known = list(self.daemon.units) if names is None else [n for n in names if n in self.daemon.units]
        removed = [] if names is None else sorted(n for n in names if n not in self.daemon.units)
        now = time.time()
        versions = self.daemon.bus.versions
        fresh = {n: c for n in known if (c := self._recent.get(n)) is not None and not stats
                 and now - c[0] < CARD_REUSE and c[1] == versions.get(n)}
        todo = [n for n in known if n not in fresh]
        result = await self.daemon.status(todo, stats=stats) if todo else {"units": []}
        for row in result["units"]:
            if row["unit"] in self.daemon.units:
                fresh[row["unit"]] = (now, versions.get(row["unit"]), card(row, self.facts(row["unit"]), self.host, now))
        self._recent.update(fresh)
        return {"now": now, "cards": [fresh[n][2] for n in known if n in fresh],
                "removed": [f"{self.host}/{n}" for n in removed]}

    async def overview(self) -> dict[str, Any]:
        result = await self.daemon.status(None)
        now = time.time()
        cards = [card(row, self.facts(row["unit"]), self.host, now) for row in result["units"]]
        versions = self.daemon.bus.versions
        self._recent = {c["unit"]: (now, versions.get(c["unit"]), c) for c in cards}
        return {"now": now, "host": self.host, "daemon": result["daemon"], "cards": cards,
                "errors": result.get("errors", []), "legend": legend(),
                "peers": [v.as_dict() for v in self.fleet.snapshot()]}

    async def fleet_view(self) -> dict[str, Any]:
        """This daemon's cards and the peers' last answers, merged (:func:`supervisor.web.fleet.merge`)."""
        ov = await self.overview()
        view = merge(self.host, ov["cards"], self.fleet.snapshot(), ov["now"], daemon=ov["daemon"],
                     local_errors=ov["errors"])
        return {**view, "refresh": self.fleet.refresh, "looks": self.fleet.looks, "legend": ov["legend"]}

    async def metric_rows(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        result = await self.daemon.status(None)
        rows = []
        for row in result["units"]:
            unit = self.daemon.units.get(row["unit"])
            if unit is not None:
                rows.append((row, {"checkpoint_at": unit.spec.context.checkpoint_at,
                                   "hard_limit": unit.spec.context.hard_limit}))
        return rows

    async def metrics(self) -> bytes:
        return self._metrics.render(await self.metric_rows())

    # ------------------------------------------------------------------ the sampler
    def _fingerprint(self, unit: Any) -> tuple[Any, ...]:
        driver, ctx = unit.driver, unit.context
        ratio = round(ctx.ratio * 100) if ctx is not None and driver is not None else None  # 1 % steps
        frozen = unit.watch.frozen_now(driver.session_id) if driver else None  # a freeze named: a blocked screen
        return (unit.state, driver.watcher.state if driver else None, ratio, unit.activity, unit.reason,
                (frozen or {}).get("state"), (frozen or {}).get("detail"),
                len(unit.talk.sends), unit.violations, unit.restarts, unit.talk.viewers,
                (unit.last_cycle or {}).get("started"), driver.session_id if driver else None)

    def sample(self, now: float) -> list[str]:
        """Look at every unit once: record its context point; the names whose card changed."""
        changed = []
        for name, unit in list(self.daemon.units.items()):
            mark = self._fingerprint(unit)
            if self._seen.get(name) != mark:
                self._seen[name] = mark
                changed.append(name)
            ctx = unit.context
            if ctx is not None and unit.driver is not None:
                points = self.series.setdefault(name, deque(maxlen=POINTS))
                if not points or (now - points[-1][0] >= POINT_GAP and points[-1][1] != ctx.used) \
                        or now - points[-1][0] >= 60:
                    points.append([round(now, 1), ctx.used, ctx.window])
        for gone in set(self._seen) - set(self.daemon.units):
            self._seen.pop(gone, None)
            changed.append(gone)
        return changed

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_EVERY)
            try:
                for name in self.sample(time.time()):
                    self.daemon.bus.publish(name)
            except Exception as exc:  # noqa: BLE001 - the page may be stale, the daemon goes on
                log.error("web_sample_failed", error=f"{type(exc).__name__}: {exc}")
