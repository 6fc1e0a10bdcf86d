"""The continuity cycle with the REAL Claude Code CLI against the project's fake Messages API.

Claude Code (the native binary, pinned by ``tests/install_claude.sh``) runs
under the real daemon, which runs with the fake server (``tests/fake_anthropic.py``)
inside a user + network namespace that has only loopback (``unshare -rn``), so
nothing can reach the internet.  The test talks to the daemon from outside
the namespace: the control socket is a file, so connecting to it crosses the
network namespace, and ``SO_PEERCRED`` sees the caller's uid mapped into the
namespace (root -> 0 as root; the caller's own uid -> 0 for an ordinary user),
which equals the daemon's.  The fake server's usage figures are steered through
its control file for the same reason.

Scenarios: the first request carries the wakeup in the system prompt; usage
past the threshold leads to a checkpoint whose tool call writes the engram
and a decision, and the new session's first request carries them; kill -9
leads to a restart with the wakeup; ``/compact`` typed by hand leads to the
wakeup re-injected through the SessionStart hook; stop leaves nothing running.

The binary: ``$AGENTD_CLAUDE_BIN`` or ``.cache/npm-claude`` (``bash tests/install_claude.sh``).
Missing, these tests are skipped with the reason, which fails them under CI
(tests/conftest.py).  Leftover processes are looked for in the jail's own
network namespace, never machine-wide.  The jail and its helpers: tests/claude_fixtures.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from typing import Any

import pytest

from supervisor.adapters.claude import KICKOFF
from tests.claude_fixtures import (
    FACT,
    Jail,
    claude_bin,
    jail,
    last_user_text,
    message_text,
    start_and_first_turn,
)
from tests.conftest import (
    CONSTRAINT,
    TASK,
    alive,
    processes_in_namespace,
    processes_of,
    wait_until,
)

__all__ = ["claude_bin", "jail"]


def system_text(body: dict[str, Any]) -> str:
    return json.dumps(body.get("system") or "")


def test_wakeup_threshold_checkpoint_respawn_and_stop(jail: Jail) -> None:
    project = jail.project
    row, first = start_and_first_turn(jail)
    # the wakeup is a real system message, and the first turn started at once
    assert CONSTRAINT in system_text(first) and TASK in system_text(first)
    assert KICKOFF in message_text(first)
    assert row["wakeup"] == "delivered via system-prompt"
    assert row["sandbox"]["mode"] == "acceptEdits" and not row["sandbox"]["bypassed"]
    # UserPromptSubmit added the hard constraints to the turn
    assert "hard constraint" in message_text(first) and CONSTRAINT in message_text(first)
    # Claude Code writes its transcript (the usage agentd reads) around the Stop hook, not always before it;
    # the window is Claude Code's own (its status line), not a guess from the model name
    ctx = wait_until(lambda: (c := project.unit_status("claude")["context"]) and c["exact"] and c["window_source"] == "agent" and c,
                     30, what="Claude Code's own token count and the window from the status line")
    assert ctx["used"] > 0 and ctx["ratio"] < 0.7
    window = ctx["window"]
    assert window >= 200_000 and ctx["window_warning"] is None
    # the agent's reported usage passes 70 % -> one checkpoint through the agent's own tool call
    grow = int(window * 0.75)
    jail.set_usage(grow, when="GROW")
    project.agentd("send", "claude", "GROW the context with this step")
    record = wait_until(lambda: project.history("claude") and project.history("claude")[0], 120, interval=0.2,
                        what="a checkpoint cycle")
    assert record["trigger"] == "threshold" and record["flush"] == "verified" and record["outcome"] == "respawned"
    assert record["exact"] and record["tokens_before"] >= grow and record["window"] == window
    engram = (project.root / ".agent" / "engram.md").read_text()
    notes = [line for line in engram.splitlines() if "fake model checkpoint" in line]
    assert len(notes) == 1
    decisions = (project.root / ".agent" / "decisions-claude.log").read_text()
    assert "fake model decision" in decisions
    seq = notes[0].split("fake model checkpoint ")[1].split(":")[0]
    # the new session's first request carries the engram line and the decision in its system prompt
    def new_first() -> dict[str, Any] | None:
        return next((b for b in jail.turns() if KICKOFF in message_text(b)
                     and f"fake model decision {seq}" in system_text(b)), None)

    body = wait_until(new_first, 90, what="the fresh session's first request")
    assert f"fake model checkpoint {seq}" in system_text(body) and CONSTRAINT in system_text(body)
    new = project.wait_state("claude", "running", 60)
    assert new["session"] == record["new_session"] and new["pid"] != row["pid"]
    assert not alive(row["pid"])
    # stop: the checkpoint on stop, then nothing is left running
    claude_pid = new["pid"]
    project.agentd("stop")
    jail.proc.wait(timeout=90)
    assert processes_of(project.root) == []
    assert not alive(claude_pid)
    assert [p.pid for p in processes_in_namespace(jail.namespace)] == [jail.server_pid()]  # only the fake model left


def test_kill_restarts_with_wakeup_and_compact_gets_the_wakeup_back(jail: Jail) -> None:
    project = jail.project
    # a briefing near the default budget (2,500 tokens), to show the hook answer is not cut
    steps = "\n".join(f"- step {i}: port parser module part {i} and check its tests" for i in range(120))
    (project.root / ".agent" / "current-task.md").write_text(
        f"# Current task\n\n{TASK}\n\n{steps}\n\nState at interruption: (not set)\n")
    row, _ = start_and_first_turn(jail)
    # kill -9 -> a restart that starts from the wakeup again
    before = len(jail.turns())
    os.kill(row["pid"], signal.SIGKILL)
    new = wait_until(lambda: (r := project.unit_status("claude")) and r["state"] == "running" and r["pid"] != row["pid"]
                     and r["turn"] == "idle" and r, 90, interval=0.1, what="the restarted session's first turn")
    assert new["restarts"] == 1 and "SIGKILL" in (new["last_exit"] or ""), new
    restarted = [b for b in jail.turns()[before:] if KICKOFF in message_text(b)]
    assert restarted and CONSTRAINT in system_text(restarted[0]) and TASK in system_text(restarted[0])
    # /compact typed by hand -> SessionStart(compact) -> agentd answers with the wakeup as additional context
    project.agentd("send", "claude", "/compact")
    wait_until(lambda: any(r["trigger"] == "agent compacted" for r in project.history("claude")),
               90, interval=0.2, what="the compaction to be recorded")
    record = project.history("claude")[-1]
    assert record["outcome"] == "wakeup re-injected" and record["wakeup_tokens"] > 0
    wait_until(lambda: project.unit_status("claude")["turn"] == "idle", 60, interval=0.1, what="the /compact to end")
    project.agentd("send", "claude", "hello after the compaction")
    body = wait_until(lambda: next((b for b in jail.turns() if "hello after the compaction" in last_user_text(b)), None),
                      90, what="the request after the compaction")
    context = message_text(body)  # the conversation itself, not the system prompt
    assert "SessionStart hook additional context" in context
    assert CONSTRAINT in context and TASK in context
    wakeup = project.agentd("wakeup", "claude").stdout.strip()
    assert len(wakeup) > 6000 and wakeup in context  # the whole briefing, as `agentd wakeup` prints it
    project.agentd("stop")
    jail.proc.wait(timeout=90)
    assert processes_of(project.root) == []


def test_claude_keeps_its_permissions_writes_in_scope_refuses_the_rest_and_never_waits(jail: Jail) -> None:
    project = jail.project
    start_and_first_turn(jail)
    root = project.root
    # a write in the scope goes through without asking, and brings the module's facts once
    before = len(jail.turns())
    project.agentd("send", "claude", f"WRITE: {root}/cl/inside.txt in-scope")
    wait_until(lambda: (root / "cl" / "inside.txt").exists(), 90, what="the write inside the scope")
    after = wait_until(lambda: [b for b in jail.turns()[before:] if "tool_result" in json.dumps((b.get("messages") or [])[-1:])],
                       90, what="the request after the write")[0]
    assert FACT in json.dumps(after["messages"]) and "known facts of module claude" in json.dumps(after["messages"])
    project.wait_state("claude", "running", 60)
    wait_until(lambda: project.unit_status("claude")["turn"] == "idle", 90, interval=0.1, what="the write's turn to end")
    # outside the scope, by the Write tool and by a shell command: refused at once, the turn goes on, nothing waits
    for text in (f"WRITE: {root}/outside.txt nope", f"RUN: python3 -c 'open(\"{root}/outside2.txt\", \"w\")'"):
        before = len(jail.turns())
        project.agentd("send", "claude", text)
        refused = wait_until(lambda: [b for b in jail.turns()[before:] if "tool_result" in json.dumps((b.get("messages") or [])[-1:])],
                             90, what="the refused call's result")[0]
        result = json.dumps(refused["messages"][-1])
        assert "is_error" in result and ("permission" in result.lower() or "approval" in result.lower()), result
        wait_until(lambda: project.unit_status("claude")["turn"] == "idle", 90, interval=0.1, what="the turn to go on and end")
    assert not (root / "outside.txt").exists() and not (root / "outside2.txt").exists()
    row = project.unit_status("claude")
    assert not row.get("frozen") and row["state"] == "running"
    assert len([b for b in jail.turns() if FACT in json.dumps(b.get("messages"))]) >= 1


def test_a_checkpoint_decision_snapshots_changed_files_from_inside_agentds_fence(jail: Jail) -> None:
    """Issue 25 §4 with Claude Code as people run it: acceptEdits under agentd's fence, a custom base URL, the
    person's own project settings.  The agent edits a file of its scope; the checkpoint's `agentd decide` runs
    inside the fence, where .agent/ is read-only, and reaches the daemon through the unit's inbox; the daemon
    hashes the changed file, and the next session's first request carries the decision and that file."""
    project = jail.project
    root = project.root
    (root / "cl" / ".claude").mkdir()
    # (a project file that pre-approves tools makes Claude Code 2.1.328 ask "Is this a project you trust?" first)
    (root / "cl" / ".claude" / "settings.json").write_text(json.dumps({"includeCoAuthoredBy": False}))
    for argv in (["init", "-q"], ["config", "user.email", "t@example.com"], ["config", "user.name", "t"],
                 ["add", "-A"], ["commit", "-qm", "the project"]):
        subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)
    committed = subprocess.run(["git", "rev-parse", "HEAD:cl/parser.py"], cwd=root, capture_output=True, text=True).stdout
    row, _ = start_and_first_turn(jail)
    assert row["scope"].startswith("fenced (Landlock") and row["sandbox"]["mode"] == "acceptEdits"
    project.agentd("send", "claude", f"WRITE: {root}/cl/parser.py VERSION = 3")
    wait_until(lambda: (root / "cl" / "parser.py").read_text().strip() == "VERSION = 3", 90, what="the edit")
    wait_until(lambda: project.unit_status("claude")["turn"] == "idle", 90, interval=0.1, what="the edit's turn to end")
    project.agentd("checkpoint", "claude", timeout=180)
    record = project.history("claude")[-1]
    assert record["flush"] == "verified" and record["outcome"] == "respawned", record
    line = (root / ".agent" / "decisions-claude.log").read_text().splitlines()[-1]
    assert "fake model decision" in line and line.endswith("| by: claude")
    decision = line.split("decision: ")[1].split(" |")[0]
    ident = line.split("snapshot: ")[1].split(" |")[0]
    snap = json.loads((root / ".agent" / "snapshots" / f"{ident}.json").read_text())
    now = subprocess.run(["git", "hash-object", "cl/parser.py"], cwd=root, capture_output=True, text=True).stdout
    assert snap["files"]["cl/parser.py"] == now.strip() != committed.strip()
    assert not any(not p.startswith("cl/") for p in snap["files"]), snap["files"]  # the unit's scope only
    body = wait_until(lambda: next((b for b in jail.turns() if KICKOFF in message_text(b) and decision in system_text(b)),
                                   None), 90, what="the fresh session's first request")
    assert ident in system_text(body)
    assert re.search(r"(added|modified) since [^:]+: [^\\]*cl/parser\.py", system_text(body)), system_text(body)


@pytest.mark.parametrize("jail", ["window = 200000"], indirect=True)
def test_a_unit_window_smaller_than_claudes_own_is_the_one_checkpointed_against(jail: Jail) -> None:
    """Issue 26 §1 as a person runs Claude Code: a custom ANTHROPIC_BASE_URL, no login, the unit's own window.
    Claude Code reports 1,000,000 in its status line; the unit says 200,000.  agentd uses 200,000 (warning of
    the disagreement), starts Claude Code with its own compaction above hard_limit of it, and checkpoints at
    70 % of 200,000: 65 % does not, 75 % does (15 % of what Claude Code says)."""
    project = jail.project
    row, _ = start_and_first_turn(jail)
    environ = open(f"/proc/{row['pid']}/environ", "rb").read().split(b"\0")
    assert b"CLAUDE_CODE_AUTO_COMPACT_WINDOW=217000" in environ  # compacts at 184,000: 92 % of 200,000
    ctx = wait_until(lambda: (c := project.unit_status("claude")["context"]) and c["exact"] and c["window_warning"] and c,
                     30, what="the status line's window beside the unit's")
    assert (ctx["window"], ctx["window_source"]) == (200_000, "unit")
    assert "1000000" in ctx["window_warning"] and "uses the smaller, 200000" in ctx["window_warning"]
    for tokens, word in ((130_000, "BELOW"), (150_000, "ABOVE")):
        jail.set_usage(tokens, when=word)
        project.agentd("send", "claude", f"{word} the threshold with this step")
        if word == "BELOW":
            seen = wait_until(lambda: (r := project.unit_status("claude")) and r["turn"] == "idle"
                              and r["context"]["used"] >= tokens and r, 90, interval=0.1, what="the turn at 65 %")
            assert seen["context"]["ratio"] == 0.65 and seen["state"] == "running"
    record = wait_until(lambda: project.history("claude") and project.history("claude")[0], 120, interval=0.2,
                        what="a checkpoint cycle")
    assert record["trigger"] == "threshold" and record["flush"] == "verified" and record["outcome"] == "respawned"
    assert record["window"] == 200_000 and 150_000 <= record["tokens_before"] < 160_000, record
    assert [r["trigger"] for r in project.history("claude")] == ["threshold"]  # 65 % made none; no compaction of its own
    project.agentd("stop")
    jail.proc.wait(timeout=90)
