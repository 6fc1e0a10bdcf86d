"""Issue 16 with the REAL Claude Code CLI against the fake Messages API, offline (see test_claude_e2e).

Session 1 plays tests/trail_scenario.py (``Read`` twice, ``TodoWrite``, a failing
``Bash``, an ``Edit`` of src/parser.py: its first productive edit is its 5th
tool call) and ignores the checkpoint.  Session 2 re-reads both files (``cat``,
unchanged since session 1 ended), runs the same failing check and then writes
src/parser.py: exactly 2 re-reads, 1 repeated command, first edit at call 4,
8 responses of 1,009 tokens to it (the fake server's usage is pinned).
Session 3 goes straight to the file in flight: 0 and 0, first edit at call 1.
Both wakeups (the system prompt the adapter handed over) recall every probe.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests import trail_scenario as ts
from tests.claude_fixtures import API_KEY, PORT, Jail, claude_bin, jail, start_and_first_turn
from tests.conftest import CONSTRAINT, TASK, git, wait_until

__all__ = ["claude_bin", "jail"]
USAGE_IN = 1000



def idle(jail: Jail) -> None:
    wait_until(lambda: (r := jail.project.unit_status("claude")) and r["state"] == "running" and r["turn"] == "idle",
               90, interval=0.1, what="the turn end")


def say(jail: Jail, *messages: str) -> None:
    """Each message is one tool call and a closing message; wait for each turn's end."""
    for text in messages:
        before = len(jail.turns())
        jail.project.agentd("send", "claude", text)
        wait_until(lambda: len(jail.turns()) >= before + 2, 90, what=f"the tool call and its answer: {text[:40]}")
        idle(jail)


def cycle(jail: Jail) -> dict:
    project = jail.project
    old = project.unit_status("claude")["session"]
    project.agentd("checkpoint", "claude")
    record = project.history("claude")[-1]
    assert record["old_session"] == old and record["outcome"] == "respawned", record
    wait_until(lambda: (r := project.unit_status("claude")) and r["session"] == record["new_session"]
               and r["turn"] == "idle" and r, 90, interval=0.1, what="the fresh session's first turn")
    return record


def test_claude_resumed_sessions_report_exact_re_reads_repeats_and_recall(jail: Jail, claude_bin: Path) -> None:
    project, root = jail.project, jail.project.root
    git(root.parent, "init", "-q", str(root))
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    ts.project_files(root)
    (root / ".agent" / "constraints.md").write_text(f"# Hard constraints\n\n- {CONSTRAINT}\n")
    (root / ".agent" / "current-task.md").write_text(f"# Current task\n\n{TASK}\n\nState at interruption: (not set)\n")
    project.agentd("decide", "empty input parses to an empty list", "--why", "because callers iterate, so [] is safe")
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{PORT}", "ANTHROPIC_API_KEY": API_KEY}
    project.unit("claude", f"""
[unit]
enabled = false
[agent]
kind = "claude"
command = [{json.dumps(str(claude_bin))}]
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}
[scope]
paths = ["src/**"]
[restart]
stop_timeout = 5
[context]
window = 200000
[checkpoint]
deadline = 60
grace = 2
""")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    project.agentd("reload")
    tmp = jail.control.with_suffix(".tmp")
    # every response reports 1,000 input tokens and 9 output: the tokens to resume count responses exactly
    tmp.write_text(json.dumps({"checkpoint": "ignore", "cwd": str(root.resolve()), "input_tokens": USAGE_IN}))
    os.replace(tmp, jail.control)
    start_and_first_turn(jail)
    project.agentd("send", "claude", ts.ASK)
    wait_until(lambda: ts.EDIT_NEW in (root / ts.EDIT).read_text(), 90, what="the scenario's edit")
    wait_until(lambda: any(ts.DONE in json.dumps(e.get("reply")) for e in jail.entries()), 60, what="the scenario's end")
    idle(jail)
    first = cycle(jail)
    cold = first["stopped"]["resumed"]
    assert (cold["previous"], cold["actions_to_edit"], cold["cold_actions_to_edit"]) == (None, 5, 5)
    assert first["recall"]["missing"] == [] and first["recall"]["recall"] == 1.0
    assert first["recall"]["checked"] == ["task", "decision (global)", f"file in flight: {ts.EDIT}", "last command",
                                          "WIP commit", "constraint 1"]
    parser = str((root / ts.EDIT).resolve())
    say(jail, f"RUN: cat {ts.READS[0]}", f"RUN: cat {ts.READS[1]}", f"RUN: {ts.TEST_COMMAND}",
        f"WRITE: {parser} def parse(text):  return list(text.split()) if text else []")
    second = cycle(jail)
    resumed = second["stopped"]["resumed"]
    assert resumed["session"] == first["new_session"] and resumed["previous"] == first["old_session"]
    assert resumed["rereads"] == list(ts.READS) and resumed["repeated"] == [ts.TEST_COMMAND]
    assert (resumed["rereads_count"], resumed["repeated_count"], resumed["breaks_count"]) == (2, 1, 0)
    assert (resumed["actions_to_edit"], resumed["cold_actions_to_edit"]) == (4, 5)
    assert resumed["seconds_to_edit"] is not None and resumed["seconds_to_edit"] >= 0
    assert resumed["tokens_to_edit"] == 8 * (USAGE_IN + 9)  # the wakeup's answer, a call and its answer x 3, the Write
    assert second["recall"]["recall"] == 1.0
    say(jail, f"WRITE: {parser} def parse(text):  return text.split()")
    third = cycle(jail)
    straight = third["stopped"]["resumed"]
    assert (straight["rereads_count"], straight["repeated_count"], straight["actions_to_edit"]) == (0, 0, 1)
    report = json.loads(project.agentd("report", "claude", "--json").stdout)
    assert [(s["session"], s["rereads"], s["repeated"], s["actions_to_edit"], s["tokens_to_edit"], s["recall"])
            for s in report["sessions"]] == [(first["new_session"], 2, 1, 4, 8 * (USAGE_IN + 9), 1.0),
                                             (second["new_session"], 0, 0, 1, 2 * (USAGE_IN + 9), 1.0),
                                             (third["new_session"], None, None, None, None, 1.0)]
    print(project.agentd("report", "claude").stdout)
