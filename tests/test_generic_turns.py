"""Issue 26 §2 and §5 for agents without hooks: a generic REPL's trail and what agentd adds to its turns.

Pure parts first (the adapter with a clean transcript written by the test): the
trail is the whole transcript up to where the checkpoint prompt was typed; the
constraints digest goes with what agentd types, the facts of a module after the
first write in it.  Then the real daemon with the fake agent: a send carries the
digest, a write in the scope brings the module's facts at the turn end, and a
unit that talks to a shell says in status that agentd types nothing into it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from supervisor.adapters import make_adapter
from supervisor.adapters.generic import GenericAdapter
from supervisor.config.settings import Settings
from supervisor.config.units import parse_unit
from supervisor.continuity.policy import DEFAULT_PROMPT
from supervisor.memory.facts import add_fact
from supervisor.memory.scaffold import init_store
from tests.conftest import CONSTRAINT, Project, wait_until

WAKEUP = "# Wakeup briefing: module demo\n\n## Recent summary\n$ cat old.txt\n[exit 0]\n\nGo on with the task.\n"


def make(root: Path, agent: str = "", extra: str = "") -> GenericAdapter:
    (root / ".agent").mkdir(exist_ok=True)
    (root / ".agent" / "constraints.md").write_text(f"# Hard constraints\n\n- {CONSTRAINT}\n")
    units = root / "units"
    units.mkdir(exist_ok=True)
    text = (f'[agent]\ncommand = {json.dumps([sys.executable, "-m", "supervisor.fakeagent"])}\nprompt = "fake> $"\n'
            f'{agent}\n[scope]\npaths = ["src/**"]\n{extra}\n')
    (units / "demo.toml").write_text(text)
    adapter = make_adapter(parse_unit(units / "demo.toml", text), Settings(project_root=root))
    assert isinstance(adapter, GenericAdapter)
    return adapter


class Screen:
    """A session whose clean transcript the test writes (what the agent printed, and the echo of what was typed)."""

    def __init__(self, root: Path, sid: str = "s1") -> None:
        self.session_id = sid
        self.transcript = SimpleNamespace(text_path=root / f"{sid}.txt")
        self.transcript.text_path.write_text("")

    def prints(self, text: str) -> None:
        with open(self.transcript.text_path, "a") as fh:
            fh.write(text)


def session_with_a_checkpoint(adapter: GenericAdapter, root: Path) -> Any:
    adapter.launch(WAKEUP, "s1", {})
    s = Screen(root)
    s.prints("fake> ")
    adapter.outgoing(s, WAKEUP)
    s.prints(WAKEUP + "working\nfake> run cat src/parser.py\n$ cat src/parser.py\ndef parse(): ...\n[exit 0]\n")
    adapter.outgoing(s, "run python3 tests/check.py")
    s.prints("fake> run python3 tests/check.py\n$ python3 tests/check.py\n"
             + "".join(f"case {i}: None\n" for i in range(3000)) + "FAIL: empty input\n[exit 2]\n")
    adapter.outgoing(s, DEFAULT_PROMPT)
    s.prints(f"fake> {DEFAULT_PROMPT}\n$ agentd note: ok\n$ git status\nclean\n[exit 0]\n$ agentd task-state: ok\n"
             "checkpoint written\nfake> ")
    return s


def test_the_trail_is_the_whole_transcript_up_to_where_the_checkpoint_prompt_was_typed(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    s = session_with_a_checkpoint(adapter, tmp_path)
    trail = adapter.trail(s)
    assert [(a.command, a.exit_code) for a in trail.actions] == [("cat src/parser.py", 0), ("python3 tests/check.py", 2)]
    assert trail.files_read() == ["src/parser.py"] and trail.screen[-2:] == ["FAIL: empty input", "[exit 2]"]
    assert [a.command for a in trail.commands()] == ["python3 tests/check.py"]
    # a daemon reloaded since (the adapter does not know where it typed): the prompt's echo is the end
    again = make(tmp_path)
    assert [a.command for a in again.trail(s).commands(agentd=True)] == ["python3 tests/check.py"]
    # a checkpoint that kept the session, which then went on working: its later work is the trail's end
    adapter.outgoing(s, "run make lint")
    s.prints("fake> run make lint\n$ make lint\n[exit 1]\nfake> ")
    assert [a.command for a in adapter.trail(s).commands()] == ["python3 tests/check.py", "git status", "make lint"]
    assert [a.command for a in again.trail(s).commands()] == ["python3 tests/check.py"]  # the fallback's limit


def test_what_agentd_types_carries_the_constraints_digest_but_the_wakeup_and_the_repls_own_commands(
        tmp_path: Path) -> None:
    adapter = make(tmp_path)
    adapter.launch(WAKEUP, "s1", {})
    s = Screen(tmp_path)
    assert adapter.outgoing(s, WAKEUP) == WAKEUP  # it holds the constraints whole
    sent = adapter.outgoing(s, "run make test")
    assert sent.startswith("run make test\n\nagentd: the project's 1 hard constraint (never break them):")
    assert CONSTRAINT in sent and len(sent) - len("run make test") < 150 * 4
    assert CONSTRAINT in adapter.outgoing(s, DEFAULT_PROMPT) and adapter.outgoing(s, sent) == sent
    assert adapter.outgoing(s, "/run pytest") == "/run pytest" and adapter.outgoing(s, " !ls") == " !ls"
    lines = make(tmp_path, agent='paste = "lines"')
    lines.launch(None, "s2", {})
    one = lines.outgoing(Screen(tmp_path, "s2"), "run make test")
    assert "\n" not in one and one.startswith("run make test  agentd: the project's 1 hard constraint")
    shell = make(tmp_path, agent='talks_to = "shell"')
    shell.launch(None, "s3", {})
    assert shell.outgoing(Screen(tmp_path, "s3"), "ls -la") == "ls -la"
    # the digest follows constraints.md as it changes
    (tmp_path / ".agent" / "constraints.md").write_text("- never push to main\n- keep the wire format at v2\n")
    assert "keep the wire format at v2" in adapter.outgoing(s, "run make")


def test_a_modules_facts_come_once_per_session_after_its_first_write(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "api.py").write_text("VERSION = 2\n")
    init_store(tmp_path)
    add_fact(tmp_path, "demo", "the parser speaks API v2", "src/api.py:1")
    adapter.launch(None, "s1", {})
    s = Screen(tmp_path)
    first = adapter.written(s, tmp_path / "src" / "parser.py")
    assert first is not None and "known facts of module demo" in first and "the parser speaks API v2" in first
    assert adapter.written(s, tmp_path / "src" / "lexer.py") is None  # once per session
    assert adapter.written(s, tmp_path / "docs" / "x.md") is None  # no unit's module
    adapter.launch(None, "s2", {})
    assert adapter.written(Screen(tmp_path, "s2"), tmp_path / "src" / "parser.py") == first  # a new session: again
    shell = make(tmp_path, agent='talks_to = "shell"')
    shell.launch(None, "s3", {})
    assert shell.written(Screen(tmp_path, "s3"), tmp_path / "src" / "parser.py") is None
    lines = make(tmp_path, agent='paste = "lines"')  # typed line by line: one line, one message
    lines.launch(None, "s4", {})
    flat = lines.written(Screen(tmp_path, "s4"), tmp_path / "src" / "parser.py")
    assert flat is not None and "\n" not in flat and "the parser speaks API v2" in flat


def test_a_repl_gets_the_digest_with_a_send_and_its_modules_facts_at_the_turn_end_after_its_first_write(
        project: Project) -> None:
    project.init_memory()
    (project.root / "src").mkdir()
    (project.root / "src" / "api.py").write_text("VERSION = 2\n")
    project.agentd("fact", "add", "the parser speaks API v2", "--source", "src/api.py:1", "--module", "coder")
    project.fake_unit("coder", scope='paths = ["src/**"]', writable=())
    project.fake_unit("sh", agent='talks_to = "shell"', scope='paths = ["sh/**"]')  # fenced away from src/
    project.agentd("start")
    row = wait_until(lambda: (r := project.unit_status("coder")) and r["turn"] == "idle" and r, 60, what="coder idle")
    assert row["typing"] is None
    project.agentd("send", "coder", "echo hello")
    wait_until(lambda: any("echo hello" in m for m in project.inputs("coder")[-1]), 30, what="the send")
    sent = next(m for m in project.inputs("coder")[-1] if "echo hello" in m)
    assert sent.startswith("echo hello\n\nagentd: the project's 1 hard constraint") and CONSTRAINT in sent
    project.agentd("send", "coder", "write src/parser.py VERSION = 3")
    facts = wait_until(lambda: [m for m in project.inputs("coder")[-1] if "known facts of module coder" in m], 30,
                       what="the module's facts at the turn end after the write")
    assert "the parser speaks API v2" in facts[0]
    project.agentd("send", "coder", "write src/lexer.py x = 1")
    wait_until(lambda: any("src/lexer.py" in m for m in project.inputs("coder")[-1]), 30, what="the second write")
    wait_until(lambda: project.unit_status("coder")["turn"] == "idle" and not project.unit_status("coder")["queued_sends"],
               30, interval=0.1, what="the turn after it")
    assert len([m for m in project.inputs("coder")[-1] if "known facts of module coder" in m]) == 1  # once
    shell = project.unit_status("sh")
    assert shell["typing"].startswith("off (talks_to = \"shell\")")
    assert "typing off" in project.agentd("status").stdout
