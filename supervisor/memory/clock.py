"""The memory library's clock: where the time of a decision, a note, a fact or a snapshot id comes from.

Every writer of the store takes ``clock`` (a :data:`Clock`, asked once per
write) the way a unit asks the daemon's ``Runtime.clock``; the default is
:func:`system_clock`, and a test passes its own.  ``now`` (one fixed moment)
still wins where a writer takes it.  This is the library's only reading of
the wall clock; readers (the wakeup, recall, the logs) take no clock at all,
so what they return depends on the files alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

#: A source of the current local time (memory lines are stamped in local minutes, see ``store.format_time``).
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The wall clock, local time."""
    return datetime.now()


def moment(now: datetime | None, clock: Clock) -> datetime:
    """``now`` when given, else the clock's time."""
    return now if now is not None else clock()
