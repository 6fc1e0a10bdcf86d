"""A unit's states, the legal transitions between them, and the restart policy.

Pure policy: no processes, no clock of its own (callers pass ``now``), so every
rule here is testable by replaying histories.

::

    inactive -> starting -> running -> stopping -> inactive
    running  -> (exit, not commanded) -> backoff -> starting
    backoff  -> failed            (start limit hit; reason kept; reset-failed -> inactive)
    running  -> checkpointing -> respawning -> running   (the continuity cycle)
    checkpointing -> stopping     (a graceful stop checkpoints first)
    checkpointing -> running      (the notes could not be written: the session is kept)
    running  -> stopping -> waiting -> starting          (usage limit hit: wait, resume with the wakeup)
    any      -> error -> inactive | starting             (agentd's own error handling the unit: caught, named)

An event that is stale for the unit's state (an exit reaped after a stop
already won, a backoff timer after the unit stopped) is filtered out by the
unit before it reaches :func:`check_transition`, which stays strict: an
illegal move is a bug, and the arbiter turns it into the ``error`` state of
that one unit (never the end of the daemon).
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..session.process import ExitInfo


class UnitState(str, enum.Enum):
    INACTIVE = "inactive"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    BACKOFF = "backoff"
    FAILED = "failed"
    CHECKPOINTING = "checkpointing"
    RESPAWNING = "respawning"
    WAITING = "waiting"  # the provider's usage limit: resume through the wakeup later
    ERROR = "error"  # agentd itself failed handling the unit (a bug): its session ended; start or stop leaves it


INACTIVE, STARTING, RUNNING, STOPPING, BACKOFF, FAILED, CHECKPOINTING, RESPAWNING, WAITING, ERROR = UnitState

#: Every legal transition.  Anything else is a bug and raises IllegalTransition.
#: Every state may fall into ERROR: the arbiter catches what handling one unit raised and names it there.
TRANSITIONS: dict[UnitState, frozenset[UnitState]] = {
    INACTIVE: frozenset({STARTING, ERROR}),
    # starting -> backoff / failed: the session could not be started (retry later / start limit hit);
    # starting -> stopping / inactive: stopped while starting.
    STARTING: frozenset({RUNNING, BACKOFF, FAILED, STOPPING, INACTIVE, ERROR}),
    # running -> backoff / failed / inactive: the agent exited on its own; -> waiting: a usage limit.
    RUNNING: frozenset({STOPPING, BACKOFF, FAILED, INACTIVE, CHECKPOINTING, WAITING, ERROR}),
    # the continuity cycle: checkpoint, then a fresh session (or a stop); -> running: the notes could not
    # be written (a read-only or full .agent/), so the session that holds them is kept.
    CHECKPOINTING: frozenset({RESPAWNING, STOPPING, RUNNING, ERROR}),
    RESPAWNING: frozenset({RUNNING, BACKOFF, FAILED, STOPPING, ERROR}),
    STOPPING: frozenset({INACTIVE, WAITING, ERROR}),
    WAITING: frozenset({STARTING, INACTIVE, ERROR}),
    BACKOFF: frozenset({STARTING, INACTIVE, FAILED, ERROR}),
    FAILED: frozenset({INACTIVE, STARTING, ERROR}),
    # what agentd could not handle: a stop (or reset-failed) or a start leaves it.
    ERROR: frozenset({INACTIVE, STARTING}),
}


class IllegalTransition(RuntimeError):
    """A transition that the table does not allow (a bug in the caller)."""


def check_transition(old: UnitState, new: UnitState) -> None:
    if new not in TRANSITIONS[old]:
        raise IllegalTransition(f"{old.value} -> {new.value} is not a legal transition")


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
