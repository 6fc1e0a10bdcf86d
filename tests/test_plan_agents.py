"""A plan's task with the REAL Codex CLI and the REAL Claude Code, offline against the fake model servers.

For each agent: the agent claims the task done (its turn-end message ends
with ``TASK DONE: calc``: Codex's notify, Claude Code's Stop hook carry it);
agentd's own check fails; the failure's tail reaches the agent as its next
turn (the model server receives it); the agent fixes the file and claims
again; the check passes and the task's commit lands on the plan's branch.

The fake models (tests/fake_responses.py, tests/fake_anthropic.py) follow
``RUN: <command>`` in the latest user message and answer a tool's ``SAY:``
line: so the model's first fix is the ask's command, and its second the one
the check printed in its failure: the test proves the tail reached the model
by the model acting on it.  The jails and their skips: tests/codex_fixtures.py,
tests/claude_fixtures.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.claude_fixtures import Jail as ClaudeJail
from tests.claude_fixtures import claude_bin, jail as claude_jail, last_user_text
from tests.codex_fixtures import PORT, Jail as CodexJail, codex_bin, jail
from tests.conftest import Project, git, wait_until

__all__ = ["claude_bin", "claude_jail", "codex_bin", "jail"]

CHECK = """\
import pathlib, sys
path = pathlib.Path(sys.argv[1])
text = path.read_text().strip() if path.exists() else "(missing)"
if text == "x = 2":
    print("calc ok")
    sys.exit(0)
print(f"expected {path} to say x = 2; it says: {text}")
print("RUN: printf 'x = 2\\\\n' > calc.py && echo 'SAY: TASK DONE: calc'")
sys.exit(1)
"""


def plan_file(unit: str, module: str) -> str:
    return f"""
[plan]
description = "one task, checked by agentd"
deadline = "15m"
tokens = 5_000_000

[[task]]
id = "calc"
unit = "{unit}"
ask = '''Create {module}/calc.py defining x = 2.
RUN: printf 'x = 1\\n' > calc.py && echo 'SAY: TASK DONE: calc\''''
done_when = ["python3 checks/calc.py {module}/calc.py"]
max_attempts = 3
"""


def commit_the_plan(project: Project, unit: str, module: str) -> str:
    root = project.root
    if not (root / ".git").exists():
        git(root.parent, "init", "-q", "-b", "main", str(root))
    (root / ".gitignore").write_text(".agentd/\n")
    (root / "checks").mkdir(exist_ok=True)
    (root / "checks" / "calc.py").write_text(CHECK)
    (root / "plans").mkdir(exist_ok=True)
    (root / "plans" / "p.toml").write_text(plan_file(unit, module))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    return git(root, "rev-parse", "HEAD").strip()


def run_the_plan(project: Project, base: str) -> dict[str, Any]:
    """Start the plan, wait for its end; the report, after the checks on the branch's commit."""
    project.agentd("plan", "start", "p", timeout=180)
    path = project.state / "plans" / "p" / "state.json"
    wait_until(lambda: path.exists() and json.loads(path.read_text())["status"] == "ended", 300, 0.5, "the plan's end")
    report = json.loads(project.agentd("plan", "report", "p", "--json").stdout)
    task = report["tasks"][0]
    assert task["state"] == "done", report
    assert task["attempts"] == 2 and [c["passed"] for c in task["checks"]] == [False, True], task
    assert "it says: x = 1" in task["checks"][0]["results"][0]["tail"]
    # the commit landed on the plan's branch: one task commit, the fixed file, named for the task
    log = git(project.root, "log", "--format=%H %s", f"{base}..agentd/p").splitlines()
    assert len(log) == 1 and log[0].split()[0] == task["commit"] and "p: calc" in log[0], log
    module = task["unit"] if task["unit"] != "claude" else "cl"
    assert git(project.root, "show", f"agentd/p:{module}/calc.py") == "x = 2\n"
    assert "Agentd-Task: calc" in git(project.root, "show", "-s", "--format=%B", "agentd/p")
    # its check passes again on that very commit; the person's HEAD did not move
    tree = project.root.parent / "rerun"
    tree.mkdir()
    subprocess.run(f"git -C {project.root} archive agentd/p | tar -x -C {tree}", shell=True, check=True)
    assert subprocess.run(["python3", "checks/calc.py", f"{module}/calc.py"], cwd=tree).returncode == 0
    assert git(project.root, "rev-parse", "HEAD").strip() == base
    return report


# ------------------------------------------------------------------------------------------ Codex

def codex_unit(project: Project, binary: Path) -> None:
    project.agentd("init")
    (project.root / "cx").mkdir()
    (project.root / "cx" / "README").write_text("the cx module\n")
    project.unit("cx", f"""
[unit]
enabled = false
[agent]
kind = "codex"
command = [{json.dumps(str(binary))}]
workdir = "cx"
[scope]
paths = ["cx/**"]
[codex]
home = "private"
model = "fake-model"
base_url = "http://127.0.0.1:{PORT}/v1"
request_max_retries = 1
stream_max_retries = 1
[restart]
stop_timeout = 5
[checkpoint]
deadline = 60
grace = 2
""")
    # Codex asks "Trust this folder?" in a git repository whatever -c says: trust the project in its own home
    home = project.state / "codex" / "cx"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[projects.{json.dumps(str(project.root.resolve()))}]\ntrust_level = "trusted"\n')


def test_codex_claims_agentd_checks_the_failure_reaches_it_it_fixes_and_the_commit_lands(
        project: Project, jail: CodexJail, codex_bin: Path) -> None:
    codex_unit(project, codex_bin)
    base = commit_the_plan(project, "cx", "cx")
    jail.start()
    report = run_the_plan(project, base)
    assert report["totals"]["commits"] == 1
    # the model server received the failure's tail as the user's next message, and then ran the fix it named
    def users(item: dict[str, Any]) -> list[str]:
        out = []
        for part in item["body"].get("input") or []:
            if part.get("type") == "message" and part.get("role") == "user":
                content = part.get("content")
                out.append(content if isinstance(content, str) else "\n".join(c.get("text", "") for c in content or []))
        return out

    # the task reached Codex in its wakeup (developer instructions: "Current task", with its checks)
    first = jail.first_requests()[0]
    developer = json.dumps([i for i in first["body"]["input"] if i.get("role") == "developer"])
    assert "[plan p / task calc / attempt 1 of 3]" in developer and "python3 checks/calc.py cx/calc.py" in developer
    assert "TASK DONE: calc" in developer
    told = [r for r in jail.requests() if (users(r) or [""])[-1].startswith("[plan p / task calc / attempt 2 of 3]")]
    assert told and "attempt 1 FAILED" in users(told[0])[-1] and "it says: x = 1" in users(told[0])[-1]
    claims = [e for e in project.events("plan_claim") if e.get("unit") == "cx"]
    assert [c["via"] for c in claims] == ["agent-turn-complete", "agent-turn-complete"], claims


# ------------------------------------------------------------------------------------------ Claude Code

def test_claude_code_claims_agentd_checks_the_failure_reaches_it_it_fixes_and_the_commit_lands(
        claude_jail: ClaudeJail) -> None:
    project = claude_jail.project
    base = commit_the_plan(project, "claude", "cl")
    run_the_plan(project, base)
    # the task reached Claude Code in its wakeup (the system prompt's "Current task", with its checks)
    system = json.dumps(claude_jail.turns()[0].get("system") or "")
    assert "[plan p / task calc / attempt 1 of 3]" in system and "python3 checks/calc.py cl/calc.py" in system
    told = [b for b in claude_jail.turns() if "[plan p / task calc / attempt 2 of 3]" in last_user_text(b)]
    assert told and "attempt 1 FAILED" in last_user_text(told[0]) and "it says: x = 1" in last_user_text(told[0])
    claims = [e for e in project.events("plan_claim") if e.get("unit") == "claude"]
    assert [c["via"] for c in claims] == ["Stop", "Stop"], claims
