"""The real side of the runner's two Protocols: the daemon's units, and the repository with the checks.

:class:`DaemonUnits` (``runner.Units``) reads and drives the daemon's units
through their own public methods, the ones the control commands use: a
fresh session is a stop without checkpoint (the task boundary is the
checkpoint: its work is committed or kept) and a start, so the wakeup, with
the module's task file, is the first thing the agent reads; text for the
agent goes through the unit's conversation queue (typed at its turn end, made
safe by the adapter's encoder).

:class:`RepoWorkshop` (``runner.Workshop``) does the blocking work off the
loop, one repository operation at a time: :mod:`.integrate` (pygit2) and
:mod:`.checks`, the module's task file (:func:`supervisor.memory.update_task_state`)
and the report.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..continuity.records import StartReason
from .checks import CheckSetup, run_checks
from .integrate import Candidate, PlanRepo
from .runner import UnitLook
from .spec import PlanSpec, TaskSpec
from .state import PlanState, PlanStore


class DaemonUnits:
    """``runner.Units`` over the daemon's unit table (:class:`supervisor.daemon.table.UnitTable`)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def look(self, name: str) -> UnitLook | None:
        unit = self.table.get(name)
        if unit is None:
            return None
        driver = unit.driver
        if driver is None:
            return UnitLook(unit.state.value, None, 0, True, None, unit.violations, None, unit.reason,
                            len(unit.talk.sends))
        figure = driver.context()
        return UnitLook(unit.state.value, driver.session_id, driver.turns_ended, driver.idle,
                        figure.used if figure is not None else None, unit.violations,
                        unit.watch.frozen_now(driver.session_id), unit.reason, len(unit.talk.sends))

    async def fresh_session(self, name: str, why: str) -> str | None:
        unit = self.table.get(name)
        if unit is None:
            return f"no unit {name!r} is loaded"
        if getattr(self.table, "stopping_all", False):
            return "the daemon is stopping"
        if unit.state.value not in ("inactive", "failed"):
            await unit.stop(why, checkpoint=False)
        await self.table.start([name], why, StartReason.START)
        if unit.state.value != "running":
            return unit.reason or f"it is {unit.state.value}"
        return None

    async def stop(self, name: str, why: str, checkpoint: bool) -> None:
        unit = self.table.get(name)
        if unit is not None:
            await unit.stop(why, checkpoint=checkpoint)

    def tell(self, name: str, text: str) -> bool:
        unit = self.table.get(name)
        if unit is None or unit.driver is None:
            return False
        return bool(unit.talk.queue(text).get("queued"))


class RepoWorkshop:
    """``runner.Workshop`` for one plan run in the project at ``root``."""

    def __init__(self, root: Path, spec: PlanSpec, store: PlanStore, unit_spec: Callable[[str], Any],
                 environment: Callable[[Any], Mapping[str, str]], containment: Callable[[], Any],
                 exclude: tuple[str, ...] = (".agent/",)) -> None:
        self.root, self.spec, self.store = Path(root), spec, store
        self.unit_spec, self.environment, self.containment = unit_spec, environment, containment
        self.exclude = exclude
        self._lock = threading.Lock()
        self._repo: PlanRepo | None = None

    def _git(self, fn: Callable[[PlanRepo], Any]) -> Any:
        with self._lock:
            if self._repo is None:
                self._repo = PlanRepo(self.root, self.exclude)
            return fn(self._repo)

    async def _run(self, fn: Callable[[PlanRepo], Any]) -> Any:
        return await asyncio.to_thread(self._git, fn)

    def _scope(self, unit: str) -> tuple[str, ...]:
        return tuple(self.unit_spec(unit).scope.paths)

    async def snapshot(self, unit: str) -> str:
        scope = self._scope(unit)
        return await self._run(lambda r: r.snapshot(scope))

    async def candidate(self, unit: str, tip: str, base: str, claimed: str) -> Candidate:
        scope = self._scope(unit)
        return await self._run(lambda r: r.candidate(tip, scope, base, claimed))

    async def check(self, task: TaskSpec, attempt: int, tree: str) -> list[dict[str, Any]]:
        spec = self.unit_spec(task.unit)
        prefix = await self._run(lambda r: r.prefix.rstrip("/"))
        from ..adapters.confine import limits_of

        from ..scope.fencing import hidden_state

        setup = CheckSetup(task.unit, dict(self.environment(spec)), self.containment(), prefix=prefix,
                           limits=limits_of(spec), hidden=hidden_state(self.store.dir.parent.parent))
        labels = {"AGENTD_PLAN": self.spec.name, "AGENTD_TASK": task.id, "AGENTD_ATTEMPT": str(attempt)}
        return await run_checks(setup, lambda dest: self._git(lambda r: r.materialize(tree, dest)), task.done_when,
                                self.store.work_dir(), self.store.check_log(task.id, attempt), task.check_timeout,
                                labels)

    async def commit(self, expected: str, tree: str, message: str) -> str:
        branch = self.spec.branch
        return await self._run(lambda r: r.commit(branch, expected, tree, message))

    async def find_commit(self, since: str, task: str, tree: str | None) -> str | None:
        branch, plan = self.spec.branch, self.spec.name
        return await self._run(lambda r: r.find_commit(branch, since, plan, task, tree))

    async def diffstat(self, commit: str) -> dict[str, Any]:
        return await self._run(lambda r: r.diffstat(commit))

    async def keep(self, task: str, unit: str, tip: str, base: str | None, work: str) -> str | None:
        scope, plan = self._scope(unit), self.spec.name

        def keep(r: PlanRepo) -> str | None:
            cand = r.candidate(tip, scope, base, work) if base else None
            tree = cand.tree if cand is not None and cand.tree else r.overlay(r.tree_of_commit(tip), scope, work)
            if tree == r.tree_of_commit(tip):
                return None  # nothing to keep
            ref = f"refs/agentd/plans/{plan}/parked/{task}"
            r.keep(ref, tree, tip, f"plan {plan}: {task} (parked): its work when it was parked\n\n"
                                   f"Agentd-Plan: {plan}\nAgentd-Task: {task}\n")
            return ref

        return await self._run(keep)

    async def write_task(self, unit: str, text: str, state_line: str) -> None:
        from ..memory import AgentPaths, update_task_state

        module = self.unit_spec(unit).module
        await asyncio.to_thread(update_task_state, AgentPaths(self.root), state_line, task=text, module=module)

    async def report(self, spec: PlanSpec, state: PlanState) -> str | None:
        from .report import write

        return await asyncio.to_thread(write, self.root, spec, state)


def check_environment(settings: Any) -> Callable[[Any], Mapping[str, str]]:
    """The environment of a unit's checks: the agent's own (its secrets then redacted from the output)."""
    from ..config.environment import agent_environment

    def env(spec: Any) -> Mapping[str, str]:
        return agent_environment(spec, settings, "check", os.environ)

    return env
