"""Issue 16 end to end with the real daemon and the fake agent (a generic unit: its trail is its screen).

Session 1 reads two files, runs a failing check and edits a file; a checkpoint
cycle starts session 2, which re-reads both unchanged files and runs the same
check again; a second cycle starts session 3, which goes straight to the file
in flight.  The history and ``agentd report`` give exactly 2 re-reads and 1
repeated command for session 2, 0 and 0 for session 3, and a recall of 1.0
for both wakeups.
"""

from __future__ import annotations

import json

from tests.conftest import Project, git, wait_until

CHECK = "python3 tests/check.py"



def idle(project: Project) -> dict:
    return wait_until(lambda: (r := project.unit_status("coder")) and r["state"] == "running" and r["turn"] == "idle" and r,
                      60, interval=0.1, what="coder to be idle")


def say(project: Project, *messages: str) -> None:
    for text in messages:
        project.agentd("send", "coder", text)
        idle(project)


def cycle(project: Project, sessions: int) -> dict:
    project.agentd("checkpoint", "coder")
    wait_until(lambda: len(project.inputs("coder")) == sessions, 60, what=f"session {sessions}'s wakeup")
    idle(project)
    return project.history("coder")[-1]


def test_the_report_counts_re_reads_and_repeated_commands_of_each_resumed_session(project: Project) -> None:
    root = project.root
    git(root.parent, "init", "-q", str(root))
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    project.init_memory()
    (root / "src").mkdir()
    (root / "tests").mkdir()
    (root / "src" / "parser.py").write_text("def parse(text):\n    return None\n")
    (root / "src" / "lexer.py").write_text("def tokens(text):\n    return text.split()\n")
    (root / "tests" / "check.py").write_text("import sys\nprint('FAIL: empty input')\nsys.exit(2)\n")
    project.fake_unit("coder", cycle=True, scope='paths = ["src/**"]',
                      context="window = 200000")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    project.inputs_path("coder").touch()  # the fence lets the agent write its log: it must exist
    project.agentd("start")
    wait_until(lambda: len(project.inputs("coder")) == 1, 60, what="the first wakeup")
    idle(project)
    say(project, "run cat src/parser.py", "run cat src/lexer.py", f"run {CHECK}",
        "write src/parser.py # empty input: return [] (in flight)")
    first = cycle(project, 2)
    assert first["recall"]["recall"] == 1.0 and first["recall"]["missing"] == []
    assert first["recall"]["probes"] >= 5
    cold = first["stopped"]["resumed"]
    assert cold["previous"] is None and cold["session"] == first["old_session"]
    # session 2 re-reads both files (unchanged since session 1 ended) and runs the same check again
    say(project, "run cat src/parser.py", "run cat src/lexer.py", f"run {CHECK}")
    second = cycle(project, 3)
    resumed = second["stopped"]["resumed"]
    assert resumed["session"] == first["new_session"] and resumed["previous"] == first["old_session"]
    assert resumed["rereads"] == ["src/parser.py", "src/lexer.py"] and resumed["rereads_count"] == 2
    assert resumed["repeated"] == [CHECK] and resumed["repeated_count"] == 1
    assert any("no file edits" in c for c in resumed["cannot"])  # a screen shows no edits: said, not guessed
    # session 3 goes straight to the file in flight
    say(project, "write src/parser.py # done")
    third = cycle(project, 4)
    straight = third["stopped"]["resumed"]
    assert (straight["rereads_count"], straight["repeated_count"]) == (0, 0)
    report = json.loads(project.agentd("report", "coder", "--json").stdout)
    assert [(s["session"], s["rereads"], s["repeated"], s["recall"]) for s in report["sessions"]] == [
        (first["new_session"], 2, 1, 1.0), (second["new_session"], 0, 0, 1.0), (third["new_session"], None, None, 1.0)]
    assert report["units"]["coder"]["median_rereads"] == 1.0 and report["project"]["sessions"] == 3
    table = project.agentd("report").stdout
    assert "RE-READS" in table and "coder (median of 3)" in table and "PROJECT (median of 3)" in table
    print(table)
