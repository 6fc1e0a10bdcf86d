"""The scope guard's policy: a change -> the unit that made it -> a verdict -> the action.

The daemon only wires it: it starts the guard (:meth:`ScopeGuard.start_if_needed`
watches the project only when some scope or ``constraints.md`` restricts
something), posts each change the watcher's thread reports to its event
queue, and hands it back to :meth:`ScopeGuard.changed` on the loop.  The guard
sees the units through two small Protocols, :class:`Units` and
:class:`Offender`; it never reaches into the daemon.

Actions (``[scope] on_violation``): ``warn`` tells the agent at its next turn
end; ``revert`` puts the file back (:func:`supervisor.scope.revert.revert`)
and tells it; ``stop`` stops the unit through a checkpoint.  Every violation
is appended to ``<state>/violations.jsonl``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, Protocol

import structlog

from ..durable import append_jsonl
from .revert import content_digest, revert
from .rules import Candidate, Violation, attribute, check, forbid_globs_from_constraints

log = structlog.get_logger("agentd.scope")


class Offender(Protocol):
    """A unit, as the guard acts on it."""

    name: str
    violations: int
    keeping: Any  # daemon.keeping.WorkKeeping: the unit's work is kept (a WIP commit) before a revert

    def session_id(self) -> str | None: ...
    def warn(self, text: str) -> Any: ...
    async def stop(self, why: str, checkpoint: bool = True) -> None: ...


class Units(Protocol):
    """The daemon's units, as the guard sees them."""

    def candidates(self, now: float) -> list[Candidate]: ...
    def offender(self, name: str) -> Offender | None: ...
    def restricts(self) -> bool: ...


def candidate(name: str, spec: Any, root: Path, busy: bool, silent_for: float) -> Candidate | None:
    """A running unit as a possible author of a change (None when its workdir is outside the project)."""
    try:
        workdir = spec.workdir_path(root).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
    scope = spec.scope
    return Candidate(name, "" if workdir == "." else workdir, list(scope.paths), list(scope.forbid),
                     list(scope.shared), busy=busy, last_output_age=silent_for)


def latest_snapshot(root: Path) -> dict[str, Any] | None:
    from ..memory.snapshots import list_ids, load
    from ..memory.store import AgentPaths

    paths = AgentPaths(root)
    ids = list_ids(paths)
    return load(paths, ids[-1]) if ids else None


class ScopeGuard:
    """Watches the project (when needed) and judges each change."""

    def __init__(self, root: Path, state_dir: Path, units: Units, post: Callable[[str], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], Any], clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.state_dir = state_dir
        self.units = units
        self.post = post  # thread-safe: hand a changed path to the daemon's event queue
        self.spawn = spawn
        self.clock = clock
        self.watcher: Any = None
        self._own_writes: dict[str, str] = {}  # path -> digest of what a revert wrote

    # ------------------------------------------------------------------ wiring
    def global_forbid(self) -> list[str]:
        try:
            text = (self.root / ".agent" / "constraints.md").read_text(errors="replace")
        except OSError:
            return []
        return forbid_globs_from_constraints(text)

    def start_if_needed(self) -> None:
        """Watch the project only when a unit's scope or constraints.md restricts something."""
        if self.watcher is not None or not (self.units.restricts() or self.global_forbid()):
            return
        from .watcher import ChangeWatcher

        try:
            self.watcher = ChangeWatcher(self.root, self.post)
            self.watcher.start()
        except (OSError, RuntimeError) as exc:
            self.watcher = None
            log.error("scope_guard_unavailable", error=str(exc))

    async def stop(self) -> None:
        if self.watcher is not None:
            await asyncio.to_thread(self.watcher.stop)
            self.watcher = None

    # ------------------------------------------------------------------ change -> verdict
    def judge(self, rel: str, candidates: Iterable[Candidate]) -> tuple[str, Violation, str] | None:
        """(unit, violation, why it is that unit) for a change that breaks a rule, else None."""
        pool = list(candidates)
        if not pool:
            return None
        who = attribute(rel, pool)
        if who.unit is None:
            log.info("change_unattributed", path=rel, candidates=who.candidates, why=who.why)
            return None
        unit = next(c for c in pool if c.unit == who.unit)
        violation = check(rel, unit.scope, unit.forbid, self.global_forbid())
        return (who.unit, violation, who.why) if violation is not None else None

    def changed(self, rel: str) -> None:
        """A file changed (on the loop): judge it, and act on a violation."""
        own = self._own_writes.pop(rel, None)
        if own is not None and content_digest(self.root / rel) == own:
            return  # our own revert
        verdict = self.judge(rel, self.units.candidates(self.clock()))
        if verdict is None:
            return
        name, violation, why = verdict
        offender = self.units.offender(name)
        if offender is not None:
            self.spawn(self.act(offender, violation, why))

    # ------------------------------------------------------------------ verdict -> action
    async def act(self, unit: Offender, violation: Violation, why: str, action: str = "") -> None:
        action = action or getattr(unit, "on_violation", "warn")
        unit.violations += 1
        done = ""
        if action == "revert":
            await unit.keeping.before_revert(violation.path)  # best effort, never raises
            snapshot = await asyncio.to_thread(latest_snapshot, self.root)
            try:
                done = await asyncio.to_thread(revert, self.root, violation.path, snapshot, self.state_dir / "quarantine")
                self._own_writes[violation.path] = content_digest(self.root / violation.path)
            except Exception as exc:  # noqa: BLE001 - report, warn, carry on
                done = f"revert failed: {exc}"
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "unit": unit.name,
                  "session": unit.session_id(), "path": violation.path, "rule": violation.rule,
                  "kind": violation.kind, "action": action, "attributed": why, "done": done}
        await asyncio.to_thread(append_jsonl, self.state_dir / "violations.jsonl", record)
        log.warning("scope_violation", **record)
        reverted = action == "revert" and not done.startswith("revert failed")
        message = (f"agentd: you changed {violation.path}, which is {violation.rule}. "
                   + ("agentd restored it. " if reverted else "")
                   + "Stay within your scope and the constraints in .agent/constraints.md.")
        if action == "stop":
            await unit.stop(f"scope violation: {violation.path} ({violation.rule})", checkpoint=True)
        else:
            unit.warn(message)
