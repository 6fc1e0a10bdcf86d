"""The real side of the runner's two Protocols: the daemon's units, and the repository with the checks.

:class:`DaemonUnits` (``runner.Units``) reads and drives the daemon's units
through their own public methods, the ones the control commands use: a
fresh session is a stop without checkpoint (the task boundary is the
checkpoint: its work is committed or kept) and a start, so the wakeup, with
the module's task file, is the first thing the agent reads; text for the
agent goes through the unit's conversation queue (typed at its turn end, made
safe by the adapter's encoder).

:class:`RepoWorkshop` (``runner.Workshop``) does the blocking work off the
loop: :mod:`.integrate` (pygit2, in the daemon's git helper, one request at
a time and bounded: :func:`.integrate.run`) and :mod:`.checks`, the module's
task file (:func:`supervisor.memory.update_task_state`) and the report.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..continuity.records import StartReason
from . import integrate
from .checks import CheckSetup, run_checks
from .integrate import Candidate
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

    def _git(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        return integrate.run(self.root, self.exclude, method, *args, timeout=timeout)

    async def _run(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        return await asyncio.to_thread(self._git, method, *args, timeout=timeout)

    def _scope(self, unit: str) -> tuple[str, ...]:
        return tuple(self.unit_spec(unit).scope.paths)

    async def snapshot(self, unit: str) -> str:
        return await self._run("snapshot", self._scope(unit))

    async def candidate(self, unit: str, tip: str, base: str, claimed: str) -> Candidate:
        return await self._run("candidate", tip, self._scope(unit), base, claimed)

    async def check(self, task: TaskSpec, attempt: int, tree: str) -> list[dict[str, Any]]:
        spec = self.unit_spec(task.unit)
        prefix = (await self._run("project_prefix")).rstrip("/")
        from ..adapters.confine import limits_of

        from ..scope.fencing import hidden_state

        setup = CheckSetup(task.unit, dict(self.environment(spec)), self.containment(), prefix=prefix,
                           limits=limits_of(spec), hidden=hidden_state(self.store.dir.parent.parent))
        labels = {"AGENTD_PLAN": self.spec.name, "AGENTD_TASK": task.id, "AGENTD_ATTEMPT": str(attempt)}
        return await run_checks(setup, lambda dest: self._git("materialize", tree, dest,
                                                              timeout=integrate.CHECKOUT_TIMEOUT), task.done_when,
                                self.store.work_dir(), self.store.check_log(task.id, attempt), task.check_timeout,
                                labels)

    async def commit(self, expected: str, tree: str, message: str) -> str:
        return await self._run("commit", self.spec.branch, expected, tree, message)

    async def find_commit(self, since: str, task: str, tree: str | None) -> str | None:
        return await self._run("find_commit", self.spec.branch, since, self.spec.name, task, tree)

    async def diffstat(self, commit: str) -> dict[str, Any]:
        return await self._run("diffstat", commit)

    async def keep(self, task: str, unit: str, tip: str, base: str | None, work: str) -> str | None:
        plan = self.spec.name
        return await self._run("park", f"refs/agentd/plans/{plan}/parked/{task}", tip, self._scope(unit), base, work,
                               f"plan {plan}: {task} (parked): its work when it was parked\n\n"
                               f"Agentd-Plan: {plan}\nAgentd-Task: {task}\n")

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
