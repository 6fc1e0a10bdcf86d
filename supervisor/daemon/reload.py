"""What a reload does, decided as a pure function of the old and new unit files (:func:`plan_reload`),
then carried out on the table of units (:func:`apply_reload`).

* a unit whose file is gone is stopped (through a checkpoint) and removed;
* a unit whose file is now invalid keeps running as it was, on its old definition (reported with why:
  ``kept_old``); a new file that does not load is reported as ``not_loaded`` with why;
* a new unit is added (and started when enabled);
* a unit whose settings changed is stopped and started again with them;
* a unit whose file changed only in its description is kept, untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config.units import UnitError, UnitSpec, start_order
from .lifecycle import UnitState

if TYPE_CHECKING:  # pragma: no cover
    from .table import UnitTable
    from .unit import UnitSupervisor


@dataclass(frozen=True)
class ReloadPlan:
    order: list[str] = field(default_factory=list)  # the new units, in start order
    stop: list[str] = field(default_factory=list)  # removed: stop and drop
    restart: list[str] = field(default_factory=list)  # changed: stop, then start with the new spec
    kept_old: dict[str, str] = field(default_factory=dict)  # its file does not load now: kept as it was, and why
    not_loaded: dict[str, str] = field(default_factory=dict)  # a new file that does not load, and why


def plan_reload(old: Mapping[str, UnitSpec], new: Mapping[str, UnitSpec], errors: Sequence[UnitError]) -> ReloadPlan:
    broken: dict[str, str] = {}
    for e in errors:
        if e.path.name.endswith(".toml"):
            broken.setdefault(e.path.name.removesuffix(".toml"), e.message)
    removed = sorted(n for n in old if n not in new and n not in broken)
    changed = [n for n in new if n in old and old[n].fingerprint() != new[n].fingerprint()]
    return ReloadPlan(order=start_order(dict(new)), stop=removed, restart=sorted(changed),
                      kept_old={n: why for n, why in sorted(broken.items()) if n in old and n not in new},
                      not_loaded={n: why for n, why in sorted(broken.items()) if n not in old and n not in new})


async def apply_reload(units: UnitTable, plan: ReloadPlan, specs: Mapping[str, UnitSpec], *,
                       make: Callable[[UnitSpec], UnitSupervisor],
                       reconfigure: Callable[[UnitSupervisor, UnitSpec], None],
                       schedule: Callable[[UnitSupervisor], Any]) -> dict[str, Any]:
    """Carry ``plan`` out: removed units stop and go; changed ones stop (their dependents first) and start
    again with their new spec; new enabled ones start.  What was started, stopped, restarted and kept
    (unchanged), and the units kept on their old definition or not loaded, each with why."""
    from .unit import ACTIVE

    await units.stop(plan.stop, "removed by reload")
    for name in plan.stop:
        units.remove(name)
    active = {n for n, u in units.items() if u.state in ACTIVE or u.state is UnitState.BACKOFF}
    await units.stop([n for n in plan.restart if n in units], "changed by reload")  # dependents come back below
    started: list[str] = []
    restarted: list[str] = []
    for name in plan.order:
        spec = specs[name]
        unit = units.get(name)
        if unit is None:
            unit = make(spec)
            units.add(unit)
            if spec.unit.enabled:
                started.append(name)
        elif name in plan.restart:
            reconfigure(unit, spec)
            if spec.unit.enabled or name in active:
                restarted.append(name)
        else:
            unit.spec = spec  # unchanged but for its description
            if name in active and unit.state not in ACTIVE:  # stopped because a requirement changed
                restarted.append(name)
        schedule(unit)
    await units.start([n for n in plan.order if n in started or n in restarted], "changed by reload")
    return {"started": started, "stopped": plan.stop, "restarted": restarted,
            "kept": [n for n in plan.order if n not in started and n not in restarted],
            "kept_old": plan.kept_old, "not_loaded": plan.not_loaded}
