"""How long agentd may need to stop, and how long a service manager allows (pure functions).

A graceful stop of one unit takes at most its checkpoint (``[checkpoint]
deadline + grace``, when checkpoints are on and ``on_stop``), then the quit
keys and ``stop_timeout`` from SIGTERM to SIGKILL.  Units stop side by side,
except that a unit stops before the units it comes ``after`` or ``requires``
(the reverse of the start order), so along such a chain the times add up.
agentd itself needs :data:`SHUTDOWN_MARGIN` on top.

**The rule:** a service manager must give agentd at least
:func:`stop_budget` seconds to stop, i.e. systemd's ``TimeoutStopSec`` >=
max over the stop chains of the sum of (deadline + grace + stop_timeout),
plus 15 s.  With the defaults (300 + 15 + 10 + 15) that is 340 s; the shipped
systemd units say 360.  Else systemd kills agentd mid-checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .units import UnitSpec

#: Seconds agentd needs besides its units' stops (socket, state files, the last event).
SHUTDOWN_MARGIN = 15.0
#: The environment variable that carries the service manager's stop timeout, in microseconds.
STOP_ENV = "TIMEOUT_STOP_USEC"


@dataclass(frozen=True)
class StopBudget:
    """Seconds agentd may need to stop, and the chain of units that needs them (stopped first to last)."""

    seconds: float
    chain: tuple[str, ...] = ()


@dataclass(frozen=True)
class StopLimit:
    """Seconds a service manager allows agentd to stop, and where that figure came from."""

    seconds: float
    source: str


def unit_stop_seconds(spec: UnitSpec, default_stop_timeout: float) -> float:
    """The longest graceful stop of one unit: checkpoint (when on), then SIGTERM -> SIGKILL."""
    seconds = spec.restart.stop_timeout or default_stop_timeout
    if spec.checkpoint.enabled and spec.checkpoint.on_stop:
        seconds += spec.checkpoint.deadline + spec.checkpoint.grace
    return seconds


def stop_budget(specs: Mapping[str, UnitSpec], default_stop_timeout: float) -> StopBudget:
    """The longest stop chain (``after``/``requires``, stopped in reverse) plus :data:`SHUTDOWN_MARGIN`."""
    memo: dict[str, tuple[float, tuple[str, ...]]] = {}
    visiting: set[str] = set()

    def chain(name: str) -> tuple[float, tuple[str, ...]]:
        # What stops from `name` on: name itself, then the longest chain of what it depends on.
        if name in memo:
            return memo[name]
        visiting.add(name)
        spec = specs[name]
        best: tuple[float, tuple[str, ...]] = (0.0, ())
        for dep in sorted(set(spec.unit.after) | set(spec.unit.requires)):
            if dep in specs and dep not in visiting:  # a cycle is an error elsewhere; here it is cut
                best = max(best, chain(dep), key=lambda item: item[0])
        visiting.discard(name)
        memo[name] = (unit_stop_seconds(spec, default_stop_timeout) + best[0], (name, *best[1]))
        return memo[name]

    longest: tuple[float, tuple[str, ...]] = (0.0, ())
    for name in sorted(specs):
        longest = max(longest, chain(name), key=lambda item: item[0])
    return StopBudget(longest[0] + SHUTDOWN_MARGIN, longest[1])


def shutdown_seconds(budget: StopBudget, limit: StopLimit | None) -> tuple[float, str]:
    """The one budget a stop of the daemon gives its units, and where it comes from.

    The units' longest stop chain (:func:`stop_budget`, without agentd's own margin), cut to what
    the service manager allows less :data:`SHUTDOWN_MARGIN` (never below half of what it allows).
    """
    units = max(0.0, budget.seconds - SHUTDOWN_MARGIN)
    if limit is None or limit.seconds == math.inf:
        return units, "the units' checkpoint deadlines and stop timeouts"
    allowed = max(limit.seconds - SHUTDOWN_MARGIN, limit.seconds / 2)
    if allowed < units:
        return allowed, f"{limit.source} ({limit.seconds:g}s, less {min(SHUTDOWN_MARGIN, limit.seconds / 2):g}s for agentd)"
    return units, "the units' checkpoint deadlines and stop timeouts"


def timeout_stop_sec(budget: StopBudget) -> int:
    """A ``TimeoutStopSec=`` value that covers ``budget`` (whole seconds, rounded up)."""
    return math.ceil(budget.seconds)


def stop_limit(setting: float | None, environ: Mapping[str, str], where: str = "environment") -> StopLimit | None:
    """The ``service_stop_timeout`` setting, else ``$TIMEOUT_STOP_USEC`` from ``environ``; None when neither.

    Raises ValueError for a ``TIMEOUT_STOP_USEC`` that is not a whole number of microseconds.
    """
    if setting is not None:
        return StopLimit(setting, "the service_stop_timeout setting")
    raw = environ.get(STOP_ENV, "").strip()
    if not raw:
        return None
    if raw == "infinity":
        return StopLimit(math.inf, f"${STOP_ENV} ({where})")
    if not raw.isdigit():
        raise ValueError(f"${STOP_ENV}={raw!r} ({where}) is not a number of microseconds")
    usec = int(raw)
    return StopLimit(math.inf if usec == 0 else usec / 1e6, f"${STOP_ENV} ({where})")


def stop_problem(budget: StopBudget, limit: StopLimit) -> str | None:
    """Why ``limit`` is too short for ``budget`` (one line), or None."""
    if budget.seconds <= limit.seconds:
        return None
    chain = " then ".join(budget.chain) or "no unit"
    return (f"stopping may take {budget.seconds:g} s ({chain}: checkpoint deadline + grace + stop_timeout, "
            f"plus {SHUTDOWN_MARGIN:g} s for agentd) but {limit.source} allows {limit.seconds:g} s: "
            f"set TimeoutStopSec={timeout_stop_sec(budget)} or more, or lower [checkpoint] deadline")
