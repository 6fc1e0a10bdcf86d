"""Issue 26 §6, the smaller items: etc/wakeup.sh for a person at a shell, `task-state` without a placeholder task,
the state after a crash, an agent's repeated decisions that must not crowd out the person's, and each wakeup
indexed once (tests/test_eventindex.py::test_the_wakeup_typed_at_the_prompt_is_not_indexed_again)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from supervisor.continuity.keeper import Moment, UnitKeeper, crash_state, session_started
from supervisor.continuity.wakeup import build_wakeup
from supervisor.memory import AgentPaths, record_decision, update_task_state
from supervisor.memory.scaffold import init_store
from supervisor.memory.task import read_task

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
WHY = "because it must be decided, so we decide"


def agent_decision(root: Path, n: int, session: str, at: datetime) -> None:
    """The fake agent's decision at its checkpoint n, as its `agentd decide` through the inbox records it."""
    record_decision(root, f"fakeagent session {session} checkpoint {n}: keep the current plan",
                    f"because session {session} reached checkpoint {n}, so the plan carries over to the next session",
                    module="coder", now=at, by="coder")


def test_an_agents_repeated_decision_does_not_push_the_persons_out_of_the_last_five(tmp_path: Path) -> None:
    init_store(tmp_path)
    record_decision(tmp_path, "keep the wire format at v2", WHY, now=T0)
    record_decision(tmp_path, "parse empty input to an empty list", WHY, module="coder", now=T0 + timedelta(minutes=1))
    for n in range(1, 8):
        agent_decision(tmp_path, n, f"2026120{n}T0900{n}0.000000-ab12c{n}", T0 + timedelta(minutes=10 + n))
    text = build_wakeup(tmp_path, "coder").text
    shown = text.split("## Latest decisions")[1].split("\n## ")[0]
    assert "keep the wire format at v2" in shown and "parse empty input to an empty list" in shown
    assert shown.count("keep the current plan") == 1 and "checkpoint 7: keep the current plan" in shown
    assert "(recorded 7 times, the same but for its numbers)" in shown
    # a decision that differs in more than its numbers is its own, and a person's is never folded
    record_decision(tmp_path, "bump the parser to version 3", WHY, module="coder", now=T0 + timedelta(hours=1), by="coder")

    record_decision(tmp_path, "bump the parser to version 4", "because v3 broke the clients, so v4", module="coder",
                    now=T0 + timedelta(hours=2), by="coder")
    record_decision(tmp_path, "freeze the API for 2 weeks", WHY, now=T0 + timedelta(hours=3))
    record_decision(tmp_path, "freeze the API for 3 weeks", WHY, now=T0 + timedelta(hours=4))
    shown = build_wakeup(tmp_path, "coder").text.split("## Latest decisions")[1].split("\n## ")[0]
    for text in ("version 3", "version 4", "for 2 weeks", "for 3 weeks", "keep the current plan"):
        assert text in shown, (text, shown)


def test_task_state_for_a_module_without_a_task_writes_the_state_alone(tmp_path: Path) -> None:
    init_store(tmp_path)
    paths = AgentPaths(tmp_path)
    paths.current_task.write_text("# Current task\n\nPort the parser.\n\nState at interruption: (not set)\n")
    update_task_state(paths, "lexer done; next: the parser", module="coder")
    text = paths.task("coder").read_text()
    assert text == "# Task: coder\n\nState at interruption: lexer done; next: the parser\n"
    wakeup = build_wakeup(tmp_path, "coder").text
    assert "[coder] State at interruption: lexer done; next: the parser" in wakeup
    assert "[global] Port the parser." in wakeup and "(describe the current task here)" not in wakeup
    assert "is empty" not in wakeup  # the global task describes the work
    # the module's task, once given, is kept by the next state; no global task: the empty module task is named
    update_task_state(paths, "(new task)", task="Port the lexer", module="coder")
    update_task_state(paths, "half done", module="coder")
    assert read_task(paths, "coder").body == "Port the lexer"
    paths.current_task.write_text("# Current task\n\n(describe the current task here)\n\nState at interruption: (not set)\n")
    update_task_state(paths, "started", module="web")
    assert "the task in .agent/tasks/web.md is empty" in build_wakeup(tmp_path, "web").text
    update_task_state(paths, "global state")  # the global task keeps its template
    assert "(describe the current task here)" in paths.current_task.read_text()


def test_after_a_crash_the_state_line_names_the_crashed_session_unless_it_wrote_its_own(tmp_path: Path) -> None:
    init_store(tmp_path)
    paths = AgentPaths(tmp_path)
    update_task_state(paths, "fakeagent session A stopped at checkpoint 1", module="coder")
    written = paths.task("coder").stat().st_mtime
    later = datetime.fromtimestamp(written + 60, timezone.utc)
    crashed = later.strftime("%Y%m%dT%H%M%S.%f") + "-b2b2b2"
    assert session_started(crashed) == round(written + 60, 6) and session_started("no-session") is None
    state = crash_state(tmp_path, "coder", crashed, "2026-12-01T10:00:00Z", written + 120)
    assert state == (f'session {crashed} ended (crash) at 2026-12-01T10:00:00Z before it wrote its state: see '
                     '"Where you stopped"; the state before it: fakeagent session A stopped at checkpoint 1')
    assert read_task(paths, "coder").state == state
    # a second crash keeps the first state, not a nest of crash notes
    os.utime(paths.task("coder"), (written, written))
    again = crash_state(tmp_path, "coder", crashed.replace("-b2b2b2", "-c3c3c3"), "2026-12-01T11:00:00Z", written + 120)
    assert again is not None and again.count("ended (crash)") == 1 and again.endswith("stopped at checkpoint 1")
    # a session that wrote its state after it started, a start in the future, no state at all: left alone
    earlier = datetime.fromtimestamp(written - 60, timezone.utc).strftime("%Y%m%dT%H%M%S.%f") + "-d4"
    assert crash_state(tmp_path, "coder", earlier, "t", written + 120) is None
    assert crash_state(tmp_path, "coder", crashed, "t", written) is None
    assert crash_state(tmp_path, "web", crashed, "t", written + 120) is None  # the global task's "(not set)"
    # the keeper does it at a crash, and at no other moment
    update_task_state(paths, "fakeagent session A stopped", module="coder")
    os.utime(paths.task("coder"), (written, written))
    keeper = UnitKeeper(tmp_path, "coder", "coder", [], clock=lambda: written + 120)
    keeper.keep(Moment.CHECKPOINT, crashed, lambda: None)
    assert read_task(paths, "coder").state == "fakeagent session A stopped"
    keeper.keep(Moment.CRASH, crashed, lambda: None)
    assert read_task(paths, "coder").state.startswith(f"session {crashed} ended (crash)")


def test_wakeup_sh_at_a_shell_shows_the_memory_never_agentds_state(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    init_store(root)
    (root / "etc").mkdir()
    shutil.copy(REPO / "etc" / "wakeup.sh", root / "etc" / "wakeup.sh")
    (root / ".agentd" / "history").mkdir(parents=True)
    (root / ".agentd" / "history" / "coder.jsonl").write_text("{}\n")
    (root / "src").mkdir()
    (root / "src" / "parser.py").write_text("x = 1\n")
    AgentPaths(root).recent_summary.write_text("# Recent summary\n\nPorted the lexer; the parser is next.\n")
    record_decision(root, "keep the wire format at v2", WHY, now=T0)
    record_decision(root, "parse empty input to an empty list", WHY, module="coder", now=T0 + timedelta(minutes=1))
    record_decision(root, "web: serve the API under /v2", WHY, module="web", now=T0 + timedelta(minutes=2))
    for n in range(1, 7):
        agent_decision(root, n, f"s{n}", T0 + timedelta(minutes=10 + n))

    def run(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        return subprocess.run(["bash", "etc/wakeup.sh", *args], cwd=root, capture_output=True, text=True, check=True,
                              env=env, timeout=60).stdout

    out = run()
    assert ".agentd" not in out and "history" not in out and "src/parser.py" in out.split("## Files")[1]
    assert "Ported the lexer; the parser is next." in out.split("## Recent summary")[1]
    decisions = out.split("## Latest decisions")[1].split("\n## ")[0]
    # every log merged by time, the agent's repeats once: the person's decisions stay in the last five
    assert [ln.split(") ")[0] + ")" for ln in decisions.strip().splitlines()[1:]] == [
        "(global)", "(coder)", "(web)", "(coder)"]
    assert "keep the current plan | why" in decisions and "(recorded 6 times)" in decisions
    coder = run("coder").split("## Latest decisions")[1].split("\n## ")[0]
    assert "web: serve" not in coder and "parse empty input" in coder and "wire format" in coder
