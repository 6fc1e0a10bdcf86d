"""Issue 15 with the REAL Codex CLI (0.169.0) against the fake Responses server, offline (tests/codex_jail.py).

The fake model plays tests/trail_scenario.py: it reads two files, writes its
plan, runs a failing check, edits a file in scope with ``apply_patch``, updates
its plan, never writes engram or decisions and ignores the checkpoint prompt.
The next session's first request must carry the ask, the plan with its done
steps, the edited path, the failing command with its status and the WIP commit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests import trail_scenario as ts
from tests.codex_fixtures import Jail, codex_bin, git, jail, log, setup_trail, wait_idle
from tests.conftest import Project, wait_until

__all__ = ["codex_bin", "jail"]


def checkout(root: Path) -> tuple[str, str, str]:
    """Status (without .agent/, which the [auto] checkpoint writes), HEAD, the index file's hash."""
    return (git(root, "status", "--porcelain=v2", "--untracked-files=all", "--", ".", ":!.agent"),
            git(root, "rev-parse", "HEAD"), hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest())


def test_codex_wakes_up_where_it_stopped_after_ignoring_the_checkpoint(project: Project, jail: Jail, codex_bin: Path) -> None:
    setup_trail(project, codex_bin)
    jail.start()
    old = wait_idle(project)
    jail.call(op="control", checkpoint="ignore")
    project.agentd("send", "cx", ts.ASK)
    wait_until(lambda: ts.EDIT_NEW in (project.root / ts.EDIT).read_text(), 90, what="the scenario's edit")
    wait_until(lambda: any(ts.DONE in json.dumps(r.get("reply")) for r in log(jail)), 60, what="the scenario's end")
    wait_idle(project)
    ts.assert_indexed_from_the_record(project, "cx")
    left = checkout(project.root)
    project.agentd("checkpoint", "cx")
    record = [json.loads(line) for line in project.agentd("history", "cx", "--json").stdout.splitlines()][-1]
    assert record["flush"] == "auto" and record["outcome"] == "respawned" and record["old_session"] == old["session"]
    wip = record["wip"]
    assert wip and record["stopped"]["ask"] == ts.ASK
    firsts = wait_until(lambda: len(jail.first_requests()) >= 2 and jail.first_requests(), 90, what="the new session's request")
    # the wakeup is in the request, whichever message carries it (a user prompt today, developer instructions maybe)
    wakeup = next(t for t in _texts(firsts[-1]) if "## Where you stopped" in t)
    section = wakeup.split("## Where you stopped")[1].split("\n## ")[0]
    assert f"“{ts.ASK}”" in section
    assert "2 of 3 steps done" in section
    assert "[x] “Read the parser and the lexer”" in section and "[x] “Run the parser check”" in section
    assert "[>] “Make empty input parse”" in section
    assert f"`{ts.EDIT}`" in section
    assert f"`{ts.TEST_COMMAND}` → exit {ts.TEST_EXIT}" in section and "FAIL: empty input does not parse" in section
    assert wip[:12] in section
    assert ts.EDIT_NEW in git(project.root, "show", f"{wip}:{ts.EDIT}")
    assert checkout(project.root) == left


def _texts(request: dict) -> list[str]:
    """Every text of the request's input items (any role) and its instructions."""
    out = [str(request["body"].get("instructions") or "")]
    for item in request["body"].get("input") or []:
        content = item.get("content")
        out += [content] if isinstance(content, str) else [str(c.get("text") or "") for c in content or [] if isinstance(c, dict)]
    return out
