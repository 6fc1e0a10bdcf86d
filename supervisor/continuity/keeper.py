"""Keep what a session leaves behind: its trail and its uncommitted work, whatever ended it.

The daemon calls a :class:`Keeper` at each moment a session ends (a
checkpoint, a crash, a stop, a restart, a scope revert, a scheduled stop),
whether or not the agent cooperated.  :class:`UnitKeeper`, the real one:

1. reads the agent's own trail (the adapter's ``trail()``: Codex's rollout,
   Claude Code's transcript, a generic agent's screen), redacting secrets;
2. saves the scope's uncommitted files as a WIP commit
   (:func:`~supervisor.memory.wip.save_wip`; HEAD, the index and the work
   tree untouched);
3. writes :class:`~.stopped.Stopped` for the next wakeup's "Where you stopped";
   after a crash of a session that never wrote its "State at interruption",
   that line names the crashed session (:func:`crash_state`), so the task no
   longer points at an older session as if it were the last;
4. counts how the session came back after the one before it (issue 16:
   :func:`supervisor.report.gather.after_session`), kept in the result
   (``Kept.resumed``, in the history entry as ``stopped.resumed``).

:meth:`UnitKeeper.recall` checks the probes of a respawn against what the new
session received (the cycle calls it; :mod:`supervisor.report.probes`).

Each step that fails is a note in the result, never an exception: keeping is
best effort and must never stop a cycle, a restart or a stop.  Blocking (git,
file reads): the daemon runs it in a thread.
"""

from __future__ import annotations

import asyncio
import enum
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from ..session.redact import redact_text
from .policy import Trigger
from ..trail.model import Trail
from . import stopped as store
from .stopped import Stopped

#: What agentd itself types starts like this; such messages are not the agent's ask.
AGENTD_PREFIXES = ("# Wakeup briefing", "CHECKPOINT requested by agentd", "agentd started this session from a briefing",
                   "agentd: ", "global decision recorded: ")


#: The most of one ask that is kept (the wakeup shows less).
ASK_KEEP = 4000


class Moment(str, enum.Enum):
    """Why a session's work is kept now."""

    CHECKPOINT = "checkpoint"
    CRASH = "crash"
    STOP = "stop"
    RESTART = "restart"
    REVERT = "scope revert"
    SCHEDULED_STOP = "scheduled stop"
    USAGE_LIMIT = "usage limit"


@dataclass(frozen=True)
class Kept:
    """What one keep did: the record written (None if it could not be), the WIP commit, notes."""

    stopped: Stopped | None
    wip: str | None = None
    notes: tuple[str, ...] = ()
    resumed: dict[str, Any] | None = None  # how this session came back (supervisor/report/figures.py)

    def summary(self) -> dict[str, Any] | None:
        """For the cycle's history entry."""
        if self.stopped is None:
            return {"notes": list(self.notes)} if self.notes else None
        return {**self.stopped.summary(), **({"resumed": self.resumed} if self.resumed is not None else {})}


class Keeper(Protocol):
    """Keeps a session's trail and work (blocking; the daemon runs it in a thread)."""

    def keep(self, moment: Moment, session: str | None, trail: Callable[[], Trail | None]) -> Kept: ...


def moment_for(trigger: Trigger, why: str | None = None) -> Moment:
    """The moment a cycle's (or a stop's) keep happens at, from its trigger and the reason given."""
    text = (why or "").lower()
    if text.startswith("scheduled"):
        return Moment.SCHEDULED_STOP
    if trigger is Trigger.RESTART or text.startswith("restart"):
        return Moment.RESTART
    if trigger is Trigger.STOP:
        return Moment.STOP
    return Moment.CHECKPOINT


async def keep(keeper: Keeper, moment: Moment, session: str | None, trail: Callable[[], Trail | None]) -> Kept:
    """Run ``keeper`` in a thread; whatever goes wrong is a note in the result, never an exception."""
    try:
        return await asyncio.to_thread(keeper.keep, moment, session, trail)
    except Exception as exc:  # noqa: BLE001 - keeping is best effort: the caller goes on
        return Kept(None, None, (f"keeping the work failed: {type(exc).__name__}: {exc}",))


class UnitKeeper:
    """The :class:`Keeper` of one unit in the project at ``root`` (see the module docstring)."""

    def __init__(self, root: Path, unit: str, module: str, scope: Sequence[str], *,
                 env: Mapping[str, str] | None = None, prompt: str | None = None,
                 clock: Callable[[], float] = time.time, forbid: Sequence[str] = ()) -> None:
        self.root, self.unit, self.module, self.scope = Path(root), unit, module, list(scope)
        self.forbid = list(forbid)  # the scope's forbidden paths: an edit there is a constraint break
        self.env = env  # the unit's environment: its secret values are redacted from what is kept
        self.prompt = prompt  # the unit's checkpoint prompt (agentd's, not an ask)
        self.clock = clock

    def agentd_text(self, text: str) -> bool:
        """True for a message agentd typed (its wakeup, its checkpoint prompt, its notices)."""
        head = text.lstrip()
        if head.startswith(AGENTD_PREFIXES):
            return True
        return bool(self.prompt) and head[:80] == self.prompt.lstrip()[:80]

    def keep(self, moment: Moment, session: str | None, trail: Callable[[], Trail | None]) -> Kept:
        from ..memory.wip import WipError, save_wip

        notes: list[str] = []
        found: Trail | None = None
        try:
            found = trail()
        except Exception as exc:  # noqa: BLE001 - a trail we cannot read is a note, not a failure
            notes.append(f"could not read the agent's trail: {type(exc).__name__}: {exc}")
        if found is not None:
            found = found.mapped(lambda text: redact_text(text, self.env))
            found.asks = [a[:ASK_KEEP] for a in found.asks if not self.agentd_text(a)]  # not agentd's wakeups
            notes.extend(found.notes)
        wip = None
        try:
            wip = save_wip(self.root, self.unit, self.scope, moment=moment.value, session=session)
        except WipError as exc:
            notes.append(f"no WIP commit: {exc}")
        except Exception as exc:  # noqa: BLE001 - never let a git problem stop the caller
            notes.append(f"no WIP commit: {type(exc).__name__}: {exc}")
        record = Stopped(unit=self.unit, module=self.module, session=session, moment=moment.value,
                         time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())), trail=found,
                         wip=wip.as_dict() if wip else None,
                         uncommitted=[c.describe() for c in wip.changes] + ([f"... {wip.more} more"] if wip and wip.more else [])
                         if wip else [], stat=wip.stat if wip else "", notes=notes)
        self._carry(record)
        if moment is Moment.CRASH and session:
            try:
                crash_state(self.root, self.module, session, record.time, self.clock())
            except Exception as exc:  # noqa: BLE001 - the task line is best effort, like the rest
                notes.append(f"could not note the crash in the task's state: {type(exc).__name__}: {exc}")
        resumed = self._figures(session, found, notes)
        try:
            store.save(self.root, record)
        except OSError as exc:
            notes.append(f"could not write the record of where the agent stopped: {exc}")
            return Kept(None, wip.commit if wip else None, tuple(notes), resumed)
        return Kept(record, wip.commit if wip else None, tuple(notes), resumed)

    def _figures(self, session: str | None, trail: Trail | None, notes: list[str]) -> dict[str, Any] | None:
        """How this session came back, against the one before it (issue 16; best effort)."""
        from ..report.gather import after_session
        from ..trail.generic import SCREEN_SOURCE

        try:
            generic = trail is not None and trail.source == SCREEN_SOURCE  # a screen: no edits, no tokens
            figures = after_session(self.root, self.unit, session, trail, scope=self.scope, forbid=self.forbid,
                                    generic=generic, module=self.module)
        except Exception as exc:  # noqa: BLE001 - the report never stops a keep
            notes.append(f"no report figures: {type(exc).__name__}: {exc}")
            return None
        return figures.as_dict() if figures is not None else None

    def recall(self, delivered: str | None) -> dict[str, Any]:
        """Probe recall of the session just started from ``delivered`` (issue 16; blocking)."""
        from .recallprobe import recall

        return recall(self.root, self.unit, self.module, delivered).as_dict()

    def _carry(self, record: Stopped) -> None:
        """The ask and the plan of an earlier session, when this one had none of its own (e.g. it
        was killed right after its wakeup)."""
        trail = record.trail
        record.ask = trail.last_ask(self.agentd_text) if trail is not None else None  # redacted with the trail
        if record.ask is not None and trail is not None and trail.plan:
            return
        try:
            before = store.load(self.root, self.unit)
        except Exception:  # noqa: BLE001 - nothing to carry
            return
        if before is None:
            return
        if record.ask is None and before.ask:
            record.ask, record.ask_from = before.ask, before.ask_from or before.session
        if before.trail is not None and before.trail.plan:
            if record.trail is None:
                record.trail = Trail(source="no trail of this session")
            if not record.trail.plan:
                record.trail.plan = list(before.trail.plan)
                record.plan_from = before.plan_from or before.session


#: How :func:`crash_state` begins the state line (and finds its own, not to nest them).
_CRASHED = re.compile(r"^session \S+ ended \(crash\) at \S+ before it wrote its state[^;]*; the state before it: ")


def session_started(session: str) -> float | None:
    """When a session started, from its id (``20261130T143200.123456-1a2b3c``, UTC; session/pty.py), or None."""
    try:
        return datetime.strptime(session[:22], "%Y%m%dT%H%M%S.%f").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def crash_state(root: Path, module: str, session: str, when: str, now: float) -> str | None:
    """After ``session`` crashed: when its task's "State at interruption" (the module's own task, else the global
    one) holds a state written before the session started, that state is an older session's: the module's state
    then names the crashed one, keeping what the older state said.  Returns the new state, or None when the line
    was left (the session wrote its own, or there is none)."""
    from ..memory.store import AgentPaths
    from ..memory.task import read_task, update_task_state

    paths = AgentPaths(Path(root))
    mod = None if module in ("", "global") else module
    shown = paths.task(mod) if mod is None or paths.task(mod).exists() else paths.task(None)
    started = session_started(session)
    try:
        written = shown.stat().st_mtime
    except OSError:
        written = None
    if started is None or (written is not None and written >= started) or started > now:
        return None  # it wrote its state (or someone did) since it started; or the id says no start
    info = read_task(paths, None if shown == paths.task(None) else mod)
    if info.state_empty:
        return None  # no state of an older session to mistake for this one's
    old = _CRASHED.sub("", info.state)
    state = (f"session {session} ended (crash) at {when} before it wrote its state: see \"Where you stopped\"; "
             f"the state before it: {old or '(not set)'}")
    update_task_state(paths, state, module=mod)
    return state
