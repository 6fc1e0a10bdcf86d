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
are pure functions of the unit specs (waiting on live units, ``ready`` and
``blocked_by``, is :mod:`supervisor.daemon.table`'s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..config.units import UnitSpec, start_order


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
