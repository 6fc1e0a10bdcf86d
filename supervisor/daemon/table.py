"""The unit table: every loaded unit, and the operations on several units at once.

Starting, stopping and restarting a group of units follows the dependencies
(:mod:`supervisor.daemon.ordering`): requirements are pulled in and started
first, ``after`` orders, stops go dependents first, and a requirement that
stops or fails stops the units that require it, with the reason.

A stop wins over a start planned before it: a start plan goes unit by unit
(each waits for the one before), so a unit stopped meanwhile is skipped.  A
stop with a deadline gives each layer of dependents the room the layers after
it need to end their agents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from ..config.units import UnitSpec
from ..continuity.records import StartReason
from .lifecycle import UnitState
from .ordering import dependents, start_plan, stop_layers
from .runtime import outcome
from .unit import ACTIVE, UnitSupervisor

log = structlog.get_logger("agentd")

#: States of a unit that still has (or will have) a session: a requirement's stop stops it.
LIVE = ACTIVE | {UnitState.BACKOFF, UnitState.WAITING}


async def ready(unit: UnitSupervisor) -> None:
    """Wait until ``unit`` has finished starting and its agent took its wakeup (or died trying)."""
    if unit.busy and unit.state is UnitState.STARTING and unit.op is not None:
        await asyncio.wait({unit.op})
    if unit.delivering:
        await unit.talk.delivered()
        await asyncio.sleep(0)
        unit.reap()


@dataclass(frozen=True)
class Block:
    """Why a unit must not start now; ``waiting``: a requirement is still coming up (backoff, a
    usage-limit wait), so the unit starts once it runs."""

    reason: str
    waiting: bool = False


#: A requirement in these states is coming up again: its dependents wait for it.
COMING_UP = frozenset({UnitState.BACKOFF, UnitState.WAITING})


async def blocked_by(unit: UnitSupervisor, units: Mapping[str, UnitSupervisor], outside: bool = False) -> Block | None:
    """Wait for what ``unit`` is ordered after; why it must not start now, or None.

    ``outside``: requirements that are not loaded are managed elsewhere (``run-unit``
    under systemd, which orders the services itself), so they do not block.
    """
    spec = unit.spec
    for dep in sorted(set(spec.unit.after) | set(spec.unit.requires)):
        other = units.get(dep)
        if other is None:
            if dep in spec.unit.requires and not outside:
                return Block(f"requires unit {dep!r}, which does not exist")
            continue
        await ready(other)
        if dep in spec.unit.requires and other.state not in ACTIVE:
            detail = f": {other.reason}" if other.reason else ""
            if other.state in COMING_UP:
                return Block(f"waiting: requires {dep!r}, which is {other.state.value}{detail}", waiting=True)
            return Block(f"not started: requires {dep!r}, which is {other.state.value}{detail}")
    return None


class UnitTable(Mapping[str, UnitSupervisor]):
    """The loaded units by name, in the order they were loaded."""

    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], Any], outside: bool = False) -> None:
        self._units: dict[str, UnitSupervisor] = {}
        self._spawn = spawn
        #: requirements that are not loaded are managed elsewhere (``run-unit``)
        self.outside = outside
        self._restarting: set[str] = set()
        self._pending: dict[str, tuple[str, StartReason]] = {}  # waiting for a requirement to run
        self.stopping_all = False

    # Mapping
    def __getitem__(self, name: str) -> UnitSupervisor:
        return self._units[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)

    def add(self, unit: UnitSupervisor) -> None:
        self._units[unit.name] = unit

    def remove(self, name: str) -> None:
        self._units.pop(name, None)

    @property
    def specs(self) -> dict[str, UnitSpec]:
        return {n: u.spec for n, u in self._units.items()}

    # ------------------------------------------------------------------ start
    async def start(self, names: list[str], why: str, reason: StartReason = StartReason.START) -> dict[str, str]:
        """Start ``names`` and what they require, in order; a unit whose requirement is down is not started.
        Returns the units started because a unit asked for requires them, each with why (commands say it)."""
        asked = set(names)
        also: dict[str, str] = {}
        plan = start_plan(names, self.specs)
        stops = {name: self._units[name].stops for name in plan}
        for name in plan:
            unit = self._units[name]
            if unit.stops != stops[name] or self.stopping_all:
                log.info("start_skipped", unit=name, why=why, reason="stopped after this start was asked")
                continue
            if unit.busy and unit.state is UnitState.STOPPING:
                await asyncio.wait({unit.op})  # type: ignore[arg-type]
            if unit.state in ACTIVE:
                await ready(unit)
                continue
            blocked = await blocked_by(unit, self._units, self.outside)
            if blocked is not None:
                unit.reason = blocked.reason
                if blocked.waiting:
                    self._pending[name] = (why, reason)
                log.warning("unit_blocked", unit=name, reason=blocked.reason)
                unit.bump()
                continue
            self._pending.pop(name, None)
            pulled = [n for n in asked if name in self.requirements_of(n)]
            task = unit.start(why if name in asked else f"required by {', '.join(sorted(pulled))}", reason)
            if task is not None:
                await outcome(task)
                if name not in asked:
                    also[name] = f"{unit.state.value} (also started: required by {', '.join(sorted(pulled))})"
        return also

    def requirements_of(self, name: str) -> set[str]:
        from .ordering import requirements

        return requirements(name, self.specs)

    # ------------------------------------------------------------------ stop
    async def stop(self, names: list[str], why: str, checkpoint: bool = True, deadline: float | None = None) -> dict[str, str]:
        """Stop ``names`` and the units that require them: dependents first, layer by layer (``deadline``:
        the clock time the whole stop must be done by).  Returns the dependents stopped with them, and why."""
        specs = self.specs
        wanted = set(names)
        for name in names:
            wanted |= {d for d in dependents(name, specs) if self._units[d].state in LIVE or d in self._pending}
        for name in wanted:
            self._pending.pop(name, None)  # stopped: no longer waiting to start
        layers = stop_layers(wanted, specs)
        for i, layer in enumerate(layers):
            after = sum(max(self._units[n].stop_timeout for n in later) for later in layers[i + 1:] if later)
            await asyncio.gather(*(self._units[n].stop(why if n in names else self._because(n, names), checkpoint,
                                                       None if deadline is None else deadline - after)
                                   for n in layer))
        return {n: f"{self._units[n].state.value} (also {self._because(n, names)})" for n in sorted(wanted - set(names))}

    def _because(self, name: str, stopped: list[str]) -> str:
        req = sorted(set(self.requirements_of(name)) & set(stopped))
        return f"stopped: requires {', '.join(repr(r) for r in req)}, which was stopped"

    def changed(self, unit: UnitSupervisor) -> None:
        """A unit's state changed: units waiting for it start once it runs; when it is down, the units
        that require it go down too (and those waiting for it stop waiting, with the reason)."""
        if self.stopping_all or unit.name in self._restarting:
            return
        waiting = [d for d in dependents(unit.name, self.specs) if d in self._pending]
        if unit.state is UnitState.RUNNING and waiting:
            for name in waiting:
                why, reason = self._pending.pop(name)
                self._spawn(self.start([name], why, reason))
            return
        if unit.state not in (UnitState.INACTIVE, UnitState.FAILED, UnitState.ERROR):
            return
        detail = f": {unit.reason}" if unit.reason else ""
        for name in waiting:
            self._pending.pop(name, None)
            self._units[name].reason = f"not started: requires {unit.name!r}, which is {unit.state.value}{detail}"
            self._units[name].bump()
        live = [d for d in dependents(unit.name, self.specs) if self._units[d].state in LIVE]
        if not live:
            return
        why = f"stopped: requires {unit.name!r}, which is {unit.state.value}{detail}"
        log.warning("dependents_stopped", unit=unit.name, dependents=live, reason=why)
        self._spawn(self.stop(live, why, checkpoint=True))

    # ------------------------------------------------------------------ restart
    async def restart(self, names: list[str], now: bool) -> None:
        """Restart ``names``; with ``now``, the units that require them are restarted after them."""
        if not now:  # through the cycle: the unit never goes down, its dependents keep running
            await asyncio.gather(*(self._units[n].restart(False) for n in names))
            return
        specs = self.specs
        deps = {d for n in names for d in dependents(n, specs) if self._units[d].state in LIVE}
        self._restarting |= set(names)
        try:
            await self.stop(list(deps), "restart: a requirement restarts", checkpoint=False)
            for layer in stop_layers(names, specs):
                await asyncio.gather(*(self._units[n].stop("restart command", checkpoint=False) for n in layer))
        finally:
            self._restarting -= set(names)
        for name in names:
            self._units[name].restarts += 1
        await self.start([*names, *deps], "restart command", StartReason.RESTART)
