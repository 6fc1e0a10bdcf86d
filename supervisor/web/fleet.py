"""One view of the fleet: this daemon's cards and those of its ``[fleet] peers``.

A peer is another agentd daemon serving its dashboard: we ask its
``GET /api/overview`` with its token (``Authorization: Bearer``) and take its
cards (:mod:`supervisor.web.model`), each under the peer's **configured**
name: what the peer calls itself is only shown (``calls_itself``), so a peer
cannot pass its cards off as this daemon's or another peer's.  At most the
peer's ``max_cards`` are kept (one per unit name); the rest are named in its
``errors``.

* :func:`fetch_peer` asks one peer (blocking, ``urllib``, a short timeout, no
  redirect, no proxy: the token goes to the peer's own address and nowhere
  else).  Whatever goes wrong becomes the peer's ``error`` (named, the token
  never in it); it is never raised.
* :func:`fetch_all` asks every peer at once on threads (the CLI).
* :class:`FleetWatch` is what the dashboard holds: while it serves, every
  ``[fleet] refresh`` seconds it asks each peer (each on its own schedule, on
  the watch's own threads, off the daemon's loop) and keeps the last answers;
  a page never waits for a peer.
* :func:`merge` (pure) puts the local cards and the peers' answers into one
  view: every card, the hosts (which answered, which did not and why), and
  the alarms and warnings of every host, most serious first.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from ..config.fleet import Peer, PeerTokenError

log = structlog.get_logger("agentd.web")

#: The most a peer's answer may weigh (a few hundred cards).
MAX_ANSWER = 8 << 20
#: The most of a peer's refused unit files shown.
MAX_ERRORS = 50
#: Order of the merged alarms: the most serious kind first (others after these).
SEVERITY = ("failed", "frozen at the limit", "frozen", "checkpoint deadline passed", "stalled", "idle after compaction")


@dataclass
class PeerView:
    """What one peer answered (or why it did not)."""

    name: str
    url: str
    ok: bool = False
    error: str | None = None
    host: str | None = None  # the peer's configured name: on each of its cards
    calls_itself: str | None = None  # the name the peer gives itself (shown, never used for its cards)
    cards: list[dict[str, Any]] = field(default_factory=list)
    daemon: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)  # the peer's refused unit files
    fetched_at: float | None = None  # wall clock of the answer (or of the failure)
    took: float | None = None  # seconds the ask took

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "ok": self.ok, "error": self.error, "host": self.host,
                "calls_itself": self.calls_itself,
                "units": len(self.cards), "daemon": self.daemon, "errors": self.errors,
                "fetched_at": self.fetched_at, "took": self.took, "pending": self.fetched_at is None}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the token is for the peer's own address: a redirect is an error, not followed


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)


def _reason(exc: BaseException) -> str:
    """A one-line reason for a failed ask (never the request, so never the token)."""
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code == 401:
            return "HTTP 401: the peer refused the token (give its .agentd/web-token)"
        if exc.code == 403:
            return "HTTP 403: refused (a loopback dashboard answers only loopback names)"
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
        if isinstance(exc, str):
            return exc
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def fetch_peer(peer: Peer, timeout: float, state_dir: Path, clock: Any = time.time) -> PeerView:
    """Ask ``peer`` for its overview; never raises (a failure is the view's ``error``)."""
    view = PeerView(peer.label, peer.base)
    started = time.monotonic()
    try:
        token = peer.read_token(state_dir)
        request = urllib.request.Request(peer.base + "api/overview",
                                         headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        with _OPENER.open(request, timeout=timeout) as answer:
            if answer.status != 200:
                raise urllib.error.HTTPError(peer.base, answer.status, answer.reason, answer.headers, None)
            body = answer.read(MAX_ANSWER + 1)
        if len(body) > MAX_ANSWER:
            raise ValueError(f"the answer is larger than {MAX_ANSWER >> 20} MiB")
        data = json.loads(body)
        if not isinstance(data, dict) or not isinstance(data.get("cards"), list) \
                or not all(isinstance(c, dict) and "unit" in c for c in data["cards"]):
            raise ValueError("not an agentd dashboard's overview (is the URL the peer's dashboard?)")
        view.ok, view.host = True, peer.label
        view.calls_itself = str(data["host"])[:200] if data.get("host") else None
        view.cards, left_out = _cards(data["cards"], view.host, peer.max_cards)
        view.daemon = data.get("daemon") if isinstance(data.get("daemon"), dict) else None
        errors = data.get("errors") if isinstance(data.get("errors"), list) else []
        view.errors = [str(e)[:500] for e in errors[:MAX_ERRORS]]
        if left_out:
            view.errors.append(f"{peer.label} sent {left_out + len(view.cards)} cards; {left_out} left out "
                               f"(at most {peer.max_cards}: [[fleet.peers]] max_cards, one per unit name)")
    except PeerTokenError as exc:
        view.error = f"no token: {exc}"
    except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, refused, bad JSON
        view.error = _reason(exc)
    except Exception as exc:  # noqa: BLE001 - one peer never breaks the view
        view.error = f"{type(exc).__name__}: {exc}"
    view.took = round(time.monotonic() - started, 3)
    view.fetched_at = clock()
    return view


def _cards(cards: list[dict[str, Any]], host: str, most: int) -> tuple[list[dict[str, Any]], int]:
    """A peer's cards under ``host``: the first of each unit name, at most ``most``; and how many were left out."""
    kept: dict[str, dict[str, Any]] = {}
    for card in cards:
        if len(kept) >= most:
            break
        made = _card(card, host)
        kept.setdefault(made["unit"], made)
    return list(kept.values()), len(cards) - len(kept)


def _card(card: dict[str, Any], host: str) -> dict[str, Any]:
    """A peer's card as the merge and the renderers expect it: the peer's host, well-formed alarms and warnings."""
    alarms = card.get("alarms") if isinstance(card.get("alarms"), list) else []
    warnings = card.get("warnings") if isinstance(card.get("warnings"), list) else []
    unit = str(card["unit"])
    return {**card, "unit": unit, "host": host, "id": f"{host}/{unit}",
            "alarms": [{"kind": str(a.get("kind")), "text": str(a.get("text"))} for a in alarms if isinstance(a, dict)],
            "warnings": [str(w) for w in warnings]}


def fetch_all(peers: tuple[Peer, ...], timeout: float, state_dir: Path) -> list[PeerView]:
    """Every peer asked at once (one thread each); the views in ``peers`` order."""
    if not peers:
        return []
    with ThreadPoolExecutor(max_workers=min(len(peers), 16), thread_name_prefix="agentd-fleet") as pool:
        return list(pool.map(lambda p: fetch_peer(p, timeout, state_dir), peers))


class FleetWatch:
    """The dashboard's last look at each peer, refreshed while it serves (see the module docstring).

    Each peer has its own task: a peer that hangs until its timeout delays no other peer's look.
    """

    def __init__(self, peers: tuple[Peer, ...], timeout: float, refresh: float, state_dir: Path) -> None:
        self.peers, self.timeout, self.refresh, self.state_dir = peers, timeout, refresh, state_dir
        self.views: dict[str, PeerView] = {p.label: PeerView(p.label, p.base, error="not asked yet") for p in peers}
        self.looks = 0  # answers (or failures) recorded, every peer together
        self._tasks: list[asyncio.Task[None]] = []
        self._pool: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Begin looking at the peers (nothing to do without peers)."""
        if self.peers and not self._tasks:
            self._pool = ThreadPoolExecutor(max_workers=min(len(self.peers), 16), thread_name_prefix="agentd-fleet")
            self._tasks = [asyncio.ensure_future(self._run(p)) for p in self.peers]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)  # a hung ask ends at its own timeout
            self._pool = None

    async def look(self, peer: Peer) -> PeerView:
        """Ask ``peer`` once on the watch's threads; keep and return its answer."""
        loop = asyncio.get_running_loop()
        view = await loop.run_in_executor(self._pool, fetch_peer, peer, self.timeout, self.state_dir)
        before = self.views.get(view.name)
        if before is not None and before.ok != view.ok:
            if view.ok:
                log.info("fleet_peer_answers", peer=view.name, url=view.url)
            else:
                log.warning("fleet_peer_not_answering", peer=view.name, url=view.url, error=view.error)
        self.views[view.name] = view
        self.looks += 1
        return view

    async def _run(self, peer: Peer) -> None:
        while True:
            try:
                await self.look(peer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the view may be stale, the daemon goes on
                log.error("fleet_look_failed", peer=peer.label, error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(self.refresh)

    def snapshot(self) -> list[PeerView]:
        return [self.views[p.label] for p in self.peers]


# ---------------------------------------------------------------------- the merged view (pure)
def _rank(kind: str) -> int:
    return SEVERITY.index(kind) if kind in SEVERITY else len(SEVERITY)


def merge(host: str, local: list[dict[str, Any]] | None, peers: list[PeerView], now: float,
          local_error: str | None = None, daemon: dict[str, Any] | None = None,
          local_errors: list[str] | None = None) -> dict[str, Any]:
    """The fleet view: ``{"now", "host", "hosts", "cards", "alarms", "warnings"}``.

    ``local``: this daemon's cards (None when it does not answer: ``local_error`` says why).
    ``hosts`` lists this daemon first, then each peer in the settings' order, each with ``ok`` and
    ``error``; a peer that did not answer keeps no cards.  Alarms and warnings name their host.
    """
    hosts = [{"name": host, "host": host, "self": True, "ok": local is not None, "error": local_error,
              "url": None, "units": len(local or []), "daemon": daemon, "errors": local_errors or [],
              "fetched_at": now, "took": None, "pending": False}]
    cards = list(local or [])
    for view in peers:
        hosts.append({**view.as_dict(), "self": False})
        if view.ok:
            cards.extend(view.cards)
    cards.sort(key=lambda c: (str(c.get("host")), str(c.get("unit"))))
    alarms: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    for c in cards:
        who = {"host": c.get("host"), "unit": c.get("unit"), "id": c.get("id")}
        alarms.extend({**who, "kind": str(a.get("kind")), "text": str(a.get("text"))} for a in c.get("alarms") or [])
        warnings.extend({**who, "text": str(w)} for w in c.get("warnings") or [])
    for h in hosts:
        if not h["ok"] and not h["pending"]:  # a peer not asked yet is no alarm
            alarms.append({"host": h["name"], "unit": None, "id": None, "kind": "not answering",
                           "text": f"{h['name']} does not answer: {h['error']}"})
    alarms.sort(key=lambda a: (a["unit"] is not None, _rank(a["kind"]), str(a["host"]), str(a["unit"])))
    return {"now": now, "host": host, "hosts": hosts, "cards": cards, "alarms": alarms, "warnings": warnings}
