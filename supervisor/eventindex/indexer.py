"""The daemon's indexer: a background thread that keeps the event index up to date.

Never on the daemon's event loop, and out of the way of the PTY read path:

* the thread has its own SQLite connection and does every read and write
  itself; the loop only starts it and asks it to stop;
* it runs at the lowest CPU priority (nice 19 for this thread alone, Linux
  ``setpriority`` on its thread id), so the kernel gives the loop's thread
  and the agents the CPU first;
* each pass reads at most :data:`BUDGET` transcript bytes, one step of at most
  that per transaction, and while a backlog remains (a flood of output) it
  sleeps three times as long as it worked, and at least :data:`BACKLOG_PAUSE`:
  at most a quarter of one core; SQLite releases the GIL while it tokenizes
  and writes, so the loop's thread keeps running.  *Worked* is the thread's
  own CPU time (``time.thread_time``), not the wall time of the pass: at nice
  19 on a busy machine a pass waits long for a core, and pausing three times
  that wait left the index minutes behind;
* with nothing new it looks every ``interval`` seconds (a ``stat`` per file),
  and backs off while nothing changes: each pass that found nothing doubles
  the pause, up to :data:`IDLE_MAX` (a quiet daemon of 50 agents), and the
  first pass that finds a change brings it back to ``interval``.  The cost is
  a later first hit after a quiet spell: at most :data:`IDLE_MAX` seconds.

A pass that fails (the database locked by a long ``--reindex``, a file
that vanished mid-read) is logged and retried at the next pass.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from .index import EventIndex, default_db
from .sources import UnitReadings

log = structlog.get_logger("agentd.events")

#: Transcript bytes read per pass.
BUDGET = 8 << 20
#: While a backlog remains: seconds asleep per second of work, and at least this pause between passes
#: (a flood of output is read at 10 MB/s at most: the indexer catches up after it, not during it).
SLEEP_PER_WORK = 3.0
BACKLOG_PAUSE = 0.1
LOWEST_PRIORITY = 19
#: The longest pause between two passes that found nothing new (seconds).
IDLE_MAX = 30.0


class EventIndexer:
    """Start with :meth:`start`, end with :meth:`stop` (joins the thread)."""

    def __init__(self, root: Path, state_dir: Path, units_dir: Path | None, *, interval: float = 5.0,
                 budget: int = BUDGET, db: Path | None = None, idle_max: float = IDLE_MAX,
                 clock: Callable[[], float] = time.thread_time) -> None:
        self.root, self.state_dir, self.units_dir = Path(root), Path(state_dir), units_dir
        self.db = db or default_db(state_dir)
        self.interval = interval
        self.idle_max = max(idle_max, interval)
        self.pause = interval  # the pause after a pass that found nothing new (doubles up to idle_max)
        self.budget = budget
        self.clock = clock  # the thread's CPU time: what a pass cost, for the pause after it
        self.passes = 0  # completed passes (tests wait on it)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="agentd-event-indexer", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the thread to end after its current step, and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        lower_priority()
        index: EventIndex | None = None
        delay = 0.0
        while not self._stop.wait(delay):
            started = self.clock()
            more = False
            try:
                if index is None:
                    index = EventIndex(self.db, self.root, self.state_dir, markers=UnitReadings(self.units_dir),
                                       live=True, busy_timeout=1.0)
                result = index.update(self.budget)
                more = result.more
                self.pause = self.interval if (result.files or result.added) else min(self.pause * 2, self.idle_max)
            except Exception as exc:  # noqa: BLE001 - the index is a cache: log, retry at the next pass
                log.warning("event_index_pass_failed", error=f"{type(exc).__name__}: {exc}")
                if index is not None:
                    index.close()
                index = None
            self.passes += 1
            worked = self.clock() - started
            delay = max(worked * SLEEP_PER_WORK, BACKLOG_PAUSE) if more else max(self.pause, worked * SLEEP_PER_WORK)
        if index is not None:
            index.close()


def start_indexer(settings: Any) -> EventIndexer | None:
    """The daemon's indexer, started (None when ``event_index`` is off); ``settings``: the daemon's Settings."""
    if not settings.event_index:
        return None
    indexer = EventIndexer(settings.project_root, settings.state_path, settings.units_path)
    indexer.start()
    return indexer


def lower_priority() -> None:
    """Nice 19 for the calling thread only (Linux: a thread id is a PRIO_PROCESS target)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)
    except (OSError, AttributeError):
        pass
