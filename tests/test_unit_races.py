"""A unit whose agent dies between a command and the start of its checkpoint (found by bench.soak).

The checkpoint's operation is started as a task; the agent may die and be
reaped (the unit goes to backoff) before the task runs.  The cycle must then
not run at all (it was an IllegalTransition backoff -> checkpointing, logged
as a failed operation), ``checkpoint`` says it did not run, and a graceful
``stop`` still stops the unit instead of leaving it to restart from backoff.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.unit import UnitSupervisor
from tests.daemon_fakes import FakeClock, FakeRuntime, spec


class _Adapter:
    pass


def make(tmp_path: Path) -> tuple[UnitSupervisor, FakeRuntime]:
    rt = FakeRuntime(FakeClock(), tmp_path)
    return UnitSupervisor(spec(tmp_path, "[wakeup]\non_start = false\n"), rt, _Adapter()), rt  # type: ignore[arg-type]


async def _dies_before_the_op_runs(unit: UnitSupervisor, command: asyncio.Future) -> None:
    await asyncio.sleep(0)  # the command has started the op task; the op has not run yet
    assert unit.busy
    unit.driver.dies(signal=9)  # type: ignore[union-attr]
    unit.reap()
    assert unit.state is UnitState.BACKOFF


def test_checkpoint_of_an_agent_that_died_meanwhile_does_not_run(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt = make(tmp_path)
        await unit.start("start")
        command = asyncio.ensure_future(unit.checkpoint())
        await _dies_before_the_op_runs(unit, command)
        result = await command
        assert result["outcome"] == "not run: the session ended before the checkpoint began"
        assert unit.state is UnitState.BACKOFF
        assert [c.trigger for c in rt.cycles] == ["crash"]  # only the crash's kept work: no checkpoint ran
    asyncio.run(go())


def test_a_graceful_stop_of_an_agent_that_died_meanwhile_still_stops(tmp_path: Path) -> None:
    async def go() -> None:
        unit, rt = make(tmp_path)
        await unit.start("start")
        command = asyncio.ensure_future(unit.stop("stop command", checkpoint=True))
        await _dies_before_the_op_runs(unit, command)
        await command
        assert unit.state is UnitState.INACTIVE and not rt.timers  # no restart left pending
    asyncio.run(go())
