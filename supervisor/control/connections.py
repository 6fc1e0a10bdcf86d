"""How many control connections are served, and which idle one gives way (issue 13, item 5).

Every connection costs the daemon a descriptor, and a client that connects and
then sends nothing holds it forever unless something ends it.  Three rules,
so that ``status`` always answers:

* **idle timeout**: a connection awaiting a request for ``idle_timeout``
  seconds is closed (the server does it; a command being answered or an
  attached viewer is never idle);
* **a cap with a reserve**: ``connections`` are served for any command;
  beyond them ``reserve`` more for the :data:`PRIORITY` commands only
  (``status``, ``ping``, ``stop``, ``shutdown``); beyond those a connection
  is told so and closed;
* **idle ones give way**: when a new connection finds the cap reached, or
  the daemon out of descriptors, the connection idle the longest (at least
  ``evict_after`` seconds, so a client's request already on its way is read)
  is told so and closed to make room.  A real client sends its request as
  soon as it connects, so only idle clients lose.

:func:`admit` and :func:`oldest_idle` are the policy (pure);
:class:`Connections` is the table the server keeps.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .framing import encode

#: The commands a connection let in on the reserve may run.
PRIORITY = frozenset({"ping", "status", "stop", "shutdown"})


@dataclass(frozen=True)
class Limits:
    """How many connections the server serves, and how long one may stay idle."""

    connections: int = 32
    reserve: int = 4
    idle_timeout: float = 30.0
    evict_after: float = 0.5

    @property
    def descriptors(self) -> int:
        """Descriptors the connections may hold at most (the listener's spare and the server's included)."""
        return self.connections + self.reserve + 2


class Admission(enum.Enum):
    NORMAL = "normal"  # any command
    RESERVE = "reserve"  # the PRIORITY commands only
    REFUSED = "refused"  # an error, then closed


def admit(normal: int, reserve: int, limits: Limits) -> Admission:
    """Where a new connection goes, given how many of each kind are open."""
    if normal < limits.connections:
        return Admission.NORMAL
    if reserve < limits.reserve:
        return Admission.RESERVE
    return Admission.REFUSED


@dataclass(eq=False)
class Conn:
    """One served connection."""

    admission: Admission
    spare: bool = False  # accepted on the listener's spare descriptor
    writer: asyncio.StreamWriter | None = None
    idle_since: float | None = None  # monotonic, while a request is awaited
    evicted: bool = False


def oldest_idle(conns: Iterable[Conn], now: float, after: float) -> Conn | None:
    """The connection idle the longest, if it has been idle at least ``after`` seconds."""
    idle = [c for c in conns if c.idle_since is not None and not c.evicted and c.writer is not None
            and now - c.idle_since >= after]
    return min(idle, key=lambda c: c.idle_since or 0.0, default=None)


@dataclass
class Connections:
    """The table of served connections."""

    limits: Limits
    clock: Callable[[], float] = time.monotonic
    conns: set[Conn] = field(default_factory=set)
    evictions: int = 0

    def count(self, admission: Admission) -> int:
        return sum(1 for c in self.conns if c.admission is admission and not c.evicted)

    @property
    def open(self) -> int:
        return sum(1 for c in self.conns if not c.evicted)

    def admission(self) -> Admission:
        """Where a new connection goes; an idle one gives way when the cap is reached."""
        found = admit(self.count(Admission.NORMAL), self.count(Admission.RESERVE), self.limits)
        if found is not Admission.NORMAL and self.evict_idle():
            return Admission.NORMAL
        return found

    def add(self, admission: Admission, spare: bool = False) -> Conn:
        conn = Conn(admission, spare)
        self.conns.add(conn)
        return conn

    def remove(self, conn: Conn) -> None:
        self.conns.discard(conn)

    def evict_idle(self) -> bool:
        """Close the connection idle the longest (telling it why); False when none may be."""
        conn = oldest_idle(self.conns, self.clock(), self.limits.evict_after)
        if conn is None or conn.writer is None:
            return False
        conn.evicted = True
        self.evictions += 1
        try:
            conn.writer.write(encode({"ok": False, "error": "closed: idle while agentd needed the connection for "
                                                           "another client"}))
            conn.writer.close()
        except (OSError, RuntimeError):
            conn.writer.transport.abort()
        return True
