"""The continuity cycle with the real daemon, real PTYs and the fake agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import AGENTD, Project, alive, clean_env, processes_of, wait_until
from tests.test_daemon import stays


def setup_project(project: Project, name: str, *flags: str, window: int = 4000, extra: str = "") -> Path:
    """A project with an initialised .agent/ and one fake-agent unit logging its inputs."""
    project.agentd("init")
    (project.root / ".agent" / "constraints.md").write_text("# Hard constraints\n\n- Do not touch the DB schema.\n")
    (project.root / ".agent" / "current-task.md").write_text(
        "# Current task\n\nPort the parser to the new API.\n\nState at interruption: (not set)\n"
    )
    inputs = project.root / f"{name}-inputs.jsonl"
    argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(inputs), *flags])
    project.unit(
        name,
        f"""
[agent]
command = {argv}
prompt = "fake> $"
[restart]
stop_timeout = 3
[context]
window = {window}
[checkpoint]
grace = 2
{extra}
""",
    )
    return inputs


def sessions_inputs(path: Path) -> list[list[str]]:
    """Messages per session (a session's log starts again at n = 1)."""
    sessions: list[list[str]] = []
    if not path.exists():
        return sessions
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if item["n"] == 1:
            sessions.append([])
        sessions[-1].append(item["text"])
    return sessions


def history(project: Project, unit: str) -> list[dict]:
    out = project.agentd("history", unit, "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wakeup_now(project: Project, unit: str) -> str:
    return project.agentd("wakeup", unit).stdout


def test_threshold_triggers_one_checkpoint_and_the_new_session_starts_from_the_wakeup(project: Project) -> None:
    inputs = setup_project(project, "coder", window=3000)
    project.agentd("start")
    project.wait_state("coder", "running")
    # the first session also starts from the wakeup
    wait_until(lambda: len(sessions_inputs(inputs)) == 1, 60, what="the first wakeup")
    first = sessions_inputs(inputs)[0][0]
    assert "Do not touch the DB schema." in first and "Port the parser" in first
    row = project.unit_status("coder")
    assert row["context"]["window"] == 3000 and not row["context"]["exact"]
    # work in steps of ~16 % of the window until the context passes 70 %
    for _ in range(12):
        if history(project, "coder"):
            break
        project.agentd("send", "coder", "work 60")
        wait_until(lambda: (r := project.unit_status("coder"))["turn"] == "idle" or r["state"] != "running", 60,
                   what="the turn to end")
        wait_until(lambda: history(project, "coder") or project.unit_status("coder")["context"]["ratio"] < 0.7
                   or project.unit_status("coder")["state"] != "running", 30, what="the context watch")
    wait_until(lambda: history(project, "coder"), 90, what="a checkpoint cycle")
    record = history(project, "coder")[0]
    assert record["trigger"] == "threshold" and record["flush"] == "verified" and record["outcome"] == "respawned"
    assert record["tokens_before"] >= 0.7 * 3000 and record["window"] == 3000
    assert record["ratio"] == round(record["wakeup_tokens"] / record["tokens_before"], 4)
    assert set(record["steps"]) >= {"wait_turn_end", "type_prompt", "wait_flush", "verify", "stop_session", "respawn"}
    # the agent's own notes are on disk
    session = record["old_session"]
    engram = (project.root / ".agent" / "engram.md").read_text()
    assert "[confirmed]" in engram and session in engram
    assert session in (project.root / ".agent" / "decisions-coder.log").read_text()
    assert session in (project.root / ".agent" / "current-task.md").read_text()
    # the fresh session's first message is exactly what `agentd wakeup coder` prints now
    wait_until(lambda: len(sessions_inputs(inputs)) == 2, 60, what="the second session's wakeup")
    assert sessions_inputs(inputs)[1][0] == wakeup_now(project, "coder")
    assert session in sessions_inputs(inputs)[1][0]  # it carries the decision just recorded
    row = project.wait_state("coder", "running")
    assert row["session"] == record["new_session"] and row["last_checkpoint"]["trigger"] == "threshold"
    # exactly one cycle: the fresh session is far below the threshold
    assert stays(lambda: len(history(project, "coder")) == 1, 3.0)


def test_an_agent_that_ignores_the_prompt_gets_an_auto_checkpoint(project: Project) -> None:
    inputs = setup_project(project, "lazy", "--on-checkpoint", "ignore")
    before = {p.name: p.read_bytes() for p in (project.root / ".agent").iterdir() if p.is_file()}
    project.agentd("start")
    project.wait_state("lazy", "running")
    wait_until(lambda: len(sessions_inputs(inputs)) == 1, 60, what="the first wakeup")
    result = project.agentd("checkpoint", "lazy")
    assert "auto" in result.stdout
    record = history(project, "lazy")[-1]
    assert record["flush"] == "auto" and record["outcome"] == "respawned" and record["trigger"] == "command"
    agent_dir = project.root / ".agent"
    engram = (agent_dir / "engram.md").read_text()
    assert "[auto]" in engram and engram.startswith(before["engram.md"].decode())  # appended, nothing lost
    assert (agent_dir / "recent-summary.md").read_text() != before["recent-summary.md"].decode()
    for name in ("constraints.md", "current-task.md", "decisions.log"):
        assert (agent_dir / name).read_bytes() == before[name]
    assert project.agentd("doctor", check=False).returncode == 0
    wait_until(lambda: len(sessions_inputs(inputs)) == 2, 60, what="the respawned session's wakeup")


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
    inputs = setup_project(project, "fragile", "--on-checkpoint", "slow:60")
    project.agentd("start")
    old = project.wait_state("fragile", "running")
    wait_until(lambda: len(sessions_inputs(inputs)) == 1, 60, what="the first wakeup")
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
    record = history(project, "fragile")[-1]
    assert record["flush"] == "auto" and record["outcome"] == "respawned"
    new = project.wait_state("fragile", "running")
    assert new["pid"] != old["pid"]
    wait_until(lambda: len(sessions_inputs(inputs)) == 2, 60, what="the wakeup of the fresh session")
    assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()


def test_daemon_killed_mid_checkpoint_recovers_with_auto_checkpoint_and_wakeup(project: Project) -> None:
    inputs = setup_project(project, "orphan", "--on-checkpoint", "slow:60")
    project.agentd("start")
    old = project.wait_state("orphan", "running")
    wait_until(lambda: len(sessions_inputs(inputs)) == 1, 60, what="the first wakeup")
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
    record = history(project, "orphan")[-1]
    assert "interrupted: daemon restart" in record["trigger"] and record["flush"] == "auto"
    assert "[auto]" in (project.root / ".agent" / "engram.md").read_text()
    wait_until(lambda: len(sessions_inputs(inputs)) == 2, 60, what="the wakeup of the fresh session")


def test_text_sent_during_a_turn_waits_for_the_turn_end(project: Project) -> None:
    inputs = setup_project(project, "busy")
    project.agentd("start")
    project.wait_state("busy", "running")
    wait_until(lambda: len(sessions_inputs(inputs)) == 1 and project.unit_status("busy")["turn"] == "idle", 60,
               what="the agent to be idle after its wakeup")
    project.agentd("send", "busy", "sleep 4")
    wait_until(lambda: project.unit_status("busy")["turn"] == "busy", 30, what="the turn to start")
    assert "queued" in project.agentd("send", "busy", "echo AFTER-THE-TURN").stdout
    row = project.unit_status("busy")
    assert row["queued_sends"] == 1
    assert sessions_inputs(inputs)[0][-1] == "sleep 4"  # nothing typed into the running turn
    wait_until(lambda: "AFTER-THE-TURN" in project.transcript("busy"), 60, what="the queued text")
    assert sessions_inputs(inputs)[0][-2:] == ["sleep 4", "echo AFTER-THE-TURN"]


def test_stop_checkpoints_first_and_stop_now_does_not(project: Project) -> None:
    setup_project(project, "tidy")
    project.agentd("start")
    project.wait_state("tidy", "running")
    wait_until(lambda: project.unit_status("tidy")["wakeup"] == "delivered via first-message", 60,
               what="the wakeup to be delivered")
    project.agentd("stop", "tidy")
    records = history(project, "tidy")
    assert len(records) == 1 and records[0]["trigger"] == "stop" and records[0]["outcome"] == "stopped"
    assert records[0]["flush"] == "verified"
    assert project.unit_status("tidy")["state"] == "inactive"
    project.agentd("start", "tidy")
    project.wait_state("tidy", "running")
    project.agentd("stop", "--now", "tidy")
    assert len(history(project, "tidy")) == 1
    assert project.unit_status("tidy")["state"] == "inactive"
    project.agentd("stop")
    assert processes_of(project.root) == []
