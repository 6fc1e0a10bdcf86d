"""Whether a stop asks the agent for its notes first, and for how long (pure).

A graceful stop runs the continuity cycle ending in a stop (checkpoint, verify,
quit) unless the checkpoint cannot help or cannot fit:

* the agent cannot take a turn: its process is stopped (SIGSTOP), the adapter
  says the session cannot go on (the model server is unreachable), it shows a
  blocking screen (a login, trust or approval screen), a freeze that keeps it
  from its turn has been named, or it never took its wakeup (it has done
  nothing since the last checkpoint, and a prompt that never showed will not
  show now).  Waiting out a checkpoint deadline for such an agent would only
  hold the stop up;
* the stop's budget (one for the whole daemon, inside the service manager's
  ``TimeoutStopSec``) leaves no room for it after the agent's ``stop_timeout``
  and :data:`STOP_RESERVE`.

The caller passes what it sees (:class:`AtStop`) and the seconds left
(``room``); :func:`at_stop` returns :class:`CheckpointFirst` (with the
deadline the checkpoint may use) or :class:`AtOnce` (with why, which status
and ``agentd stop`` say).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.units import UnitSpec

#: Seconds a stop keeps back, besides the agent's stop_timeout: the quit keys, keeping the work, agentd's steps.
STOP_RESERVE = 5.0
#: A checkpoint with less time than this is not worth asking for.
MIN_CHECKPOINT = 3.0


@dataclass(frozen=True)
class AtStop:
    """What a stop sees of the running session."""

    process_stopped: bool = False  # the agent's process is stopped (state T: SIGSTOP, a debugger)
    failure: str | None = None  # the adapter's reason the session cannot go on
    blocked: str | None = None  # a blocking screen: its kind and what to do
    frozen: str | None = None  # a freeze that keeps it from taking a turn, named: its detail
    wakeup: str | None = None  # its wakeup's delivery state ("pending", "failed: ...", "delivered ...")


@dataclass(frozen=True)
class CheckpointFirst:
    """Checkpoint, waiting for the agent at most ``deadline`` seconds, then stop."""

    deadline: float


@dataclass(frozen=True)
class AtOnce:
    """Stop without a checkpoint, because ``why``."""

    why: str


def cannot_take_a_turn(seen: AtStop) -> str | None:
    """Why the agent cannot take a turn now (so a checkpoint would only wait), or None."""
    if seen.process_stopped:
        return "its process is stopped (SIGSTOP)"
    if seen.failure:
        return seen.failure
    if seen.blocked:
        return f"blocked: {seen.blocked}"
    if seen.frozen:
        return f"frozen: {seen.frozen}"
    if seen.wakeup == "pending":
        return "it has not taken its wakeup yet (nothing to checkpoint)"
    if seen.wakeup is not None and seen.wakeup.startswith("failed"):
        return f"its wakeup was never taken ({seen.wakeup})"
    return None


def room_for_checkpoint(room: float, stop_timeout: float) -> float:
    """Of ``room`` seconds left to stop, those a checkpoint may use (the rest ends the session)."""
    return room - stop_timeout - STOP_RESERVE


def at_stop(spec: UnitSpec, seen: AtStop, room: float | None, stop_timeout: float) -> CheckpointFirst | AtOnce:
    """Checkpoint first (and for how long) or stop at once (and why); ``room``: seconds left of the
    stop's budget (None: no budget beyond the unit's own checkpoint deadline)."""
    reason = cannot_take_a_turn(seen)
    if reason is not None:
        return AtOnce(f"no checkpoint: the agent cannot take a turn: {reason}")
    deadline = spec.checkpoint.deadline
    if room is not None:
        usable = room_for_checkpoint(room, stop_timeout)
        if usable < MIN_CHECKPOINT:
            return AtOnce(f"no checkpoint: {max(room, 0):.0f}s left of the stop budget, "
                          f"and ending the agent may take {stop_timeout:g}s")
        deadline = min(deadline, usable)
    return CheckpointFirst(deadline)
