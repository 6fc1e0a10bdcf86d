"""Whether a unit may start now, given what it is ordered after and what it requires.

``after`` orders only: a unit waits until each unit it is after has finished
starting (its agent took its wakeup, or died trying).  ``requires`` also
demands that the required unit runs: a unit whose requirement is not running
is not started, and says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from .lifecycle import UnitState
from .unit import ACTIVE, UnitSupervisor


async def blocked_by(unit: UnitSupervisor, units: Mapping[str, UnitSupervisor]) -> str | None:
    """Wait for what ``unit`` is ordered after; the reason it must not start, or None."""
    spec = unit.spec
    for dep in sorted(set(spec.unit.after) | set(spec.unit.requires)):
        other = units.get(dep)
        if other is None:
            if dep in spec.unit.requires:
                return f"requires unit {dep!r}, which does not exist"
            continue
        if other.busy and other.state is UnitState.STARTING and other.op is not None:
            await asyncio.wait({other.op})
        if other.delivering:
            # ready means: the agent took its wakeup (or died trying)
            await other.talk.delivered()
            await asyncio.sleep(0)
            other.reap()
        if dep in spec.unit.requires and other.state not in ACTIVE:
            detail = f": {other.reason}" if other.reason else ""
            return f"not started: requires {dep!r}, which is {other.state.value}{detail}"
    return None
