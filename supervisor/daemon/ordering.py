"""Dependencies between units, with systemd's meanings.

``requires``
    Starting a unit first starts what it requires (even a unit that is not
    enabled) and waits until it is ready; a unit whose requirement did not come
    up is not started, and says why.  When a requirement stops or fails, the
    units that require it are stopped too, with the reason (``Requires=``).
``after``
    Ordering only: among units started together, a unit starts after the ones
    it is after, and they stop in the reverse order (``After=``).  Nothing is
    pulled in.

*Ready* means the unit's start finished and its agent took its wakeup (or died
trying).  The plans (:func:`start_plan`, :func:`dependents`, :func:`stop_layers`)
are pure functions of the unit specs; :func:`blocked_by` waits on live units.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..config.units import UnitSpec, start_order
from .lifecycle import UnitState
from .unit import ACTIVE, UnitSupervisor


def requirements(name: str, specs: Mapping[str, UnitSpec]) -> set[str]:
    """Everything ``name`` requires, directly or through another requirement."""
    found: set[str] = set()
    stack = list(specs[name].unit.requires) if name in specs else []
    while stack:
        dep = stack.pop()
        if dep in found or dep == name:
            continue
        found.add(dep)
        if dep in specs:
            stack.extend(specs[dep].unit.requires)
    return found


def start_plan(names: Iterable[str], specs: Mapping[str, UnitSpec]) -> list[str]:
    """``names`` and everything they require, in start order (requirements and ``after`` first)."""
    wanted = set(names)
    for name in list(wanted):
        wanted |= requirements(name, specs)
    return [n for n in start_order(dict(specs)) if n in wanted]


def dependents(name: str, specs: Mapping[str, UnitSpec]) -> list[str]:
    """The units that require ``name`` (directly or not), dependents of dependents first."""
    found = [n for n in specs if name in requirements(n, specs)]
    order = start_order(dict(specs))
    return sorted(found, key=order.index, reverse=True)


def stop_layers(names: Iterable[str], specs: Mapping[str, UnitSpec]) -> list[list[str]]:
    """``names`` grouped for stopping: a unit stops before what it requires or is after.

    Units in one layer may stop at the same time (their checkpoints overlap).
    """
    todo = set(names)
    layers: list[list[str]] = []
    while todo:
        # a unit can stop now when no other unit still to stop depends on it (requires or after)
        layer = sorted(n for n in todo if not any(
            n in specs[o].unit.requires or n in specs[o].unit.after for o in todo if o != n and o in specs))
        if not layer:  # a cycle (refused at load; be safe): stop the rest together
            layer = sorted(todo)
        layers.append(layer)
        todo -= set(layer)
    return layers


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
