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
    project.init_git()
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


LONG_CHECK = ("import sys\n"
              "for i in range(1500):\n"
              "    print(f'case {i:04d}: parse(empty) returned None where the callers iterate over the result')\n"
              "print('FAIL: empty input')\n"
              "sys.exit(2)\n")


def test_after_long_output_and_a_failing_check_the_wakeup_names_that_check_and_the_report_counts_exactly(
        project: Project) -> None:
    """Issue 26 §2-§4 end to end: a generic unit reads a file and runs a failing check whose long output takes its
    context past 70 %; the threshold checkpoint follows.  The next wakeup's last command is that check with its
    exit status (never agentd's own `agentd task-state`), its recall counts it; the next session re-reads the file
    and runs the check again, and the report counts exactly one re-read and one repeat."""
    root = project.root
    project.init_git()
    project.init_memory()
    (root / "src").mkdir()
    (root / "tests").mkdir()
    (root / "src" / "parser.py").write_text("def parse(text):\n    return None\n")
    (root / "tests" / "check.py").write_text(LONG_CHECK)
    # 40,000 tokens: the check's ~30,000 (120 KB) after the wakeup pass 70 % and stay under the hard limit
    project.fake_unit("coder", cycle=True, scope='paths = ["src/**"]', context="window = 40000")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    project.agentd("start")
    wait_until(lambda: len(project.inputs("coder")) == 1, 60, what="the first wakeup")
    idle(project)
    say(project, "run cat src/parser.py")
    project.agentd("send", "coder", f"run {CHECK}")
    wait_until(lambda: len(project.inputs("coder")) == 2, 90, what="the threshold checkpoint's fresh session")
    idle(project)
    first = project.history("coder")[-1]
    assert first["trigger"] == "threshold" and first["flush"] == "verified", first
    wakeup = project.inputs("coder")[1][0]
    stopped = wakeup.split("## Where you stopped")[1].split("\n## ")[0]
    listed = stopped.split("your last commands and how they ended (oldest first):\n")[1].split("\n- ")[0].splitlines()
    assert len(listed) == 1 and listed[0].startswith(f"  - `{CHECK}` → exit 2"), stopped  # agentd's own: not listed
    assert listed[0].endswith("FAIL: empty input”"), stopped  # how its long output ended
    assert "src/parser.py" in stopped  # the file read before the long output, from the whole transcript
    assert first["recall"]["recall"] == 1.0 and "last command" in first["recall"]["checked"], first["recall"]
    # session 2 re-reads the file and runs the same failing check: the same long output, the same threshold
    say(project, "run cat src/parser.py")
    project.agentd("send", "coder", f"run {CHECK}")
    wait_until(lambda: len(project.inputs("coder")) == 3, 90, what="the second threshold checkpoint's session")
    idle(project)
    second = project.history("coder")[-1]
    resumed = second["stopped"]["resumed"]
    assert resumed["session"] == first["new_session"] and resumed["previous"] == first["old_session"]
    assert (resumed["rereads"], resumed["repeated"]) == (["src/parser.py"], [CHECK]), resumed
    assert resumed["fragmented"] is True
    report = json.loads(project.agentd("report", "coder", "--json").stdout)
    row = next(s for s in report["sessions"] if s["session"] == first["new_session"])
    assert (row["rereads"], row["repeated"], row["twice"], row["fragmented"]) == (1, 1, None, True)
    assert report["units"]["coder"]["fragmented"] == 1
