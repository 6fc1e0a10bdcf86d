"""Issue 15, end to end with the real daemon and the fake agent: an agent killed with -9 mid-task comes
back knowing where it stopped, and its uncommitted work is in a WIP commit while the checkout is untouched."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

from tests.conftest import Project, git, wait_until

FAILING = "python3 -c 'import sys; print(\"FAIL: parser rejects empty input\"); sys.exit(3)'"



def checkout(root: Path) -> tuple[str, str, str]:
    return (git(root, "status", "--porcelain=v2", "--untracked-files=all"), git(root, "rev-parse", "HEAD"),
            hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest())


def sessions_inputs(path: Path) -> list[list[str]]:
    sessions: list[list[str]] = []
    for line in path.read_text().splitlines() if path.exists() else []:
        item = json.loads(line)
        if item["n"] == 1:
            sessions.append([])
        sessions[-1].append(item["text"])
    return sessions


def idle(project: Project, unit: str) -> dict:
    return wait_until(lambda: (r := project.unit_status(unit)) and r["state"] == "running" and r["turn"] == "idle" and r,
                      60, interval=0.1, what=f"{unit} to be idle")


def test_a_generic_agent_killed_mid_task_wakes_up_where_it_stopped(project: Project, tmp_path: Path) -> None:
    root = project.root
    project.init_git()
    project.agentd("init")
    (root / "src").mkdir()
    (root / "src" / "parser.py").write_text("def parse(text):\n    return text.split()\n")
    (root / "src" / "old.py").write_text("old = 1\n")
    inputs = tmp_path / "inputs.jsonl"
    inputs.touch()  # the test's record, outside the project: writable for the fenced agent (it exists)
    argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(inputs)])
    project.unit("coder", f"""
[agent]
command = {argv}
prompt = "fake> $"
[scope]
paths = ["src/**"]
writable = [{json.dumps(str(inputs))}]
[restart]
stop_timeout = 3
initial_delay = 0.5
[context]
window = 200000
""")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    project.agentd("start")
    wait_until(lambda: len(sessions_inputs(inputs)) == 1, 60, what="the first wakeup")
    first = idle(project, "coder")
    # the agent edits a file in scope, deletes another, and runs a failing command
    project.agentd("send", "coder", "write src/parser.py # empty input: return [] (in flight)")
    idle(project, "coder")
    project.agentd("send", "coder", "run rm src/old.py")
    idle(project, "coder")
    project.agentd("send", "coder", f"run {FAILING}")
    wait_until(lambda: "[exit 3]" in project.transcript("coder"), 30, what="the failing command's status on screen")
    idle(project, "coder")
    left = checkout(root)
    os.kill(first["pid"], signal.SIGKILL)
    wait_until(lambda: len(sessions_inputs(inputs)) == 2, 60, what="the restarted session's wakeup")
    wakeup = sessions_inputs(inputs)[1][0]
    [wip] = [json.loads(line) for line in project.agentd("wip", "list", "coder", "--json").stdout.splitlines()]
    section = wakeup.split("## Where you stopped")[1].split("\n## ")[0]
    assert f"session {first['session']}, crash at" in section
    assert wip["commit"][:12] in section  # the WIP commit id
    assert "sys.exit(3)" in section and "→ exit 3" in section and "FAIL: parser rejects empty input" in section
    assert "`M src/parser.py`" in section and "`D src/old.py`" in section  # the edited and deleted files
    assert wakeup == project.agentd("wakeup", "coder").stdout  # what `agentd wakeup` prints
    # the commit has the edit; the checkout is exactly as the agent left it
    assert "(in flight)" in git(root, "show", f"{wip['commit']}:src/parser.py")
    assert "src/old.py" not in git(root, "ls-tree", "-r", "--name-only", wip["commit"])
    assert git(root, "rev-parse", f"{wip['commit']}^").strip() == left[1].strip()
    assert checkout(root) == left
    # the history names the commit
    crash = [json.loads(line) for line in project.agentd("history", "coder", "--json").stdout.splitlines()]
    assert [(r["trigger"], r["wip"]) for r in crash] == [("crash", wip["commit"])]
    assert crash[0]["stopped"]["commands"][-1]["exit_code"] == 3
    assert wip["commit"][:12] in project.agentd("history", "coder").stdout


def test_after_a_crash_the_tasks_state_names_the_crashed_session_and_no_placeholder_task_appears(project: Project) -> None:
    """Issue 26 §6: session A checkpoints (its agent's `agentd task-state` names A); session B crashes before it
    writes a state of its own: the next wakeup's state names B, and keeps what A said.  `task-state` for a
    module that had no task of its own wrote the state alone: no "(describe the current task here)"."""
    project.init_memory()
    project.fake_unit("coder", cycle=True, restart="initial_delay = 0.2")
    project.agentd("start")
    wait_until(lambda: len(project.inputs("coder")) == 1, 60, what="the first wakeup")
    a = idle(project, "coder")
    project.agentd("checkpoint", "coder")
    wait_until(lambda: len(project.inputs("coder")) == 2, 60, what="session B's wakeup")
    b = idle(project, "coder")
    task = (project.root / ".agent" / "tasks" / "coder.md").read_text()
    assert f"fakeagent session {a['session']} stopped at checkpoint 1" in task and "(describe" not in task
    os.kill(b["pid"], signal.SIGKILL)
    wait_until(lambda: len(project.inputs("coder")) == 3, 60, what="the wakeup after the crash")
    wakeup = project.inputs("coder")[2][0]
    state = next(line for line in wakeup.splitlines() if line.startswith("[coder] State at interruption:"))
    assert f"session {b['session']} ended (crash) at" in state, state
    assert f"the state before it: fakeagent session {a['session']} stopped at checkpoint 1" in state
    assert "(describe the current task here)" not in wakeup and "the task in .agent/tasks/coder.md is empty" not in wakeup
