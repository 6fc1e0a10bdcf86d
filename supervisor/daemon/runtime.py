"""What a unit needs of the daemon: the :class:`Runtime` Protocol, and :func:`outcome` (awaiting a unit's operation).

The :class:`~supervisor.daemon.arbiter.Arbiter` implements it for real; the
tests' ``FakeRuntime`` implements it with fake drivers and a fake clock, so a
:class:`~supervisor.daemon.unit.UnitSupervisor` is replayed without processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.driver import Driver
    from ..config.units import UnitSpec
    from ..continuity.cycle import Memory
    from ..continuity.keeper import Keeper
    from ..continuity.records import CycleRecord, SessionRecord


class Runtime(Protocol):
    """What a unit needs of the daemon (the Arbiter implements it).

    ``unit`` arguments are the calling :class:`~supervisor.daemon.unit.UnitSupervisor`
    (typed ``Any`` here so that this Protocol does not import the unit).
    """

    clock: Callable[[], float]
    root: Any  # the project root (Path)
    default_stop_timeout: float
    stopping: bool  # the daemon is stopping: nothing starts or respawns

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...
    def call_later(self, delay: float, unit: Any) -> asyncio.TimerHandle: ...
    def launch(self, unit: Any, wakeup: str | None) -> Driver: ...
    def changed(self, unit: Any) -> None: ...
    def gave_up(self, unit: Any) -> None: ...  # down on its own; the restart policy keeps it down
    async def persist(self) -> None: ...
    async def sleep(self, seconds: float) -> None: ...
    def record_cycle(self, record: CycleRecord) -> None: ...
    def record_session(self, record: SessionRecord) -> None: ...
    def memory(self, module: str, env: Mapping[str, str] | None = None) -> Memory: ...
    def keeper(self, spec: UnitSpec, env: Mapping[str, str] | None = None) -> Keeper: ...


async def outcome(op: asyncio.Task[Any]) -> Any:
    """Wait for a unit's operation without cancelling it when the waiter is cancelled; None when the
    operation itself was cancelled (``stop --now`` cancels whatever runs, and its waiters carry on)."""
    try:
        return await asyncio.shield(op)
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if op.cancelled() and not (me is not None and me.cancelling()):
            return None
        raise
