"""One browser page's live stream: server-sent events, one connection per page, no polling.

``GET /api/events[?unit=NAME]`` answers ``text/event-stream`` with these events
(each ``data`` is JSON):

``overview``  at connect: the whole overview (the same as ``GET /api/overview``)
``units``     ``{"now", "cards": [...], "removed": [...]}``: the cards of units
              that changed (a state, a turn starting or ending, the context,
              a queued text, ...), coalesced: at most one event per
              :data:`MIN_GAP` seconds, whatever the number of changes
``term``      (with ``unit``) ``{"data": "..."}``: the terminal's redacted output, as text
``session``   (with ``unit``) ``{"session", "rows", "cols"}``: the terminal now
              follows this session (``session`` null: none runs)
``dropped``   (with ``unit``) output was skipped because the page fell behind

A comment line every :data:`HEARTBEAT` seconds keeps proxies from closing an
idle stream.  A change published on the bus reaches the page within
``MIN_GAP`` plus the time to write it: a state change shows well within a second.
The daemon ends every stream when it stops serving (``closing``, then a poke).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..control.attach import AttachTarget
from ..daemon.bus import ChangeBus
from .terminal import TerminalFeed

MIN_GAP = 0.25  # seconds between two events of one stream (coalescing)
HEARTBEAT = 15.0
MAX_PENDING = 1 << 20  # terminal bytes a slow page may lag before the oldest are skipped


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class PageStream:
    """The stream of one page (see the module docstring)."""

    def __init__(self, bus: ChangeBus, cards: Callable[[set[str]], Awaitable[dict[str, Any]]],
                 overview: Callable[[], Awaitable[dict[str, Any]]], closing: asyncio.Event,
                 attach: AttachTarget | None = None, unit: str | None = None) -> None:
        self.bus, self.cards, self.overview, self.closing = bus, cards, overview, closing
        self.attach, self.unit = attach, unit
        self.pending = bytearray()
        self.sessions: list[dict[str, Any]] = []
        self.dropped = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    # the terminal feed's callbacks (on the loop, never waiting)
    def _on_data(self, data: bytes) -> None:
        self.pending += data
        if len(self.pending) > MAX_PENDING:
            del self.pending[:len(self.pending) - MAX_PENDING // 2]
            self.dropped = True
        self._sub.poke()

    def _on_session(self, info: dict[str, Any]) -> None:
        self.sessions.append(info)
        self._sub.poke()

    def _terminal_events(self) -> bytes:
        out = b""
        if self.sessions:
            for info in self.sessions:
                out += sse("session", info)
            self.sessions.clear()
            self._decoder.reset()
        if self.dropped:
            out += sse("dropped", {"note": "the page fell behind: older output was skipped"})
            self.dropped = False
        if self.pending:
            text = self._decoder.decode(bytes(self.pending))
            self.pending.clear()
            if text:
                out += sse("term", {"data": text})
        return out

    async def serve(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        self._sub = self.bus.subscribe()
        feed_task = None
        try:
            await response.write(b"retry: 1000\n\n" + sse("overview", await self.overview()))
            if self.attach is not None and self.unit is not None:
                feed = TerminalFeed(self.attach, self.unit, self._on_session, self._on_data)
                feed_task = asyncio.ensure_future(feed.run())
            while not self.closing.is_set():
                names = await self._sub.wait(HEARTBEAT)
                if self.closing.is_set():
                    break
                out = self._terminal_events()
                if names:
                    out += sse("units", await self.cards(names))
                await response.write(out or b": ping\n\n")
                await asyncio.sleep(MIN_GAP)
        except ConnectionError:
            pass  # the page went away
        finally:
            self.bus.unsubscribe(self._sub)
            if feed_task is not None:
                feed_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await feed_task
        return response
