"""The continuity cycle with the real daemon, real PTYs and the fake agent."""

from __future__ import annotations

import os
import signal
import subprocess

from supervisor.tokens import estimate_tokens
from tests.conftest import AGENTD, CONSTRAINT, TASK, Project, alive, clean_env, processes_of, stays, wait_until


def setup_project(project: Project, name: str, *flags: str, window: int = 4000) -> None:
    """An initialised .agent/ and one fake-agent unit with the continuity cycle on."""
    project.init_memory()
    project.fake_unit(name, *flags, cycle=True, context=f"window = {window}")


def wakeup_now(project: Project, unit: str) -> str:
    return project.agentd("wakeup", unit).stdout


def context_watched(row: dict) -> bool:
    """The watch has looked at the context: below the threshold, or the unit left `running` (a checkpoint began).

    A row has no ``context`` for a moment around a session's start (a checkpoint's respawn): not yet.
    """
    return row["state"] != "running" or (row.get("context") is not None and row["context"]["ratio"] < 0.7)


def test_threshold_triggers_one_checkpoint_and_the_new_session_starts_from_the_wakeup(project: Project) -> None:
    setup_project(project, "coder", window=3000)
    project.agentd("start")
    project.wait_state("coder", "running")
    # the first session also starts from the wakeup
    wait_until(lambda: len(project.inputs("coder")) == 1, 60, what="the first wakeup")
    first = project.inputs("coder")[0][0]
    assert CONSTRAINT in first and TASK in first
    row = project.unit_status("coder")
    assert row["context"]["window"] == 3000 and not row["context"]["exact"]
    # work in steps of ~16 % of the window until the context passes 70 %
    for _ in range(12):
        if project.history("coder"):
            break
        sent = project.agentd("send", "coder", "work 60", check=False)
        if sent.returncode != 0:  # the checkpoint began since the last look: nothing is typed during one
            assert "during a checkpoint" in sent.stderr, sent.stderr
            break
        wait_until(lambda: (r := project.unit_status("coder"))["turn"] == "idle" or r["state"] != "running", 60,
                   what="the turn to end")
        wait_until(lambda: project.history("coder") or context_watched(project.unit_status("coder")), 30,
                   what="the context watch")
    wait_until(lambda: project.history("coder"), 90, what="a checkpoint cycle")
    record = project.history("coder")[0]
    assert record["trigger"] == "threshold" and record["flush"] == "verified" and record["outcome"] == "respawned"
    assert 0.7 * 3000 <= record["tokens_before"] and record["window"] == 3000
    assert set(record["steps"]) >= {"wait_turn_end", "type_prompt", "wait_flush", "verify", "stop_session", "respawn"}
    # the agent's own notes are on disk
    session = record["old_session"]
    engram = (project.root / ".agent" / "engram.md").read_text()
    assert "[confirmed]" in engram and session in engram
    assert session in (project.root / ".agent" / "decisions-coder.log").read_text()
    assert session in (project.root / ".agent" / "tasks" / "coder.md").read_text()  # the module's own task
    # the fresh session's first message is exactly what `agentd wakeup coder` prints now
    wait_until(lambda: len(project.inputs("coder")) == 2, 60, what="the second session's wakeup")
    received = project.inputs("coder")[1][0]
    assert received == wakeup_now(project, "coder")
    assert session in received  # it carries the decision just recorded
    # the record's wakeup figures are those of the briefing the fresh session really got, and it
    # is much smaller than the context it replaced (the point of the cycle)
    assert record["wakeup_tokens"] == estimate_tokens(received)
    assert record["ratio"] == round(estimate_tokens(received) / record["tokens_before"], 4) < 1
    row = project.wait_state("coder", "running")
    assert row["session"] == record["new_session"] and row["last_checkpoint"]["trigger"] == "threshold"
    # exactly one cycle: the fresh session is far below the threshold
    assert stays(lambda: len(project.history("coder")) == 1, 3.0)


def test_an_agent_that_ignores_the_prompt_gets_an_auto_checkpoint(project: Project) -> None:
    setup_project(project, "lazy", "--on-checkpoint", "ignore")
    before = {p.name: p.read_bytes() for p in (project.root / ".agent").iterdir() if p.is_file()}
    project.agentd("start")
    project.wait_state("lazy", "running")
    wait_until(lambda: len(project.inputs("lazy")) == 1, 60, what="the first wakeup")
    result = project.agentd("checkpoint", "lazy")
    assert "auto" in result.stdout
    record = project.history("lazy")[-1]
    assert record["flush"] == "auto" and record["outcome"] == "respawned" and record["trigger"] == "command"
    agent_dir = project.root / ".agent"
    engram = (agent_dir / "engram.md").read_text()
    assert "[auto]" in engram and engram.startswith(before["engram.md"].decode())  # appended, nothing lost
    assert (agent_dir / "recent-summary.md").read_text() != before["recent-summary.md"].decode()
    for name in ("constraints.md", "current-task.md", "decisions.log"):
        assert (agent_dir / name).read_bytes() == before[name]
    assert project.agentd("doctor", check=False).returncode == 0
    wait_until(lambda: len(project.inputs("lazy")) == 2, 60, what="the respawned session's wakeup")


def _start_checkpoint_in_background(project: Project, unit: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*AGENTD, "--root", str(project.root), "checkpoint", unit], env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=project.root)


def _wait_flush_step(project: Project, unit: str) -> dict:
    return wait_until(
        lambda: (r := project.unit_status(unit)) and r["state"] == "checkpointing"
        and (r["activity"] or "").startswith("waiting for the agent to write") and r,
        60, what="the checkpoint to wait for the flush",
    )


def test_agent_killed_mid_checkpoint_still_ends_in_a_fresh_session(project: Project) -> None:
    setup_project(project, "fragile", "--on-checkpoint", "slow:60")
    project.agentd("start")
    old = project.wait_state("fragile", "running")
    wait_until(lambda: len(project.inputs("fragile")) == 1, 60, what="the first wakeup")
    proc = _start_checkpoint_in_background(project, "fragile")
    try:
        row = _wait_flush_step(project, "fragile")
        # agentd refuses to type into a checkpoint in progress, and says so
        refused = project.agentd("send", "fragile", "echo hi", check=False)
        assert refused.returncode != 0 and "checkpoint" in refused.stderr
        os.kill(row["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
    record = project.history("fragile")[-1]
    assert record["flush"] == "auto" and record["outcome"] == "respawned"
    new = project.wait_state("fragile", "running")
    assert new["pid"] != old["pid"]
    wait_until(lambda: len(project.inputs("fragile")) == 2, 60, what="the wakeup of the fresh session")
    assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()


def test_daemon_killed_mid_checkpoint_recovers_with_auto_checkpoint_and_wakeup(project: Project) -> None:
    setup_project(project, "orphan", "--on-checkpoint", "slow:60")
    project.agentd("start")
    old = project.wait_state("orphan", "running")
    wait_until(lambda: len(project.inputs("orphan")) == 1, 60, what="the first wakeup")
    proc = _start_checkpoint_in_background(project, "orphan")
    try:
        _wait_flush_step(project, "orphan")
        daemon = project.daemon_pid()
        os.kill(daemon, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(lambda: not alive(daemon), 30, what="the daemon to die")
    project.agentd("start")
    new = project.wait_state("orphan", "running")
    assert new["pid"] != old["pid"]
    wait_until(lambda: not alive(old["pid"]), 30, what="the old agent to be gone")
    record = project.history("orphan")[-1]
    assert "interrupted: daemon restart" in record["trigger"] and record["flush"] == "auto"
    assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()
    wait_until(lambda: len(project.inputs("orphan")) == 2, 60, what="the wakeup of the fresh session")


def test_text_sent_during_a_turn_waits_for_the_turn_end(project: Project) -> None:
    setup_project(project, "busy")
    project.agentd("start")
    project.wait_state("busy", "running")
    wait_until(lambda: len(project.inputs("busy")) == 1 and project.unit_status("busy")["turn"] == "idle", 60,
               what="the agent to be idle after its wakeup")
    release = project.root / "release-the-turn"
    hold = f"hold {release}"  # the turn lasts until the test ends it, however slow the CLI calls are
    project.agentd("send", "busy", hold)
    wait_until(lambda: project.unit_status("busy")["turn"] == "busy", 30, what="the turn to start")
    assert "queued" in project.agentd("send", "busy", "echo AFTER-THE-TURN").stdout
    # it stays queued while the turn runs (the daemon would type it within a second of an idle turn)
    assert stays(lambda: (r := project.unit_status("busy"))["queued_sends"] == 1 and r["turn"] == "busy", 3.0)
    first = project.inputs("busy")[0][-1]  # with the constraints' digest after it (adapters/generic.py)
    assert first.split("\n")[0] == hold and CONSTRAINT in first
    assert "AFTER-THE-TURN" not in project.transcript("busy")  # not typed into the running turn
    release.write_text("")
    wait_until(lambda: "\nAFTER-THE-TURN" in project.transcript("busy"), 60, what="the queued text")
    assert [typed.split("\n")[0] for typed in project.inputs("busy")[0][-2:]] == [hold, "echo AFTER-THE-TURN"]
    assert project.unit_status("busy")["queued_sends"] == 0


def test_stop_checkpoints_first_and_stop_now_does_not(project: Project) -> None:
    setup_project(project, "tidy")
    project.agentd("start")
    project.wait_state("tidy", "running")
    wait_until(lambda: project.unit_status("tidy")["wakeup"] == "delivered via first-message", 60,
               what="the wakeup to be delivered")
    project.agentd("stop", "tidy")
    records = project.history("tidy")
    assert len(records) == 1 and records[0]["trigger"] == "stop" and records[0]["outcome"] == "stopped"
    assert records[0]["flush"] == "verified"
    assert project.unit_status("tidy")["state"] == "inactive"
    project.agentd("start", "tidy")
    project.wait_state("tidy", "running")
    project.agentd("stop", "--now", "tidy")
    # no checkpoint: at most a record of the work kept at once (the session's report figures), flush skipped
    assert [r["flush"] for r in project.history("tidy")][1:] in ([], ["skipped"])
    assert project.unit_status("tidy")["state"] == "inactive"
    project.agentd("stop")
    assert processes_of(project.root) == []
