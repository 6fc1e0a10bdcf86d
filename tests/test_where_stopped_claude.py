"""Issue 15 with the REAL Claude Code CLI (2.1.328) against the fake Messages API, offline (see test_claude_e2e).

The fake model plays tests/trail_scenario.py (``Read`` twice, ``TodoWrite``, a
failing ``Bash``, an ``Edit`` in scope, ``TodoWrite`` again), never writes
engram or decisions and ignores the checkpoint prompt.  The next session's first
request (its system prompt carries the wakeup) must hold the ask, the todos
with the done ones, the edited path, the failing command with its status and
the WIP commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from supervisor.adapters.claude import KICKOFF
from tests import trail_scenario as ts
from tests.claude_fixtures import API_KEY, PORT, Jail, claude_bin, jail, last_user_text, start_and_first_turn
from tests.conftest import git, wait_until

__all__ = ["claude_bin", "jail"]



def checkout(root: Path) -> tuple[str, str, str]:
    """Status (without .agent/, which the [auto] checkpoint writes), HEAD, the index file's hash."""
    return (git(root, "status", "--porcelain=v2", "--untracked-files=all", "--", ".", ":!.agent"),
            git(root, "rev-parse", "HEAD"), hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest())


def test_claude_wakes_up_where_it_stopped_after_ignoring_the_checkpoint(jail: Jail, claude_bin: Path) -> None:
    project, root = jail.project, jail.project.root
    git(root.parent, "init", "-q", str(root))
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    ts.project_files(root)
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
[claude]
allow = ["Bash(python3 tests/check_parser.py:*)"]  # the scenario's failing test run, without asking
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
    tmp.write_text(json.dumps({"checkpoint": "ignore", "cwd": str(root.resolve())}))
    os.replace(tmp, jail.control)
    old, _ = start_and_first_turn(jail)
    project.agentd("send", "claude", ts.ASK)
    wait_until(lambda: ts.EDIT_NEW in (root / ts.EDIT).read_text(), 90, what="the scenario's edit")
    wait_until(lambda: any(ts.DONE in json.dumps(e.get("reply")) for e in jail.entries()), 60, what="the scenario's end")
    wait_until(lambda: (r := project.unit_status("claude")) and r["turn"] == "idle", 60, interval=0.1, what="the turn end")
    ts.assert_indexed_from_the_record(project, "claude")
    left = checkout(root)
    before = len(jail.turns())
    project.agentd("checkpoint", "claude")
    record = [json.loads(line) for line in project.agentd("history", "claude", "--json").stdout.splitlines()][-1]
    assert record["flush"] == "auto" and record["outcome"] == "respawned" and record["old_session"] == old["session"]
    wip = record["wip"]
    assert wip and record["stopped"]["ask"] == ts.ASK
    body = wait_until(lambda: next((b for b in jail.turns()[before:] if KICKOFF in last_user_text(b)), None), 90,
                      what="the fresh session's first request")
    system = body.get("system")
    text = system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system or [] if isinstance(b, dict))
    section = text.split("## Where you stopped")[1].split("\n## ")[0]  # in the system prompt of the first request
    assert f"session {old['session']}, checkpoint at" in section
    assert f"“{ts.ASK}”" in section and "2 of 3 steps done" in section
    assert "[x] “Read the parser and the lexer”" in section and "[x] “Run the parser check”" in section
    assert f"`{ts.EDIT}`" in section and f"`{ts.TEST_COMMAND}` → exit {ts.TEST_EXIT}" in section
    assert wip[:12] in section
    assert ts.EDIT_NEW in git(root, "show", f"{wip}:{ts.EDIT}")
    assert checkout(root) == left
