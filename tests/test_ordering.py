"""Dependencies between units as pure plans: what starts, in which order, what stops with what."""

from __future__ import annotations

from pathlib import Path

from supervisor.config.check import refuse_cycles
from supervisor.daemon.ordering import dependents, requirements, start_plan, stop_layers
from tests.daemon_fakes import spec


def specs(tmp_path: Path, **units: str) -> dict:
    return {name: spec(tmp_path, text, name) for name, text in units.items()}


def test_requirements_are_pulled_in_and_ordered_first(tmp_path: Path) -> None:
    s = specs(tmp_path, db="", cache="", api='[unit]\nrequires = ["db"]\n', web='[unit]\nrequires = ["api"]\nafter = ["cache"]\n')
    assert requirements("web", s) == {"api", "db"}
    assert start_plan(["web"], s) == ["db", "api", "web"]  # cache is only 'after': not pulled in
    both = start_plan(["web", "cache"], s)
    assert sorted(both) == ["api", "cache", "db", "web"]
    assert both.index("db") < both.index("api") < both.index("web") and both.index("cache") < both.index("web")


def test_dependents_stop_before_their_requirements(tmp_path: Path) -> None:
    s = specs(tmp_path, db="", api='[unit]\nrequires = ["db"]\n', web='[unit]\nrequires = ["api"]\n', other="")
    assert dependents("db", s) == ["web", "api"]
    assert stop_layers(["db", "api", "web", "other"], s) == [["other", "web"], ["api"], ["db"]]


def test_after_orders_stops_in_reverse_too(tmp_path: Path) -> None:
    s = specs(tmp_path, cache="", web='[unit]\nafter = ["cache"]\n')
    assert stop_layers(["cache", "web"], s) == [["web"], ["cache"]]
    assert dependents("cache", s) == []  # after is ordering only


def test_a_cycle_is_refused_naming_its_units(tmp_path: Path) -> None:
    s = specs(tmp_path, a='[unit]\nrequires = ["b"]\n', b='[unit]\nafter = ["c"]\n', c='[unit]\nrequires = ["a"]\n', d="")
    kept, errors = refuse_cycles(s)
    assert set(kept) == {"d"}
    assert len(errors) == 3 and all("a -> b -> c -> a" in e.message or "b -> c -> a -> b" in e.message
                                    or "c -> a -> b -> c" in e.message for e in errors)


def test_requirements_skip_the_unit_itself_and_what_was_found_already(tmp_path: Path) -> None:
    s = specs(tmp_path, a='[unit]\nrequires = ["b"]\n', b='[unit]\nrequires = ["a"]\n')
    assert requirements("a", s) == {"b"}  # a cycle back to a does not make a require itself
    diamond = specs(tmp_path, a='[unit]\nrequires = ["x", "b", "c"]\n', b='[unit]\nrequires = ["d"]\n',
                    c='[unit]\nrequires = ["d"]\n', d="", x="")
    assert requirements("a", diamond) == {"b", "c", "d", "x"}  # d twice, and x still found after it
    assert requirements("nope", diamond) == set()
    assert requirements("a", {"a": diamond["a"]}) == {"x", "b", "c"}  # requirements that are not loaded


def test_units_being_removed_stop_with_the_rest(tmp_path: Path) -> None:
    s = specs(tmp_path, cache="", web='[unit]\nafter = ["cache"]\n')
    assert stop_layers(["gone", "web", "cache"], s) == [["gone", "web"], ["cache"]]


# ------------------------------------------------------------------ live units: ready() and blocked_by()
import asyncio

from supervisor.daemon.lifecycle import UnitState
from supervisor.daemon.table import Block, blocked_by, ready
from supervisor.daemon.unit import UnitSupervisor
from tests.daemon_fakes import FakeClock, FakeRuntime

QUIET = "[wakeup]\non_start = false\n"


def live(tmp_path: Path, **units: str) -> tuple[dict[str, UnitSupervisor], FakeRuntime]:
    rt = FakeRuntime(FakeClock(), tmp_path)
    return {name: UnitSupervisor(spec(tmp_path, text, name), rt, object()) for name, text in units.items()}, rt  # type: ignore[arg-type]


def at(unit: UnitSupervisor, state: UnitState, reason: str | None = None) -> UnitSupervisor:
    unit.state, unit.reason = state, reason
    return unit


def test_ready_waits_for_a_start_in_progress_but_not_for_a_cycle(tmp_path: Path) -> None:
    async def go() -> None:
        units, rt = live(tmp_path, db=QUIET)
        db = units["db"]
        await ready(db)  # never started: nothing to wait for
        assert db.state is UnitState.INACTIVE
        db.start("start")
        assert db.state is UnitState.STARTING and db.busy
        await ready(db)
        assert db.state is UnitState.RUNNING
        db.driver.person = True  # the checkpoint waits for the person to stop typing
        cycle = asyncio.ensure_future(db.checkpoint())
        for _ in range(5):
            await asyncio.sleep(0)
        assert db.busy and db.state is UnitState.CHECKPOINTING
        await ready(db)  # a unit in its cycle is up: ready does not wait for the cycle
        assert db.state is UnitState.CHECKPOINTING
        db.driver.person = False
        await cycle
        await rt.settle()
    asyncio.run(go())


def test_ready_waits_for_the_wakeup_and_sees_an_agent_that_died_taking_it(tmp_path: Path) -> None:
    from supervisor.memory.scaffold import init_store

    init_store(tmp_path)

    async def go() -> None:
        units, rt = live(tmp_path, db="")
        def busy_then_dies(driver: object) -> None:
            driver.watcher.idle = False  # type: ignore[attr-defined]  # busy: the wakeup waits for its turn end
            driver.on_type = lambda drv, text: drv.dies(code=2)  # type: ignore[attr-defined]

        rt.script = busy_then_dies
        db = units["db"]
        await db.start("start")
        assert db.state is UnitState.RUNNING and db.delivering
        waiting = asyncio.ensure_future(ready(db))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done()
        db.driver.watcher.idle = True
        await waiting
        assert not db.delivering and db.driver is None and db.state is UnitState.BACKOFF  # reaped
        await rt.settle()
    asyncio.run(go())


def test_blocked_by_missing_units_requires_blocks_after_does_not(tmp_path: Path) -> None:
    async def go() -> None:
        units, _ = live(tmp_path, web='[unit]\nafter = ["cache"]\n', api='[unit]\nrequires = ["db"]\n')
        assert await blocked_by(units["web"], units) is None
        assert await blocked_by(units["api"], units) == Block("requires unit 'db', which does not exist")
        assert await blocked_by(units["api"], units, outside=True) is None  # run-unit: systemd orders it
    asyncio.run(go())


def test_blocked_by_a_requirement_that_is_down_or_coming_up(tmp_path: Path) -> None:
    async def go() -> None:
        units, _ = live(tmp_path, db="", cache="", api='[unit]\nrequires = ["db"]\nafter = ["cache", "a-gone"]\n')
        api, db, cache = units["api"], units["db"], units["cache"]
        at(cache, UnitState.FAILED, "start limit hit")  # only after: ordering, never a block
        at(db, UnitState.FAILED, "start limit hit")
        assert await blocked_by(api, units) == Block("not started: requires 'db', which is failed: start limit hit")
        at(db, UnitState.INACTIVE)
        assert await blocked_by(api, units) == Block("not started: requires 'db', which is inactive")
        at(db, UnitState.BACKOFF, "exit 1")
        assert await blocked_by(api, units) == Block("waiting: requires 'db', which is backoff: exit 1", waiting=True)
        at(db, UnitState.WAITING)
        block = await blocked_by(api, units)
        assert block is not None and block.waiting and block.reason == "waiting: requires 'db', which is waiting"
        for state in (UnitState.RUNNING, UnitState.CHECKPOINTING, UnitState.RESPAWNING):
            at(db, state)
            assert await blocked_by(api, units) is None
        assert Block("x").waiting is False
    asyncio.run(go())


def test_blocked_by_waits_for_a_requirement_still_starting(tmp_path: Path) -> None:
    async def go() -> None:
        units, rt = live(tmp_path, db=QUIET, api='[unit]\nrequires = ["db"]\n')
        units["db"].start("start")
        assert await blocked_by(units["api"], units) is None
        assert units["db"].state is UnitState.RUNNING
        await rt.settle()
    asyncio.run(go())
