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
import subprocess
from pathlib import Path

from tests import trail_scenario as ts
from tests.conftest import Project, wait_until
from tests.test_codex_e2e import PORT, Jail, codex_bin, jail, wait_idle  # noqa: F401 - fixtures

__all__ = ["codex_bin", "jail"]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def checkout(root: Path) -> tuple[str, str, str]:
    """Status (without .agent/, which the [auto] checkpoint writes), HEAD, the index file's hash."""
    return (git(root, "status", "--porcelain=v2", "--untracked-files=all", "--", ".", ":!.agent"),
            git(root, "rev-parse", "HEAD"), hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest())


def setup(project: Project, binary: Path) -> None:
    root = project.root
    git(root.parent, "init", "-q", str(root))
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    project.agentd("init")
    ts.project_files(root)
    project.unit("cx", f"""
[agent]
kind = "codex"
command = [{json.dumps(str(binary))}]
[codex]
home = "private"
model = "gpt-5.5"
base_url = "http://127.0.0.1:{PORT}/v1"
request_max_retries = 1
stream_max_retries = 1
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
    # Codex 0.169.0 ignores the adapter's -c trust override in a git repository and shows "Trust this
    # folder?" (issue 15 section 6, the agents helper's): trust the project in the private CODEX_HOME.
    home = project.state / "codex" / "cx"
    home.mkdir(parents=True, exist_ok=True)
    # gpt-5.5 (a model whose metadata offers the freeform apply_patch tool) announces its successor once
    (home / "config.toml").write_text(f'[projects.{json.dumps(str(root.resolve()))}]\ntrust_level = "trusted"\n'
                                      '[notice.model_migrations]\n"gpt-5.5" = "gpt-6-sol"\n')


def test_codex_wakes_up_where_it_stopped_after_ignoring_the_checkpoint(project: Project, jail: Jail, codex_bin: Path) -> None:
    setup(project, codex_bin)
    jail.start()
    old = wait_idle(project)
    jail.call(op="control", checkpoint="ignore")
    project.agentd("send", "cx", ts.ASK)
    wait_until(lambda: ts.EDIT_NEW in (project.root / ts.EDIT).read_text(), 90, what="the scenario's edit")
    wait_until(lambda: any(ts.DONE in json.dumps(r.get("reply")) for r in _log(jail)), 60, what="the scenario's end")
    wait_idle(project)
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


def _log(jail: Jail) -> list[dict]:
    out = []
    for line in jail.log.read_text().splitlines() if jail.log.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
