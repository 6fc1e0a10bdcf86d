"""What makes agentd checkpoint, restart or stop a session on its own, end to end.

``[context] hard_limit``, ``max_session_age``, ``restart_every`` (in
``[context]`` and in ``[schedule]``), ``[schedule] max_runtime`` and
``stall_after`` with an agent that no longer answers.  The real daemon and
CLI with the fake agent; only what the product exposes is observed (status,
history, transcripts, the event log, the agent's input log).
"""

from __future__ import annotations

from datetime import datetime, timezone

from tests.conftest import CONSTRAINT, Project, alive, stays, wait_until


def when(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def cycle(project: Project, unit: str, trigger: str, timeout: float = 90) -> dict:
    """The first history record with that trigger (waits for it)."""
    return wait_until(lambda: next((r for r in project.history(unit) if r["trigger"] == trigger), None), timeout,
                      what=f"a {trigger} cycle of {unit}")


def session_start(session: str) -> float:
    """When a session was started: its id begins with the UTC time, to the microsecond, before the spawn."""
    return datetime.strptime(session[:22], "%Y%m%dT%H%M%S.%f").replace(tzinfo=timezone.utc).timestamp()


def test_hard_limit_interrupts_a_running_turn(project: Project) -> None:
    project.init_memory()
    # one limit for both: the first figure past it is the hard limit, never the plain threshold
    project.fake_unit("eager", cycle=True, context="window = 2000\ncheckpoint_at = 0.6\nhard_limit = 0.6")
    project.agentd("start")
    first = project.wait_state("eager", "running")
    wait_until(lambda: len(project.inputs("eager")) == 1 and project.unit_status("eager")["turn"] == "idle", 60,
               what="the wakeup to be taken")
    assert project.unit_status("eager")["context"]["ratio"] < 0.6
    never = project.root / "never-created"
    # a turn that prints past the limit and then works on: it would never end by itself
    project.agentd("send", "eager", f"hold {never} 200")
    record = cycle(project, "eager", "hard_limit")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned"
    assert record["flush"] == "verified" and "interrupted a running turn (hard limit)" in record["notes"]
    assert record["tokens_before"] >= 0.6 * 2000
    old = project.transcript("eager", first["session"])
    assert "^C interrupted" in old and "released by" not in old
    typed = project.inputs("eager")[0]
    assert typed[-2] == f"hold {never} 200" and typed[-1].startswith("CHECKPOINT")  # after the interrupt
    wait_until(lambda: len(project.inputs("eager")) == 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("eager")[1][0]
    assert not alive(first["pid"])


def test_max_session_age_gives_a_fresh_session(project: Project) -> None:
    project.init_memory()
    project.fake_unit("aging", cycle=True, context="max_session_age = 5")
    project.agentd("start")
    first = project.wait_state("aging", "running")
    record = cycle(project, "aging", "max_session_age")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned"
    assert record["flush"] == "verified"
    due = next(e for e in project.events("checkpoint_due", "aging") if e["trigger"] == "max_session_age")
    assert when(due) - session_start(first["session"]) >= 5  # not before its age
    wait_until(lambda: len(project.inputs("aging")) >= 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("aging")[1][0]


def test_restart_every_gives_a_fresh_session_on_a_timer(project: Project) -> None:
    project.init_memory()
    project.fake_unit("ctx", cycle=True, context="restart_every = 5")
    project.fake_unit("sched", cycle=True, schedule="restart_every = 5")
    project.agentd("start")
    firsts = {name: project.wait_state(name, "running") for name in ("ctx", "sched")}
    for name, first in firsts.items():
        record = cycle(project, name, "restart_every")
        assert record["old_session"] == first["session"] and record["outcome"] == "respawned", record
        due = next(e for e in project.events("checkpoint_due", name) if e["trigger"] == "restart_every")
        assert when(due) - session_start(first["session"]) >= 5
        wait_until(lambda n=name: len(project.inputs(n)) >= 2, 60, what=f"{name}'s fresh session's wakeup")
        assert CONSTRAINT in project.inputs(name)[1][0]


def test_max_runtime_stops_the_unit_through_a_checkpoint(project: Project) -> None:
    project.init_memory()
    project.fake_unit("bounded", cycle=True, schedule="max_runtime = 6")
    project.agentd("start")
    first = project.wait_state("bounded", "running")
    stopped = project.wait_state("bounded", "inactive", timeout=90)
    assert stopped["reason"] == "max_runtime 6s reached"
    (record,) = project.history("bounded")
    assert record["trigger"] == "stop" and record["outcome"] == "stopped" and record["flush"] == "verified"
    (reached,) = project.events("max_runtime_reached", "bounded")
    starting = next(e for e in project.events("unit_state", "bounded") if e["new"] == "starting")  # the run began
    assert when(reached) - when(starting) >= 6 - 0.05
    assert not alive(first["pid"])
    # a limit, not a crash: the unit stays down
    assert stays(lambda: project.unit_status("bounded")["state"] == "inactive", 3.0)
    assert project.agentd("status", "bounded", check=False).returncode == 3


def test_a_stalled_agent_that_does_not_answer_is_restarted(project: Project) -> None:
    project.init_memory()
    # it prints a line every second while it works, so only `hang` makes it go silent
    project.fake_unit("stuck", "--work-interval", "1", "--work-lines", "1", cycle=True, schedule="stall_after = 4")
    project.agentd("start")
    first = project.wait_state("stuck", "running")
    wait_until(lambda: len(project.inputs("stuck")) == 1 and project.unit_status("stuck")["turn"] == "idle", 60,
               what="the wakeup to be taken")
    project.agentd("send", "stuck", "hang")  # no output, no input read, Ctrl-C ignored
    record = cycle(project, "stuck", "stall")
    assert record["old_session"] == first["session"] and record["outcome"] == "respawned", record
    assert record["flush"] == "auto" and "the turn did not end before the deadline" in record["notes"]
    assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()
    assert project.events("stalled", "stuck")
    new = wait_until(lambda: (r := project.unit_status("stuck"))["state"] == "running"
                     and r["session"] == record["new_session"] and r, 60, what="the fresh session")
    assert not alive(first["pid"]) and new["pid"] != first["pid"]
    wait_until(lambda: len(project.inputs("stuck")) == 2, 60, what="the fresh session's wakeup")
    assert CONSTRAINT in project.inputs("stuck")[1][0]
