"""Issue 16 section 2 with the real daemon and the fake agent: a wakeup that leaves the decision out is
flagged (recall below 1, the missing probe named) in the history, ``agentd history`` and ``agentd status``;
the same unit with the whole briefing recalls everything."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from tests.conftest import Project, clean_env, wait_until

DECISION = "keep the wire format at v2"


@pytest.mark.parametrize("cut", [False, True], ids=["whole briefing", "decisions cut"])
def test_recall_is_one_for_the_briefing_and_names_the_decision_a_wakeup_left_out(project: Project, cut: bool) -> None:
    project.init_memory()
    project.agentd("decide", DECISION, "--why", "because clients pin it, so changes go behind a flag", "--global")
    # -I: run from the project root, `python -m` would import a `supervisor/` an agent put there (runnable.py)
    command = [sys.executable, "-I", "-m", "supervisor", "--root", str(project.root), "wakeup", "--module", "coder",
               "--decisions", "0"]
    project.fake_unit("coder", "--on-checkpoint", "ignore", cycle=True,
                      wakeup=f"command = {json.dumps(command)}" if cut else "")
    project.agentd("start")
    wait_until(lambda: len(project.inputs("coder")) == 1, 60, what="the first wakeup")
    assert (DECISION in project.inputs("coder")[0][0]) is not cut
    project.agentd("checkpoint", "coder")
    wait_until(lambda: len(project.inputs("coder")) == 2, 60, what="the second wakeup")
    record = project.history("coder")[-1]
    assert record["recall"]["checked"] == ["task", "decision (global)", "constraint 1"]
    history = project.agentd("history", "coder", env=clean_env(COLUMNS="400")).stdout
    row = project.unit_status("coder")
    status = project.agentd("status", env=clean_env(COLUMNS="400")).stdout
    if not cut:
        assert record["recall"]["recall"] == 1.0 and record["recall"]["missing"] == []
        assert "! recall" not in history and "! recall" not in status
        return
    assert record["recall"] == {"recall": 0.6667, "found": 2, "probes": 3, "missing": ["decision (global)"],
                                "checked": ["task", "decision (global)", "constraint 1"]}
    assert "! recall 0.6667, missing: decision (global)" in history
    assert row["last_checkpoint"]["recall"]["missing"] == ["decision (global)"]
    assert "! recall 0.6667, missing: decision (global)" in status
    report = project.agentd("report").stdout
    assert "0.6667 ! missing: decision (global)" in report and "(1 below 1)" in report


def test_a_session_started_after_a_crash_records_its_recall(project: Project) -> None:
    """A start outside the cycle (here a crash restart) checks its wakeup too: the session record carries it."""
    project.init_memory()
    project.agentd("decide", DECISION, "--why", "because clients pin it, so changes go behind a flag", "--global")
    project.fake_unit("coder", cycle=True, restart="initial_delay = 0.2")
    project.agentd("start")
    first = wait_until(lambda: len(project.inputs("coder")) == 1 and project.unit_status("coder"), 60,
                       what="the first wakeup")
    os.kill(first["pid"], signal.SIGKILL)
    wait_until(lambda: len(project.inputs("coder")) == 2, 60, what="the wakeup after the crash")
    sessions = [json.loads(line) for line in
                (project.state / "history" / "coder.sessions.jsonl").read_text().splitlines() if line.strip()]
    assert sessions[0].get("recall") is None  # a first start resumes nothing
    crash = sessions[-1]
    assert crash["why"] == "crash", crash
    assert crash["recall"]["recall"] == 1.0 and crash["recall"]["missing"] == [], crash["recall"]
    assert "decision (global)" in crash["recall"]["checked"]
