"""The scope guard's policy: a change -> the unit that made it -> a verdict -> the action.

The daemon only wires it: it starts the guard (:meth:`ScopeGuard.start_if_needed`
watches the project only when some scope or ``constraints.md`` restricts
something), posts each change the watcher's thread reports to its event
queue, and hands it back to :meth:`ScopeGuard.changed` on the loop; the
writes a fenced session's kernel fence refused come in through
:meth:`ScopeGuard.refused`.  The guard sees the units through two small
Protocols, :class:`Units` and :class:`Offender`; it never reaches into the daemon.

Two ways to know of a violation (``certainty`` in the record):

* ``kernel``: the fence refused a write, and the agent's own trail says so
  (:meth:`refused`).  Known with certainty; nothing was written.
* ``watcher``: a change seen on disk that exactly one active agent could
  have made (:func:`~supervisor.scope.rules.attribute`); for units without
  the fence, and for forbid globs the fence cannot enforce.  A change no
  single agent can be blamed for is never acted on: when every candidate
  would break a rule with it, it is recorded as ``ambiguous`` and logged for
  the operator, and nothing is typed to any agent.

Never a violation, whoever made it: unit files, ``.agent/`` (the daemon
writes it for the agents), agentd's state directory, and anything outside
every running agent's working directory.  Nor is a change blamed on a unit
whose writes are confined (agentd's fence, or the agent's own sandbox where
its writable directories are known: :func:`confined_permits`) to places
that do not hold it: a person's edit of ``etc/agentd.toml`` while a Codex
unit of ``src/**`` is busy is nobody's violation.  Each (unit, session, path) is acted on once:
the same file changing again (output logged inside the project) is neither
warned about nor recorded again.

Actions (``[scope] on_violation``): ``warn`` tells the agent at its next turn
end; ``revert`` puts the file back (:func:`supervisor.scope.revert.revert`)
and tells it (a kernel refusal has nothing to revert: it warns); ``stop``
stops the unit through a checkpoint.  Every violation is appended to
``<state>/violations.jsonl``.  Paths in the text typed to an agent have their
escapes made visible (:func:`supervisor.visible.visible`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, Protocol

import structlog

from ..durable import append_jsonl
from ..visible import visible
from .revert import content_digest, revert
from .rules import Candidate, Certainty, Violation, attribute, check, forbid_globs_from_constraints

log = structlog.get_logger("agentd.scope")

#: Remembered (unit, session, path) triples already acted on, at most (then forgotten all at once).
DEDUP_LIMIT = 10000


class Offender(Protocol):
    """A unit, as the guard acts on it."""

    name: str
    violations: int
    def session_id(self) -> str | None: ...
    async def before_revert(self, path: str) -> Any: ...  # keep the running session's work (a WIP commit)
    def warn(self, text: str) -> Any: ...
    async def stop(self, why: str, checkpoint: bool = True) -> None: ...


class Units(Protocol):
    """The daemon's units, as the guard sees them."""

    def candidates(self, now: float) -> list[Candidate]: ...
    def rules(self, name: str) -> Candidate | None: ...
    def offender(self, name: str) -> Offender | None: ...
    def restricts(self) -> bool: ...


def _inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` ('/'-separated), or None when it is outside."""
    try:
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None
    return "" if rel == "." else rel


def confined_permits(root: Path, fence: Any = None, sandbox: Any = None,
                     workdir: Path | None = None) -> Callable[[str], bool] | None:
    """Whether a running session can write a project path at all (None: it is not confined, anything goes).

    ``fence`` is agentd's (:class:`~supervisor.scope.fencing.UnitFence`); else ``sandbox`` is the agent's own
    (:class:`~supervisor.adapters.base.Sandbox`): not bypassed and with its writable directories known (Codex's
    permission profile, whose workdir is not writable by itself; Claude Code's acceptEdits, which also writes
    its workdir), a path outside them is one it cannot have written.  A sandbox the person set in ``[agent]
    command`` is not known: None.
    """
    root = Path(root)
    if fence is not None:
        return lambda rel: fence.permits(root / rel)
    if sandbox is None or sandbox.bypassed or not sandbox.writable or sandbox.mode not in ("workspace-write", "acceptEdits"):
        return None
    dirs = [Path(os.path.realpath(d)) for d in sandbox.writable]
    if sandbox.mode == "acceptEdits" and workdir is not None:
        dirs.append(Path(os.path.realpath(workdir)))

    def permits(rel: str) -> bool:
        target = Path(os.path.realpath(root / rel))
        return any(target == d or d in target.parents for d in dirs)

    return permits


def candidate(name: str, spec: Any, root: Path, busy: bool, silent_for: float,
              permits: Callable[[str], bool] | None = None) -> Candidate | None:
    """A running unit as a possible author of a change (None when its workdir is outside the project)."""
    from .fencing import writable_paths

    workdir = _inside(spec.workdir_path(root), root)
    if workdir is None:
        return None
    scope = spec.scope
    writable = [w for w in (_inside(p, root) for p in writable_paths(root, scope.writable)) if w]
    return Candidate(name, workdir, list(scope.paths), list(scope.forbid), list(scope.shared), busy=busy,
                     last_output_age=silent_for, writable=writable, permits=permits)


def latest_snapshot(root: Path) -> dict[str, Any] | None:
    from ..memory.snapshots import list_ids, load
    from ..memory.store import AgentPaths

    paths = AgentPaths(root)
    ids = list_ids(paths)
    return load(paths, ids[-1]) if ids else None


class ScopeGuard:
    """Watches the project (when needed), judges each change and each refusal, acts once per path."""

    def __init__(self, root: Path, state_dir: Path, units: Units, post: Callable[[str], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], Any], clock: Callable[[], float] = time.monotonic,
                 *, units_dir: Path | None = None) -> None:
        self.root = root
        self.state_dir = state_dir
        self.units = units
        self.post = post  # thread-safe: hand a changed path to the daemon's event queue
        self.spawn = spawn
        self.clock = clock
        self.watcher: Any = None
        self._own_writes: dict[str, str] = {}  # path -> digest of what a revert wrote
        self._never = [p for p in (".agent", _inside(state_dir, root), _inside(units_dir, root) if units_dir else None)
                       if p]  # (the project root itself is never one of them)
        self._acted: set[tuple[str | None, str | None, str]] = set()

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

        try:  # agentd's state directory is never watched, wherever it is (its transcripts change all the time)
            self.watcher = ChangeWatcher(self.root, self.post, ignore_paths=self._never)
            self.watcher.start()
        except (OSError, RuntimeError) as exc:
            self.watcher = None
            log.error("scope_guard_unavailable", error=str(exc))

    async def stop(self) -> None:
        if self.watcher is not None:
            await asyncio.to_thread(self.watcher.stop)
            self.watcher = None

    # ------------------------------------------------------------------ change -> verdict
    def never(self, rel: str) -> bool:
        """True for paths that are never a violation: unit files, ``.agent/``, agentd's state directory."""
        return any(rel == p or rel.startswith(p + "/") for p in self._never)

    def _first(self, unit: str | None, session: str | None, path: str) -> bool:
        """True the first time (unit, session, path) is seen: a violation is acted on once."""
        key = (unit, session, path)
        if key in self._acted:
            return False
        if len(self._acted) >= DEDUP_LIMIT:
            self._acted.clear()
        self._acted.add(key)
        return True

    def judge(self, rel: str, candidates: Iterable[Candidate]) -> tuple[str, Violation, str] | None:
        """(unit, violation, why it is that unit) for a change that breaks a rule, else None.

        A change that every one of several active units would break a rule
        with is recorded for the operator here (``ambiguous``), never blamed.
        """
        pool = list(candidates)
        if not pool or self.never(rel):
            return None
        who = attribute(rel, pool)
        if who.unit is None:
            if who.suspect:
                self._ambiguous(rel, [c for c in pool if c.unit in who.candidates], who.why)
            else:
                log.info("change_not_blamed", path=visible(rel), candidates=who.candidates, why=who.why)
            return None
        unit = next(c for c in pool if c.unit == who.unit)
        violation = check(rel, unit.allowed_paths, unit.forbid, self.global_forbid())
        return (who.unit, violation, who.why) if violation is not None else None

    def changed(self, rel: str) -> None:
        """A file changed (on the loop): judge it, and act on a violation (once per unit, session and path)."""
        own = self._own_writes.pop(rel, None)
        if own is not None and content_digest(self.root / rel) == own:
            return  # our own revert
        pool = self.units.candidates(self.clock())
        verdict = self.judge(rel, pool)
        if verdict is None:
            self._wrote(rel, pool)
            return
        name, violation, why = verdict
        offender = self.units.offender(name)
        if offender is not None and self._first(name, offender.session_id(), rel):
            self.spawn(self.act(offender, violation, why))

    def _wrote(self, rel: str, pool: list[Candidate]) -> None:
        """A change within the rules that one running unit made: it is told (its module's facts, once)."""
        if not pool or self.never(rel):
            return
        who = attribute(rel, pool).unit
        offender = self.units.offender(who) if who else None
        if offender is not None and hasattr(offender, "wrote"):
            offender.wrote(rel)

    def refused(self, name: str, paths: Iterable[Path]) -> None:
        """The fence of ``name``'s session refused writing ``paths`` (absolute): violations known with certainty."""
        offender = self.units.offender(name)
        if offender is None:
            return
        rules = self.units.rules(name)
        for path in paths:
            rel = _inside(path, self.root)
            shown = rel if rel else str(path)
            violation = check(rel, rules.allowed_paths, rules.forbid, self.global_forbid()) if rel and rules else None
            if violation is None:
                where = "outside the project" if rel is None else "outside what its fence allows"
                violation = Violation(shown, f"{where} (refused by the kernel fence)", "fence")
            if self._first(name, offender.session_id(), shown):
                self.spawn(self.act(offender, violation, "the kernel fence refused the write (EACCES)",
                                    certainty=Certainty.KERNEL))

    def _ambiguous(self, rel: str, suspects: list[Candidate], why: str) -> None:
        if not self._first(None, None, rel):
            return
        glob = self.global_forbid()
        rules = "; ".join(f"{c.unit}: {v.rule}" for c in suspects
                          if (v := check(rel, c.allowed_paths, c.forbid, glob)) is not None)
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "unit": None,
                  "candidates": [c.unit for c in suspects], "path": rel, "rule": rules, "kind": "scope",
                  "action": "none", "certainty": Certainty.AMBIGUOUS.value, "attributed": why,
                  "done": "not attributable to one agent: told the operator only"}
        self.spawn(asyncio.to_thread(append_jsonl, self.state_dir / "violations.jsonl", record))
        log.warning("scope_violation_ambiguous", **{**record, "path": visible(rel)})

    # ------------------------------------------------------------------ verdict -> action
    async def act(self, unit: Offender, violation: Violation, why: str, action: str = "",
                  certainty: Certainty = Certainty.WATCHER) -> None:
        action = action or getattr(unit, "on_violation", "warn")
        unit.violations += 1
        done = ""
        refused = certainty is Certainty.KERNEL
        if refused:
            done = "refused by the kernel: nothing was written"
            action = "warn" if action == "revert" else action
        elif action == "revert":
            await unit.before_revert(violation.path)  # best effort, never raises
            snapshot = await asyncio.to_thread(latest_snapshot, self.root)
            try:
                done = await asyncio.to_thread(revert, self.root, violation.path, snapshot, self.state_dir / "quarantine")
                self._own_writes[violation.path] = content_digest(self.root / violation.path)
            except Exception as exc:  # noqa: BLE001 - report, warn, carry on
                done = f"revert failed: {exc}"
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "unit": unit.name,
                  "session": unit.session_id(), "path": violation.path, "rule": violation.rule,
                  "kind": violation.kind, "action": action, "certainty": certainty.value, "attributed": why,
                  "done": done}
        await asyncio.to_thread(append_jsonl, self.state_dir / "violations.jsonl", record)
        log.warning("scope_violation", **{**record, "path": visible(violation.path)})
        path = visible(violation.path)
        reverted = action == "revert" and not done.startswith("revert failed")
        if refused:
            message = f"agentd: writing {path} was refused: it is {violation.rule}. "
        else:
            message = f"agentd: you changed {path}, which is {violation.rule}. " + ("agentd restored it. " if reverted else "")
        message += "Stay within your scope and the constraints in .agent/constraints.md."
        if action == "stop":
            await unit.stop(f"scope violation: {path} ({violation.rule})", checkpoint=True)
        else:
            unit.warn(message)
