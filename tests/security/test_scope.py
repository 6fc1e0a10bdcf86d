"""Scope enforced by the kernel, and a person's own edits never touched (issue 14 §3), with the real daemon.

The agents are the fake agent under Landlock (this machine: ABI 7) or, with
``fence = "off"``, watched only.  Each assertion about what agentd did not do
is made after something that shows it had the chance (the change was seen,
a later violation was recorded, the agent's turn ended).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import Project, session_inputs, wait_until


def agent(project: Project, name: str, *, workdir: str = ".", scope: str = "", fence: str = "auto",
          on_violation: str = "warn") -> Path:
    """A fake-agent unit; returns its input log (outside the project: the test's own instrument, writable)."""
    inputs = project.root.parent / f"{name}-inputs.jsonl"
    inputs.touch()
    argv = json.dumps(["python", "-m", "supervisor.fakeagent", "--input-log", str(inputs)])
    project.unit(name, f"""
[agent]
command = {argv}
workdir = "{workdir}"
prompt = "fake> $"
[scope]
{scope}
writable = ["{inputs}"]
fence = "{fence}"
on_violation = "{on_violation}"
[restart]
stop_timeout = 3
[checkpoint]
enabled = false
[wakeup]
on_start = false
""")
    return inputs


def violations(project: Project) -> list[dict]:
    out = project.agentd("violations", "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def said(project: Project, unit: str, text: str, count: int = 1) -> str:
    """Wait until ``text`` appears ``count`` times in the unit's clean transcript; the transcript."""
    return wait_until(lambda: (t := project.transcript(unit)).count(text) >= count and t, 30,
                      what=f"{text!r} in {unit}'s transcript")


def test_a_fenced_agent_cannot_write_outside_its_scope_and_the_violation_names_it(project: Project) -> None:
    root = project.root
    (root / "src").mkdir()
    (root / "docs").mkdir()
    project.agentd("init")
    agent(project, "web", scope='paths = ["src/**"]')
    project.agentd("start")
    row = project.wait_state("web", "running")
    assert row["scope"] == "fenced (Landlock ABI 7)"
    project.agentd("send", "web", "write docs/out.md outside")
    said(project, "web", "Permission denied: 'docs/out.md'")
    project.agentd("send", "web", "write src/in.py inside")
    said(project, "web", "wrote src/in.py")
    project.agentd("send", "web", "write .agent/notes-by-web.md memory")  # its memory is the daemon's to write
    said(project, "web", "Read-only file system: '.agent/notes-by-web.md'")
    project.agentd("send", "web", "env TMPDIR")
    tmp = wait_until(lambda: re.search(r"(/\S*agentd-\S+-web-\S+)", project.transcript("web")), 30, what="TMPDIR").group(1)
    project.agentd("send", "web", f"write {tmp}/scratch private")
    said(project, "web", f"wrote {tmp}/scratch")
    assert not (root / "docs" / "out.md").exists()
    assert (root / "src" / "in.py").read_text() == "inside\n"
    found = wait_until(lambda: [v for v in violations(project) if v["path"] == "docs/out.md"], 30,
                       what="the violation record")
    assert len(found) == 1
    v = found[0]
    assert v["unit"] == "web" and v["certainty"] == "kernel" and v["rule"].startswith("outside scope")
    assert not [x for x in violations(project) if x["path"] != "docs/out.md"], "only the refused write is a violation"
    listed = project.agentd("violations", "web").stdout
    assert "docs/out.md" in listed and "kernel" in listed
    assert project.unit_status("web")["violations"] == 1
    project.agentd("stop")
    assert not Path(tmp).exists(), "the private temp directory is removed with the session"


def test_two_agents_in_one_workdir_the_one_that_wrote_is_named(project: Project) -> None:
    root = project.root
    for d in ("auth", "migrations"):
        (root / d).mkdir()
    project.agentd("init")
    agent(project, "auth", scope='paths = ["auth/**"]')
    agent(project, "db", scope='paths = ["migrations/**"]')
    project.agentd("start")
    for name in ("auth", "db"):
        project.wait_state(name, "running")
    project.agentd("send", "auth", "write migrations/001.sql DROP TABLE users;")
    project.agentd("send", "db", "work 40")  # db is busy printing while auth writes: both look active
    said(project, "auth", "Permission denied: 'migrations/001.sql'")
    project.agentd("send", "db", "write migrations/002.sql CREATE TABLE t;")
    said(project, "db", "wrote migrations/002.sql")
    found = wait_until(lambda: [v for v in violations(project) if v["path"] == "migrations/001.sql"], 30,
                       what="the violation record")
    assert [(v["unit"], v["certainty"]) for v in found] == [("auth", "kernel")]
    assert not (root / "migrations" / "001.sql").exists()
    assert (root / "migrations" / "002.sql").read_text() == "CREATE TABLE t;\n"
    assert project.unit_status("db")["violations"] == 0 and project.unit_status("auth")["violations"] == 1
    assert not [v for v in violations(project) if v["unit"] == "db" or v["path"] == "migrations/002.sql"]


def _person_edits(root: Path) -> dict[Path, bytes]:
    """What a person does in their own shell, outside any agent: files in and out of the agents' directories."""
    edits = {
        root / "app" / "start.out": b"started by me\n",  # in the agent's workdir, outside its scope
        root / "units" / "web.toml": (root / "units" / "web.toml").read_bytes() + b"# my note\n",
        root / "notes" / "todo.md": b"- ship it\n",  # outside every agent's workdir
    }
    for path, data in edits.items():
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
    return edits


def test_a_persons_edits_are_never_touched(project: Project) -> None:
    root = project.root
    (root / "app" / "src").mkdir(parents=True)
    (root / "other").mkdir()
    project.agentd("init")
    # the harshest setting: a violation would be reverted (moved to quarantine)
    agent(project, "web", workdir="app", scope='paths = ["app/src/**"]', on_violation="revert")
    agent(project, "watched", workdir="other", scope='paths = ["other/src/**"]', fence="off", on_violation="revert")
    project.agentd("start")
    assert project.wait_state("web", "running")["scope"] == "fenced (Landlock ABI 7)"
    row = project.wait_state("watched", "running")
    assert row["scope"] == 'watched, not enforced ([scope] fence = "off")'
    assert 'scope: watched, not enforced ([scope] fence = "off")' in project.agentd("status").stdout
    project.agentd("send", "web", "sleep 30")  # mid-turn while the person works: the old guard blamed it
    wait_until(lambda: project.unit_status("web")["turn"] == "busy", 30, what="web to be busy")
    edits = _person_edits(root)
    project.agentd("note", "a note from the person's shell", "--confirmed")  # agentd's CLI writes .agent/
    # a real violation by the watched agent afterwards shows the guard saw and judged everything before it
    project.agentd("send", "watched", "write outside.txt mine")
    wait_until(lambda: any(v["path"] == "other/outside.txt" for v in violations(project)), 30,
               what="the watched agent's violation")
    assert not (root / "other" / "outside.txt").exists(), "the watched agent's own violation is reverted"
    for path, data in edits.items():
        assert path.read_bytes() == data, f"{path} was touched"
    quarantined = [p.name for p in (project.state / "quarantine").rglob("*") if p.is_file()]
    assert quarantined == ["outside.txt"], quarantined
    assert [v["path"] for v in violations(project)] == ["other/outside.txt"]
    assert project.unit_status("web")["violations"] == 0


def test_output_logged_inside_the_project_makes_no_warning_loop(project: Project) -> None:
    root = project.root
    (root / "src").mkdir()
    project.agentd("init")
    inputs = agent(project, "web", scope='paths = ["src/**"]', fence="off")
    project.agentd("start")
    project.wait_state("web", "running")
    project.agentd("send", "web", "work 3")
    said(project, "web", "fake> ", 2)
    # a person's shell copies what the agent prints into a file inside the project, for as long as it runs
    stop = root.parent / "stop-logging"
    logger = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "src, dst, stop = sys.argv[1:]\n"
        "n = 0\n"
        "while not os.path.exists(stop):\n"
        "    data = open(src, 'rb').read()\n"
        "    open(dst, 'ab').write(data[n:] or b'.')\n"
        "    n = len(data)\n"
        "    time.sleep(0.2)\n"), str(sorted((project.state / "transcripts" / "web").glob("*.txt"))[-1]),
        str(root / "agent.log"), str(stop)])
    try:
        project.agentd("send", "web", "work 5")  # the agent is active while the file keeps changing
        typed = lambda: [m for s in session_inputs(inputs) for m in s if "agent.log" in m]  # noqa: E731
        wait_until(typed, 30, what="the warning typed into web")
        size = (root / "agent.log").stat().st_size
        project.agentd("send", "web", "work 5")  # more output, more changes of agent.log while web is active
        wait_until(lambda: (root / "agent.log").stat().st_size > size + 200, 30, what="agent.log to grow after the warning")
        said(project, "web", "fake> ", 5)
    finally:
        stop.touch()
        logger.wait(10)
    project.agentd("send", "web", "write src/ok.py fine")  # a later change, judged after every agent.log change
    said(project, "web", "wrote src/ok.py")
    found = [v for v in violations(project) if v["path"] == "agent.log"]
    assert len(found) == 1 and found[0]["unit"] == "web", found
    assert len(typed()) == 1, typed()
