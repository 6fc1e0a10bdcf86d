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

    def poke(self) -> None:
        """Wake the subscriber with nothing changed (it has something else to look at)."""
        self._wake.set()

    async def wait(self, timeout: float | None = None) -> set[str]:
        """The changed names (empty after ``timeout`` seconds without a change, or after a poke)."""
        if not self.dirty and not self._wake.is_set():
            timer = asyncio.get_running_loop().call_later(timeout, self._wake.set) if timeout is not None else None
            try:
                await self._wake.wait()  # no task per wait: a page's stream waits here many times a second
            finally:
                if timer is not None:
                    timer.cancel()
        self._wake.clear()
        names, self.dirty = self.dirty, set()
        return names


class ChangeBus:
    """Publish a unit's name; each subscription sees it once."""

    def __init__(self) -> None:
        self._subs: set[Subscription] = set()
        self.versions: dict[str, int] = {}  # name -> publications so far (what a cached view was made from)

    def version(self, name: str) -> int:
        """How many times ``name`` was published (0: never): a view made after reading it is at least that new."""
        return self.versions.get(name, 0)

    def publish(self, name: str) -> None:
        self.versions[name] = self.versions.get(name, 0) + 1
        for sub in self._subs:
            sub.mark(name)

    def subscribe(self) -> Subscription:
        sub = Subscription()
        self._subs.add(sub)
        return sub

    def poke_all(self) -> None:
        for sub in self._subs:
            sub.poke()

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)

