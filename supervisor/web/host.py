"""The dashboard inside the daemon: :class:`WebHost` serves it on the daemon's own event loop.

The daemon makes one ``WebHost`` and calls :meth:`WebHost.open` once its
control commands exist: with ``[web] enabled = true`` the page is served at
once, else when ``agentd web`` asks (the ``web`` control command,
:meth:`WebHost.serve`).  It stays up until the daemon stops
(:meth:`WebHost.close`) or ``agentd web --stop``.

Several projects on one machine each run a daemon, and each wants the same
default port.  So the port is chosen, not assumed (:func:`listening`):
``[web] port`` (or the port the ``web`` command names), and when another
program holds it, the next free one of the nine after it, else any free port;
the answer says which and why.  ``agentd web --port N`` asks for exactly N:
a running dashboard moves there (bound first, so a refusal leaves it where it
was), and ``agentd web`` after ``[web] port`` or ``AGENTD_WEB__PORT`` changed
moves it too.

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
import errno
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
#: Ports tried after a taken one (then any free port).
NEXT_PORTS = 9


class WebDaemon(Protocol):
    """What the dashboard needs of the daemon."""

    units: Mapping[str, Any]  # name -> UnitSupervisor
    settings: Any
    bus: ChangeBus
    load_errors: list[Any]

    async def status(self, names: list[str] | None, stats: bool = ...) -> dict[str, Any]: ...


def dashboard(daemon: Any) -> WebHost:
    """The dashboard a daemon hosts (handed to :func:`supervisor.daemon.daemonize.run_daemon` by the command line)."""
    from ..daemon.views import AttachUnits

    return WebHost(daemon, AttachUnits(daemon))


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


def _bind(listen: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address ``listen`` names (port 0: one free port for them all)."""
    found: list[socket.socket] = []
    try:
        for family, kind, proto, _name, addr in dict.fromkeys(
                socket.getaddrinfo(listen or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)):
            sock = socket.socket(family, kind, proto)
            found.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(found) > 1:
                addr = (addr[0], found[0].getsockname()[1], *addr[2:])
            try:
                sock.bind(addr)
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:  # an address family this machine has not enabled: skip it
                    raise
                found.pop().close()
                continue
            sock.listen(128)
            sock.setblocking(False)
    except BaseException:
        for sock in found:
            sock.close()
        raise
    if not found:
        raise OSError(errno.EADDRNOTAVAIL, f"no address of {listen!r} is on this machine")
    return found


def listening(listen: str, port: int, exact: bool) -> tuple[list[socket.socket], str | None]:
    """Sockets listening on ``listen:port``, and a note when another port was chosen.

    Unless ``exact``, a port another program holds is no failure: the next free one of the
    :data:`NEXT_PORTS` after it is taken, else any free port.  Other errors (a port below 1024,
    an address not on this machine) raise as they are.
    """
    tries = [port] if exact or port == 0 else [port, *range(port + 1, min(port + NEXT_PORTS, 65535) + 1), 0]
    for candidate in tries:
        try:
            sockets = _bind(listen, candidate)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or candidate == tries[-1]:
                raise
            continue
        got = sockets[0].getsockname()[1]
        note = None if candidate == port else (
            f"port {port} is taken (another program, or another project's agentd): serving on {got} instead; "
            f"`agentd web --port N` picks one, [web] port keeps it")
        return sockets, note
    raise AssertionError("unreachable")  # pragma: no cover - the last try raises


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
        self.requested: int | None = None  # the port last asked for ([web] port, or the web command's)
        self.note: str | None = None  # why the dashboard is not on the port asked for
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

    async def serve(self, stop: bool = False, port: int | None = None, exact: bool = False) -> dict[str, Any]:
        """The ``web`` control command: start serving (or stop), and say where.

        ``port``: the port to serve on (None: ``[web] port``); ``exact``: that port or an error
        (``agentd web --port N``), else a free one near it when it is taken.  A dashboard already
        served moves when asked for another port exactly, or when the port asked for changed
        (``agentd web`` after an edit of ``[web] port``)."""
        if stop:
            await self.close()
            return {"serving": False}
        try:
            return await self.start(port, exact)
        except WebError as exc:
            from ..control.framing import ControlError

            raise ControlError(str(exc)) from None

    def info(self) -> dict[str, Any]:
        listen = self.settings.listen
        base = f"http://{url_host(listen)}:{self.port}/"
        return {"serving": self.serving, "url": f"{base}?token={self.token}", "base": base, "listen": listen,
                "port": self.port, "requested": self.requested, "note": self.note, "loopback": self.settings.loopback,
                "token_file": str(self.token_path), "metrics_public": self.settings.metrics_public}

    async def start(self, port: int | None = None, exact: bool = False) -> dict[str, Any]:
        async with self._lock:
            wanted = self.settings.port if port is None else port
            if self._runner is not None and (port is None or wanted == self.port
                                             or (not exact and wanted in (self.requested, 0))):
                return self.info()
            listen = self.settings.listen
            try:  # bound before anything is torn down: a port that cannot be had leaves the dashboard where it is
                sockets, note = await asyncio.to_thread(listening, listen, wanted, exact)
            except OSError as exc:
                taken = exc.errno == errno.EADDRINUSE
                raise WebError(f"cannot listen on {listen}:{wanted}: {exc.strerror or exc}"
                               + (" (another program holds it: `agentd web --port N` for another, or without "
                                  "--port for a free one)" if taken else " (set [web] port, or agentd web --port N)")
                               + (f"; the dashboard stays on port {self.port}" if self._runner is not None else "")
                               ) from None
            moved = self.port if self._runner is not None else None
            try:
                if self._runner is not None:
                    await self._unserve()
                await self._serve(sockets)
            except BaseException:
                for sock in sockets:
                    sock.close()
                raise
            self.requested, self.note = wanted, note
            if note:
                log.warning("web_port_taken", wanted=wanted, port=self.port, listen=listen)
            if moved:
                log.info("web_moved", old=moved, port=self.port)
            log.info("web_serving", listen=listen, port=self.port, loopback=self.settings.loopback,
                     token_file=str(self.token_path))
            if not self.settings.loopback:
                log.warning("web_not_loopback", listen=listen,
                            note="reachable from other machines: every request needs the token; no TLS here, "
                                 "put it behind a TLS proxy")
            if self._sampler is None:
                await asyncio.to_thread(self._load_last_cycles)
                self._sampler = asyncio.ensure_future(self._sample())
                self.fleet.start()  # [fleet] peers: asked on the watch's threads, never on a page's request
            return {**self.info(), **({"moved_from": moved} if moved else {})}

    async def _serve(self, sockets: list[socket.socket]) -> None:
        """Serve the app on ``sockets`` (a fresh app: its guard's cookie name has the port)."""
        from aiohttp import web

        from .auth import load_token
        from .metrics import Metrics
        from .plan import register_metrics
        from .routes import make_app

        try:
            self.token = await asyncio.to_thread(load_token, self.token_path)
        except OSError as exc:
            raise WebError(f"web token file {self.token_path}: {exc.strerror or exc}") from None
        self.closing = asyncio.Event()
        if self._metrics is None:
            self._metrics = Metrics(self.host, __version__, self.daemon.settings.state_path)
            register_metrics(self._metrics.registry, self.daemon, self.host)  # the plans' series (web/plan.py)
        runner = web.AppRunner(make_app(self), access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        try:
            for sock in sockets:
                await web.SockSite(runner, sock).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = self.guard.port = sockets[0].getsockname()[1]  # the cookie's name has the real port

    async def _unserve(self) -> None:
        """Stop serving pages (every open stream ends); the sampler and the fleet watch go on."""
        self.closing.set()
        self.daemon.bus.poke_all()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def close(self) -> None:
        async with self._lock:
            if self._runner is None:
                return
            if self._sampler is not None:
                self._sampler.cancel()
                self._sampler = None
            await self.fleet.close()
            await self._unserve()
            self.port, self.note = 0, None
            log.info("web_stopped")

    # ------------------------------------------------------------------ the units as the page sees them
    def _load_last_cycles(self) -> None:
        from ..continuity.records import read_history

        for name in list(self.daemon.units):
            last = next(iter(deque(read_history(self.daemon.settings.state_path, name), maxlen=1)), None)
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
        bus = self.daemon.bus
        fresh = {n: c for n in known if (c := self._recent.get(n)) is not None and not stats
                 and now - c[0] < CARD_REUSE and c[1] == bus.version(n)}
        todo = [n for n in known if n not in fresh]
        seen = {n: bus.version(n) for n in todo}  # read before the status: each card is at least this new
        result = await self.daemon.status(todo, stats=stats) if todo else {"units": []}
        for row in result["units"]:
            if row["unit"] in self.daemon.units:
                made = self._card(row, now, seen.get(row["unit"], 0))
                fresh[row["unit"]] = (now, made["version"], made)
        self._recent.update(fresh)
        return {"now": now, "cards": [fresh[n][2] for n in known if n in fresh],
                "removed": [f"{self.host}/{n}" for n in removed]}

    def _card(self, row: dict[str, Any], now: float, version: int) -> dict[str, Any]:
        """A unit's card with the bus version its status was read after (what a page follows an action by)."""
        return {**card(row, self.facts(row["unit"]), self.host, now), "version": version}

    async def overview(self) -> dict[str, Any]:
        seen = dict(self.daemon.bus.versions)  # read before the status: each card is at least this new
        result = await self.daemon.status(None)
        now = time.time()
        cards = [self._card(row, now, seen.get(row["unit"], 0)) for row in result["units"]]
        self._recent = {c["unit"]: (now, c["version"], c) for c in cards}
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
