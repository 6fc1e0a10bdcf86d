"""Slow streams of one event loop, read together on one timer instead of on every burst.

An agent that prints small bursts in a stream (a test run, a build log)
would otherwise wake the loop once per burst.  :class:`~.pty.Session` parks
such a stream here: it stops watching the PTY (one ``remove_reader``), and the
stream's loop reads every parked PTY once per :data:`INTERVAL` from one timer.
A stream stays parked as long as each of those reads finds a slow stream,
so a steady stream costs one read per interval and no ``add_reader`` /
``remove_reader`` / timer per interval (before this, the parking of each
session for 0.1 s and its resumption were about a quarter of the daemon's
loop at 50 agents x 20 KB/s).  A read that finds nothing (the agent went
quiet) or more than a slow stream's share (see :func:`slow_stream`) hands the
PTY back to the loop's reader at once.

Policy (:func:`slow_stream`) is a pure function; the mechanism is
:class:`Parking`, one per event loop (:func:`parking_of`).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Protocol

#: While an agent streams slowly, its PTY is read at most once per this many
#: seconds: dozens of agents printing small bursts then cost one read per
#: agent per interval instead of one wakeup per burst (at 50 agents x 20 KB/s
#: in 20 ms bursts, 0.04 s -> 0.1 s took the daemon from 1.4 to 1.0 CPU-s per
#: 5 s, and no pause at all costs 2.3).  Only a stream is held back: a read
#: less than STREAMING seconds after the previous one; the first output after
#: a quiet spell (an answer, a prompt, a keystroke's echo) and what follows it
#: within one read are handed on at once.  Output faster than COALESCE_BYTES
#: per interval is never held back (the kernel buffers only ~20 KB per PTY
#: before the agent's write blocks), so a flood is read at full speed.
INTERVAL = 0.1
COALESCE_BYTES = 4096
STREAMING = 2 * INTERVAL


def slow_stream(got: int, elapsed: float, since_input: float = float("inf")) -> bool:
    """True when ``got`` bytes read ``elapsed`` seconds after the previous read are a slow stream (park it).

    Never within STREAMING seconds of input typed into the agent (``since_input``): its echo and the answer
    that follows are a turn beginning or ending, not a stream, and a turn end seen 0.1 s late is a wakeup
    delivered, a checkpoint begun, a queued message typed 0.1 s late (and the turn watcher learns the parked
    read as a pause: its debounce would grow to the cap)."""
    return (got < COALESCE_BYTES and got * INTERVAL < COALESCE_BYTES * elapsed and elapsed < STREAMING
            and since_input >= STREAMING)


class Parkable(Protocol):
    def poll_parked(self) -> bool:
        """Read what the PTY holds; True to stay parked, False once the session watches its PTY again (or ended)."""

    def watch_again(self) -> None:
        """:meth:`poll_parked` raised: watch the PTY again (if it is still open)."""


class Parking:
    """The parked sessions of one loop and the one timer that reads them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = INTERVAL) -> None:
        self.loop = loop
        self.interval = interval
        self._parked: dict[Parkable, None] = {}  # insertion-ordered set
        self._timer: asyncio.TimerHandle | None = None

    def park(self, session: Parkable) -> None:
        """Read ``session`` at the next tick (at most :attr:`interval` from now)."""
        self._parked[session] = None
        if self._timer is None:
            self._timer = self.loop.call_later(self.interval, self._tick)

    def unpark(self, session: Parkable) -> None:
        self._parked.pop(session, None)

    def __contains__(self, session: object) -> bool:
        return session in self._parked

    def _tick(self) -> None:
        self._timer = None
        parked, self._parked = self._parked, {}
        for session in parked:
            try:
                stay = session.poll_parked()
            except Exception as exc:  # noqa: BLE001 - one session's failure must not stall the others
                self.loop.call_exception_handler({"message": "reading a parked PTY failed", "exception": exc})
                session.watch_again()
                continue
            if stay:
                self._parked[session] = None
        if self._parked and self._timer is None:
            self._timer = self.loop.call_later(self.interval, self._tick)


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Parking] = weakref.WeakKeyDictionary()


def parking_of(loop: asyncio.AbstractEventLoop) -> Parking:
    """The :class:`Parking` of ``loop`` (created on first use)."""
    parking = _BY_LOOP.get(loop)
    if parking is None:
        parking = _BY_LOOP[loop] = Parking(loop)
    return parking
