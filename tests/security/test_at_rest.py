"""Secrets at rest and in what agentd composes: .gitignore, doctor, wakeup, summary, history, event log.

Each goes through the same redactor as the transcripts; the CLI is the real
``agentd`` in a subprocess, files are real files.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import structlog

from supervisor.continuity.records import CycleRecord, append_history, read_history
from supervisor.daemon.eventlog import configure
from supervisor.memory.flush import write_auto_checkpoint
from supervisor.memory.scaffold import init_store
from tests.conftest import Project

KEY = "sk-proj-Q7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcE"
PEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oBfx\nAwEHoUQDQgAE\n-----END EC PRIVATE KEY-----"


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def test_init_ignores_the_state_directory_once_and_keeps_agent_tracked(project: Project) -> None:
    git(project.root, "init", "-q")
    (project.root / ".gitignore").write_text("node_modules")  # no newline at the end
    first = project.agentd("init")
    assert "added /.agentd/ to .gitignore" in first.stdout
    again = project.agentd("init")
    assert ".gitignore" not in again.stdout
    text = (project.root / ".gitignore").read_text()
    assert text.startswith("node_modules\n") and text.count("/.agentd/") == 1
    (project.root / ".agentd").mkdir(exist_ok=True)
    (project.root / ".agentd" / "x.log").write_text("transcript")
    assert git(project.root, "check-ignore", "-q", ".agentd/x.log").returncode == 0
    assert git(project.root, "check-ignore", "-q", ".agent/engram.md").returncode == 1  # still tracked


def test_doctor_names_each_secret_line_under_agent_and_never_prints_the_secret(project: Project) -> None:
    project.agentd("init")
    assert "looks like a secret" not in project.agentd("doctor", check=False).stdout
    project.agentd("note", f"deploy key is {KEY}", "--confirmed")
    with (project.root / ".agent" / "constraints.md").open("a") as f:
        f.write(PEM + "\n")
    result = project.agentd("doctor", check=False)
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if "looks like a secret" in line]
    assert any(line.startswith("error: .agent/engram.md:") for line in lines)
    assert any(line.startswith("error: .agent/constraints.md:") for line in lines)
    assert KEY[8:20] not in result.stdout and "MHcCAQEE" not in result.stdout


def test_the_wakeup_is_redacted_whatever_the_agent_wrote_into_agent(project: Project) -> None:
    project.agentd("init")
    project.agentd("note", f"the API answers with password=hunter2xyz and {KEY}", "--confirmed")
    (project.root / ".agent" / "current-task.md").write_text(
        f"# Current task\n\nDeploy with postgres://app:Pa55w0rdS3cr3t@db/app\n\nState at interruption: {KEY}\n")
    wakeup = project.agentd("wakeup").stdout
    for secret in (KEY[5:], "hunter2xyz", "Pa55w0rdS3cr3t"):
        assert secret not in wakeup
    assert wakeup.count("[REDACTED]") >= 4
    project.unit("u", '[agent]\ncommand = ["python", "-m", "supervisor.fakeagent"]\n'
                      'env = { VENDOR_TOKEN = "vendortoken-8832-secret" }\n')
    (project.root / ".agent" / "engram.md").open("a").write("- [2026-01-01 10:00] [confirmed] vendortoken-8832-secret\n")
    unit_wakeup = project.agentd("wakeup", "u").stdout
    assert "vendortoken-8832" not in unit_wakeup and "[REDACTED]" in unit_wakeup


def test_auto_checkpoint_summary_and_line_are_redacted(tmp_path: Path) -> None:
    init_store(tmp_path)
    tail = f"working\n{KEY}\n{PEM}\nexport DEPLOY_PASSWORD=correct-horse-battery\nvendor=plainvalue-0001-xyz\n"
    write_auto_checkpoint(tmp_path, None, f"deadline passed after {KEY}", tail,
                          env={"VENDOR_API_KEY": "plainvalue-0001-xyz"})
    summary = (tmp_path / ".agent" / "recent-summary.md").read_text()
    engram = (tmp_path / ".agent" / "engram.md").read_text()
    for text in (summary, engram):
        assert KEY[5:] not in text and "MHcCAQEE" not in text and "correct-horse" not in text
        assert "plainvalue-0001" not in text and "[REDACTED]" in text
    assert "[auto]" in engram and "working" in summary


def test_history_records_are_redacted(tmp_path: Path) -> None:
    record = CycleRecord("u", "command", "s1", notes=[f"the agent said Bearer {KEY[3:]}", "plain"], outcome=f"failed: {KEY}")
    append_history(tmp_path, record)
    stored = list(read_history(tmp_path, "u"))[0]
    assert KEY[5:] not in json.dumps(stored) and stored["notes"][1] == "plain"
    assert stored["outcome"] == "failed: [REDACTED]" and stored["notes"][0] == "the agent said Bearer [REDACTED]"


def test_the_event_log_redacts_values_before_encoding_them(tmp_path: Path) -> None:
    configure(tmp_path / "agentd.log")
    try:
        structlog.get_logger("t").info("seen", text=PEM, colour=f"\x1b[31m{KEY[:10]}\x1b[0m{KEY[10:]}", argv=[f"--key={KEY}"])
    finally:
        structlog.reset_defaults()
    line = (tmp_path / "agentd.log").read_text()
    assert "MHcCAQEE" not in line and "AwEHoUQDQgAE" not in line and KEY[12:24] not in line and KEY[:10] not in line
    assert json.loads(line)["text"] == "[REDACTED]"


def test_attach_raw_warns_before_anything_else(project: Project) -> None:
    result = project.agentd("attach", "nosuch", "--raw", check=False)
    assert "unredacted" in result.stderr.splitlines()[0]
    plain = project.agentd("attach", "nosuch", check=False)
    assert "unredacted" not in plain.stderr
