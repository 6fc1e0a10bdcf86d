"""A unit's states and the legal transitions between them: the table every layer reads.

A leaf (it imports nothing of agentd) so that the daemon, which moves a unit
through these states, and the continuity cycle, which asks its host for the
next one, both depend on it and never on each other.  The restart policy
that decides *which* transition an exit takes lives in
:mod:`supervisor.daemon.lifecycle`.

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
