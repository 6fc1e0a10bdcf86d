"""`agentd history UNIT`: session starts and cycles merged by time (issue 13 item 9); an unknown unit is an error."""

from __future__ import annotations

import json

from supervisor.continuity.records import CycleRecord, SessionRecord, StartReason, append_history, append_session
from tests.conftest import Project


def test_history_merges_session_starts_and_cycles_by_time(project: Project) -> None:
    project.fake_unit("web")
    state = project.state
    t0 = 1_800_000_000
    append_session(state, SessionRecord("web", "s1", StartReason.START, "enabled at daemon start",
                                        started="2027-01-15T08:00:00Z", started_ns=t0 * 10**9, wakeup="first-message"))
    append_session(state, SessionRecord("web", "s2", StartReason.CRASH, "restart after backoff", previous="s1",
                                        previous_exit="exit 3", started="2027-01-15T08:00:05Z",
                                        started_ns=(t0 + 5) * 10**9))
    append_history(state, CycleRecord("web", "threshold", "s2", "s3", started="2027-01-15T08:00:09Z",
                                      tokens_before=2900, window=4000, wakeup_tokens=400, flush="verified",
                                      outcome="respawned"))
    append_session(state, SessionRecord("web", "s3", StartReason.CYCLE, "checkpoint (threshold)", previous="s2",
                                        started="2027-01-15T08:00:11Z", started_ns=(t0 + 11) * 10**9))
    out = project.agentd("history", "web").stdout
    rows = [line for line in out.splitlines()[2:] if line.strip()]
    assert [r.split()[1] for r in rows] == ["session:", "session:", "cycle:", "session:"], out
    assert "session: crash" in rows[1] and "restart after backoff (previous exit 3)" in rows[1] and "s1 -> s2" in rows[1]
    assert "cycle: threshold" in rows[2] and "2900/4000" in rows[2] and "s2 -> s3" in rows[2]
    # --json: the cycle records as recorded (what scripts read); --sessions adds the starts, with their kind
    cycles = [json.loads(line) for line in project.agentd("history", "web", "--json").stdout.splitlines()]
    assert len(cycles) == 1 and cycles[0]["trigger"] == "threshold" and "kind" not in cycles[0]
    both = [json.loads(line) for line in project.agentd("history", "web", "--json", "--sessions").stdout.splitlines()]
    assert [i["kind"] for i in both] == ["session", "session", "cycle", "session"]
    assert "session:" not in project.agentd("history", "web", "--cycles").stdout
    assert len(project.agentd("history", "web", "-n", "2").stdout.splitlines()) == 4  # header, rule, 2 rows


def test_history_of_an_unknown_unit_is_an_error(project: Project) -> None:
    project.fake_unit("web")
    result = project.agentd("history", "nosuch", check=False)
    assert result.returncode == 1 and "no such unit 'nosuch'" in result.stderr
    quiet = project.agentd("history", "web")  # a unit with nothing recorded yet is no error
    assert "nothing recorded for web yet" in quiet.stdout
