"""The continuity cycle alone, with a fake agent, a fake host and a fake clock."""

from __future__ import annotations

import asyncio

from supervisor.continuity import cycle
from supervisor.continuity.policy import After, Trigger
from supervisor.daemon.lifecycle import UnitState
from tests.daemon_fakes import (
    FakeClock,
    FakeDriver,
    FakeHost,
    FakeKeeper,
    FakeMemory,
    plan,
)


def test_a_verified_flush_respawns_and_records_the_ratio() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory)

    def answer(d: FakeDriver, text: str) -> None:
        memory.writes += 1
        d.turn_ends()
    agent.on_type = answer
    record = asyncio.run(cycle.run(host, agent, memory, plan(), unit="u"))
    assert record.flush == "verified" and record.outcome == "respawned" and record.wakeup_tokens == 123
    assert record.ratio == round(123 / 100, 4) and record.tokens_before == 100
    assert host.states == [UnitState.CHECKPOINTING, UnitState.RESPAWNING] and host.ended == 1
    assert host.marks[0]["trigger"] == "command" and host.marks[-1] is None
    assert agent.typed == ["write your notes"] and "wakeup delivered via first-message" in record.notes
    assert "verified_to_wakeup" in record.steps  # the bench's restart latency (issue 19)


def test_notes_written_just_after_the_turn_count_within_the_grace() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory)
    host.on_pause = lambda: setattr(memory, "writes", 1) if clock() > 1001 else None
    record = asyncio.run(cycle.run(host, agent, memory, plan(grace=5), unit="u"))
    assert record.flush == "verified" and memory.autos == []


def test_a_turn_that_never_ends_meets_the_deadline_and_gets_an_auto_checkpoint() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory)
    agent.watcher.idle = False  # busy, and it stays busy
    record = asyncio.run(cycle.run(host, agent, memory, plan(deadline=30), unit="u"))
    assert record.flush == "auto" and record.notes[0] == "the turn did not end before the deadline"
    assert agent.typed == [] and memory.autos == ["the turn did not end before the deadline"]
    assert clock() >= 1030


def test_a_checkpoint_before_a_stop_does_not_respawn() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory)
    record = asyncio.run(cycle.run(host, agent, memory, plan(After.STOP), unit="u"))
    assert record.outcome == "stopped" and host.fresh is None and host.stopped_why == "stop command"
    assert host.states == [UnitState.CHECKPOINTING, UnitState.STOPPING]


def test_a_respawn_that_fails_is_recorded_with_its_reason() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory, respawn_problem="program 'x' not found")
    record = asyncio.run(cycle.run(host, agent, memory, plan(), unit="u"))
    assert record.outcome == "failed: program 'x' not found" and record.new_session is None


def test_the_wakeup_is_typed_when_the_agent_is_ready_and_an_answer_is_awaited() -> None:
    clock = FakeClock()
    agent = FakeDriver(clock)
    activity: list[str | None] = []
    state = asyncio.run(cycle.deliver_wakeup(agent, "BRIEFING", 30, clock, activity.append))
    assert state == "delivered via first-message" and agent.typed == ["BRIEFING"] and activity[-1] is None
    silent = FakeDriver(clock)
    silent.on_type = lambda d, text: None  # typed, but the agent never answers
    assert asyncio.run(cycle.deliver_wakeup(silent, "BRIEFING", 30, clock, activity.append)) == "typed; no answer yet"
    gone = FakeDriver(clock)
    gone.dies()
    assert asyncio.run(cycle.deliver_wakeup(gone, "BRIEFING", 30, clock, activity.append)) == "failed: the agent was not ready"


def test_an_interrupted_checkpoint_is_finished_at_the_next_start() -> None:
    memory = FakeMemory()
    marker = {"trigger": "threshold", "fingerprint": memory.fingerprint(), "session": "s1"}
    record = cycle.finish_interrupted("u", marker, memory, "tail")
    assert record.flush == "auto" and memory.autos == ["the daemon stopped in the middle of a checkpoint"]
    memory.writes = 1  # the agent had written its notes before the daemon died
    assert cycle.finish_interrupted("u", marker, memory, "tail").flush == "verified"


class OrderedKeeper(FakeKeeper):
    """Records whether the old session had been ended when the work was kept."""

    def __init__(self, host: FakeHost) -> None:
        super().__init__()
        self.host = host
        self.ended_before: list[int] = []

    def keep(self, moment, session, trail):
        self.ended_before.append(self.host.ended)
        return super().keep(moment, session, trail)


def test_the_trail_and_work_are_kept_after_the_flush_and_before_the_session_ends() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory)
    agent.trail_value = "the agent's trail"
    keeper = OrderedKeeper(host)
    record = asyncio.run(cycle.run(host, agent, memory, plan(), unit="u", keeper=keeper))  # ignores the prompt
    assert record.flush == "auto" and record.outcome == "respawned"  # the [auto] path keeps too
    assert keeper.calls == [("checkpoint", agent.session_id, "the agent's trail")] and keeper.ended_before == [0]
    assert record.wip == keeper.wip and "keep" in record.steps
    assert list(record.steps).index("keep") < list(record.steps).index("stop_session")


def test_a_stop_keeps_with_its_moment_and_a_failing_keeper_never_stops_the_cycle() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), FakeHost(clock, memory)
    keeper = FakeKeeper()
    stop = cycle.Plan(Trigger.STOP, "write your notes", After.STOP, deadline=60, grace=5, why="scheduled stop")
    asyncio.run(cycle.run(host, agent, memory, stop, unit="u", keeper=keeper))
    assert [c[0] for c in keeper.calls] == ["scheduled stop"]
    broken = FakeKeeper(fail=OSError("disk full"))
    agent, host = FakeDriver(clock), FakeHost(clock, memory)
    record = asyncio.run(cycle.run(host, agent, memory, plan(), unit="u", keeper=broken))
    assert record.outcome == "respawned" and host.ended == 1 and record.wip is None
    assert "keeping the work failed: OSError: disk full" in record.stopped["notes"]
