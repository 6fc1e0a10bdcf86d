"""Issue 13 items 1 and 4: a read-only or full disk under the state directory ends in named states.

The state directory (``.agentd``: agentd.log, transcripts, agents.json,
history) is a small tmpfs in a private mount namespace
(:class:`~tests.faults.conftest.MountNamespace`).

Before: EROFS on the transcript directory left the unit in ``starting`` with
no reason; on a full disk the output read while the transcript could not be
written was lost to turn detection too, so the unit stayed busy and its sends
stayed queued after space returned, nothing showed in ``status``, and
``agentd.log`` got torn JSON lines.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import wait_until

from .conftest import NsProject, fill, final_checks, whole_json_lines


def _inputs(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]


def test_read_only_transcripts_put_units_in_backoff_with_the_reason_then_they_recover(ns_project: NsProject) -> None:
    project = ns_project
    state = project.root / ".agentd"
    project.ns.mount_tmpfs(state)
    project.ns.mount_tmpfs(state / "transcripts", read_only=True)
    for name in ("first", "second"):  # backing off, never failing, while the disk is read-only
        project.fake_unit(name, restart="initial_delay = 0.5\nmax_delay = 1\nburst = 1000")
    project.agentd("start")
    for name in ("first", "second"):
        row = wait_until(lambda n=name: (r := project.unit_status(n)) and r["state"] == "backoff" and r,
                         60, what=f"{name} to back off")
        assert "Read-only file system" in row["reason"] and "transcript" in row["reason"], row
        assert row["pid"] is None
    # the unit can be stopped and started again by hand
    project.agentd("stop", "--now", "first")
    assert project.unit_status("first")["state"] == "inactive"
    project.ns.remount(state / "transcripts", read_only=False)
    project.agentd("start", "first")
    project.wait_state("first", "running")
    project.wait_state("second", "running", timeout=60)  # its next backoff attempt succeeds
    final_checks(project, ["first", "second"])


def test_a_full_disk_keeps_turns_and_sends_going_and_shows_in_status(ns_project: NsProject) -> None:
    project = ns_project
    project.ns.mount_tmpfs(project.root / ".agentd", size="4m")
    inputs = project.root / "inputs.jsonl"  # outside the full disk: what the agent received
    argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(inputs)])
    project.unit("writer", f'[agent]\ncommand = {argv}\nprompt = "fake> $"\n[restart]\nstop_timeout = 3\n'
                           '[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n')
    project.agentd("start")
    project.wait_state("writer", "running")
    wait_until(lambda: project.unit_status("writer")["turn"] == "idle", 30, what="the first prompt")
    filler = project.state / "filler"
    fill(filler)
    # a turn that runs while the disk is full, then two sends queued behind it
    project.agentd("send", "writer", "sleep 1")
    project.agentd("send", "writer", "work 150")
    project.agentd("send", "writer", "echo typed-while-full")
    wait_until(lambda: "echo typed-while-full" in _inputs(inputs), 60, what="the queued sends to be typed")
    row = wait_until(lambda: (r := project.unit_status("writer")) and r["turn"] == "idle" and r, 30,
                     what="the turn to end on the full disk")
    assert row["state"] == "running" and row["queued_sends"] == 0
    assert row["transcript_problem"] and "ENOSPC" in row["transcript_problem"], row
    assert "ENOSPC" in project.agentd("status").stdout  # the NOTE column says it too
    whole_json_lines(project.state / "agentd.log")  # no torn line, even now
    # space returns: the transcript writes again, the unit is running, a send goes straight through
    filler.unlink()
    project.agentd("send", "writer", "echo back-again")
    wait_until(lambda: "back-again" in project.transcript("writer"), 30, what="the transcript to be written again")
    row = project.wait_state("writer", "running")
    assert "writing again" in row["transcript_problem"], row
    assert _inputs(inputs)[-1] == "echo back-again"
    final_checks(project, ["writer"])
