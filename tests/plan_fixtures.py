"""A plan's run with the real daemon and the fake agent: the project, the plan file and what the tests read.

Shared by tests/test_plan_e2e.py and tests/test_plan_web.py (test modules never import each other).
A git project with two modules ``a/`` and ``b/``, a fake-agent unit for each
(``--plan-script``: what it does for each task, supervisor/fakeagent/plan.py),
and ``plans/night.toml``: 6 tasks, whose ``[notify]`` command appends each
event to a file.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.conftest import Project, git, wait_until

NOTIFIER = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read())"
SCRIPT = {"tasks": {
    "a1": {"attempts": [["put a/one.txt one", "claim"]]},
    "a2": {"attempts": [["put a/two.txt broken", "claim"], ["put a/two.txt fixed", "claim"]]},
    "a3": {"every": ["work 30"]},
    "b1": {"attempts": [["put b/one.txt one", "claim"]]},
    "b2": {"attempts": [["put b/two.txt two", "claim"]]},
    "b3": {"attempts": [["put b/three.txt three", "claim"]]},
}}
CHECKS = {
    "a1": ["grep -qx one a/one.txt"],
    "a2": ["cat a/two.txt && grep -qx fixed a/two.txt"],
    "a3": ["test -f a/three.txt"],
    "b1": ["grep -qx one b/one.txt"],
    "b2": ["grep -qx two b/two.txt", "test ! -e a/one.txt || grep -qx one a/one.txt"],
    "b3": ["test -f b/three.txt"],
}


def plan_text(notify_log: Path, deadline: str = "15m", extra: str = "", sections: str = "") -> str:
    tasks = []
    for tid, unit, after, more in (("a1", "a", [], ""), ("a2", "a", [], ""), ("a3", "a", [], "tokens = 3000"),
                                   ("b1", "b", [], ""), ("b2", "b", [], ""), ("b3", "b", ["a3"], "")):
        tasks.append(f"""
[[task]]
id = "{tid}"
unit = "{unit}"
ask = "Write the file of task {tid}."
done_when = {json.dumps(CHECKS[tid])}
after = {json.dumps(after)}
{more}
""")
    return f"""
[plan]
description = "The e2e night: two modules, six tasks"
deadline = "{deadline}"
tokens = 5_000_000
{extra}

[defaults]
max_attempts = 3
check_timeout = "60s"

[spinning]
turns = 50
tokens_without_diff = 50_000_000

[notify]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(NOTIFIER)}, {json.dumps(str(notify_log))}]
{sections}
""" + "".join(tasks)


def setup(project: Project, tmp: Path, deadline: str = "15m", extra: str = "",
          script: dict[str, Any] | None = None, web: bool = False, sections: str = "") -> Path:
    root = project.root
    git(root.parent, "init", "-q", "-b", "main", str(root))
    project.agentd("init")
    (root / ".gitignore").write_text(".agentd/\n*-inputs.jsonl\n")
    for module in ("a", "b"):
        (root / module).mkdir()
        (root / module / "README").write_text(f"module {module}\n")
    script_path = tmp / "script.json"
    script_path.write_text(json.dumps(SCRIPT if script is None else script))
    for unit in ("a", "b"):
        project.fake_unit(unit, "--plan-script", str(script_path), cycle=True, unit="enabled = false",
                          scope=f'paths = ["{unit}/**"]', checkpoint="deadline = 20")
    if web:
        (root / "etc").mkdir()
        (root / "etc" / "agentd.toml").write_text("[web]\nenabled = true\nport = 0\n")
    notify_log = tmp / "notify.jsonl"
    (root / "plans").mkdir()
    (root / "plans" / "night.toml").write_text(plan_text(notify_log, deadline, extra, sections))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    return notify_log


def report(project: Project) -> dict[str, Any]:
    return json.loads(project.agentd("plan", "report", "night", "--json").stdout)


def state(project: Project) -> dict[str, Any] | None:
    path = project.state / "plans" / "night" / "state.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def ended(project: Project, timeout: float = 240) -> dict[str, Any]:
    return wait_until(lambda: (s := state(project)) and s["status"] == "ended" and s, timeout, 0.2, "the plan to end")


def notified(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def commits(project: Project, base: str) -> list[tuple[str, str]]:
    """(commit, task) of each commit on the plan's branch after ``base``, oldest first."""
    out = git(project.root, "log", "--reverse", "--format=%H %(trailers:key=Agentd-Task,valueonly,separator=)",
              f"{base}..agentd/night")
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]  # type: ignore[misc]


def rerun_checks(project: Project, commit: str, task: str, tmp: Path) -> None:
    """The task's checks, run again on the commit itself (checked out with git archive, as a person would)."""
    data = subprocess.run(["git", "archive", commit], cwd=project.root, capture_output=True, check=True).stdout
    where = tmp / f"rerun-{task}"
    where.mkdir()
    tarfile.open(fileobj=io.BytesIO(data)).extractall(where, filter="data")
    for command in CHECKS[task]:
        result = subprocess.run(["/bin/sh", "-c", command], cwd=where, capture_output=True, text=True)
        assert result.returncode == 0, (task, command, result.stdout, result.stderr)


