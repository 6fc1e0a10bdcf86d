"""What a reload does, decided as a pure function of the old and new unit files.

* a unit whose file is gone is stopped (through a checkpoint) and removed;
* a unit whose file is now invalid keeps running as it was (the error is reported);
* a new unit is added (and started when enabled);
* a unit whose settings changed is stopped and started again with them;
* a unit whose file changed only in its description is kept, untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..config.units import UnitError, UnitSpec, start_order


@dataclass(frozen=True)
class ReloadPlan:
    order: list[str] = field(default_factory=list)  # the new units, in start order
    stop: list[str] = field(default_factory=list)  # removed: stop and drop
    restart: list[str] = field(default_factory=list)  # changed: stop, then start with the new spec


def plan_reload(old: Mapping[str, UnitSpec], new: Mapping[str, UnitSpec], errors: Sequence[UnitError]) -> ReloadPlan:
    broken = {e.path.name.removesuffix(".toml") for e in errors if e.path.name.endswith(".toml")}
    removed = sorted(n for n in old if n not in new and n not in broken)
    changed = [n for n in new if n in old and old[n].fingerprint() != new[n].fingerprint()]
    return ReloadPlan(order=start_order(dict(new)), stop=removed, restart=sorted(changed))
