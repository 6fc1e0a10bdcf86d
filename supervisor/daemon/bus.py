"""The units' change bus: which units changed since a subscriber last looked.

Units publish through the daemon (``Runtime.changed``, called by every
:meth:`~supervisor.daemon.unit.UnitSupervisor.bump`, and by each session's
turn watcher when a turn starts or ends).  A subscriber (one browser's event
stream) gets the *names* of the units that changed, coalesced: a unit that
changes a hundred times between two looks is one name.  Publishing costs one
set insertion per subscriber, nothing when nobody listens, and never waits.
"""

from __future__ import annotations

import asyncio


class Subscription:
    """One subscriber's dirty set; :meth:`wait` returns the names changed since the last call."""

    def __init__(self) -> None:
        self.dirty: set[str] = set()
        self._wake = asyncio.Event()

    def mark(self, name: str) -> None:
        self.dirty.add(name)
        self._wake.set()

    async def wait(self, timeout: float | None = None) -> set[str]:
        """The changed names (empty after ``timeout`` seconds without a change)."""
        if not self.dirty:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        self._wake.clear()
        names, self.dirty = self.dirty, set()
        return names


class ChangeBus:
    """Publish a unit's name; each subscription sees it once."""

    def __init__(self) -> None:
        self._subs: set[Subscription] = set()

    def publish(self, name: str) -> None:
        for sub in self._subs:
            sub.mark(name)

    def subscribe(self) -> Subscription:
        sub = Subscription()
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)

    @property
    def subscribers(self) -> int:
        return len(self._subs)
