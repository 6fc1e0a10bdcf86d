"""The restart policy: what a unit's exit leads to (``Restart | GiveUp | StayDown``).

Pure policy: no processes, no clock of its own (callers pass ``now``), so every
rule here is testable by replaying histories.  The states and the table of
legal transitions are :mod:`supervisor.unitstate` (a leaf both the daemon and
the continuity cycle read); they are named here too, for the daemon's modules.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..session.process import ExitInfo
from ..unitstate import (  # noqa: F401 - the daemon's modules name the states through here
    BACKOFF,
    CHECKPOINTING,
    ERROR,
    FAILED,
    INACTIVE,
    RESPAWNING,
    RUNNING,
    STARTING,
    STOPPING,
    TRANSITIONS,
    WAITING,
    IllegalTransition,
    UnitState,
    check_transition,
)


@dataclass(frozen=True)
class RestartConfig:
    """The numbers of a unit's ``[restart]`` section that policy needs."""

    policy: str = "on-failure"  # no | on-failure | always
    initial_delay: float = 1.0
    max_delay: float = 300.0
    multiplier: float = 2.0
    reset_after: float = 600.0
    burst: int = 5
    interval: float = 300.0

    @classmethod
    def of(cls, section: Any) -> RestartConfig:
        """The numbers of a unit's ``[restart]`` section (``config.units.RestartSection``)."""
        return cls(**{name: getattr(section, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Restart:
    """Decision: start again after ``delay`` seconds."""

    delay: float


@dataclass(frozen=True)
class GiveUp:
    """Decision: go to ``failed`` and stay there until reset-failed."""

    reason: str


@dataclass(frozen=True)
class StayDown:
    """Decision: the policy does not restart this exit; go inactive."""

    reason: str


Decision = Restart | GiveUp | StayDown


@dataclass
class RestartTracker:
    """Backoff and windowed start limit for one unit.

    ``record_start(now)`` is called for every start attempt; ``on_exit`` decides
    what happens after an exit that nobody commanded.  Backoff grows by
    ``multiplier`` per consecutive failure up to ``max_delay`` and resets once a
    session has stayed up for ``reset_after`` seconds.  The start limit counts
    starts inside a sliding ``interval``: more than ``burst`` ends in ``failed``.
    """

    config: RestartConfig
    starts: deque[float] = field(default_factory=deque)
    consecutive_failures: int = 0

    def record_start(self, now: float) -> None:
        self.starts.append(now)
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.starts and now - self.starts[0] > self.config.interval:
            self.starts.popleft()

    def reset(self) -> None:
        self.starts.clear()
        self.consecutive_failures = 0

    def next_delay(self) -> float:
        cfg = self.config
        delay = cfg.initial_delay * (cfg.multiplier ** max(0, self.consecutive_failures - 1))
        return min(delay, cfg.max_delay)

    def on_exit(self, exit: ExitInfo, uptime: float, now: float) -> Decision:
        cfg = self.config
        if uptime >= cfg.reset_after:
            self.consecutive_failures = 0
            self.starts.clear()
        if cfg.policy == "no":
            return StayDown(f"{exit.describe()}; restart policy is 'no'")
        if cfg.policy == "on-failure" and exit.success:
            return StayDown("exited cleanly (exit 0); restart policy is 'on-failure'")
        self.consecutive_failures += 1
        self._trim(now)
        if len(self.starts) >= cfg.burst:
            return GiveUp(
                f"start limit hit: {len(self.starts)} starts within {cfg.interval:g}s "
                f"(burst {cfg.burst}); last {exit.describe()}"
            )
        return Restart(self.next_delay())

    def on_spawn_error(self, message: str, now: float) -> Decision:
        """A start attempt that failed before the agent ran at all."""
        return self.on_exit(ExitInfo(code=127), 0.0, now) if self.config.policy != "no" else StayDown(message)
