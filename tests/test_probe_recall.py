"""Issue 16 section 2: probe recall per respawn, a containment check over what the new session received.

Pure probes; then a real project (its task, constraints, decisions, a kept
trail, a WIP commit) against the wakeup agentd builds; then the cycle recording
recall from what the adapter delivered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from supervisor.adapters.base import Launch
from supervisor.continuity import cycle, stopped
from supervisor.continuity.keeper import Moment, UnitKeeper
from supervisor.continuity.wakeup import build_wakeup
from supervisor.memory.decisions import record_decision
from supervisor.continuity import recallprobe
from supervisor.report import probes as pr
from supervisor.trail.model import Action, Kind, Trail
from tests.conftest import CONSTRAINT, Project, TASK, git
from tests.daemon_fakes import (
    FakeClock,
    FakeDriver,
    FakeHost,
    FakeKeeper,
    FakeMemory,
    plan,
)

MODULE_DECISION = "parse empty input to an empty list"
GLOBAL_DECISION = "freeze the wire format at v2"


def test_probes_found_give_recall_one_and_a_missing_one_is_named() -> None:
    probes = pr.build(task="Port the parser", module="core", module_decision="use a list", global_decision="v2 wire",
                      in_flight=["src/a.py", "src/a.py"], last_command="`make  test` → exit 2", wip="0123456789abcdef",
                      constraints=["- never push to main"])
    assert [p.name for p in probes] == ["task", "decision (core)", "decision (global)", "file in flight: src/a.py",
                                        "last command", "WIP commit", "constraint 1"]
    text = ("Port the parser\nuse a list\nv2 wire\n`src/a.py`\n`make test` → exit 2\nWIP commit 0123456789ab\n"
            "- never push\n  to main")
    names = [p.name for p in probes]
    assert pr.check(probes, text).as_dict() == {"recall": 1.0, "found": 7, "probes": 7, "missing": [], "checked": names}
    got = pr.check(probes, text.replace("use a list", "").replace("→ exit 2", "→ exit 0"))
    assert got.as_dict() == {"recall": round(5 / 7, 4), "found": 5, "probes": 7, "checked": names,
                             "missing": ["decision (core)", "last command"]}
    assert pr.check(probes, None).recall == 0.0 and pr.check([], "").recall == 1.0
    # the command and its exit elsewhere in the text, apart, are not the last command as the wakeup shows it
    apart = text.replace("`make test` → exit 2", "run `make test` first; a check → exit 2")
    assert pr.check(probes, apart).missing == ["last command"]


def test_delivered_text_is_the_first_message_or_the_wakeup_file_the_agent_was_given(tmp_path: Path) -> None:
    assert pr.delivered_text(Launch(["x"], first_input="hello", wakeup_via="first-message")) == "hello"
    wakeup = tmp_path / "wakeup.md"
    wakeup.write_text("the briefing")
    assert pr.delivered_text(Launch(["x"], env={"AGENTD_WAKEUP_FILE": str(wakeup)}, wakeup_via="system-prompt")) == "the briefing"
    assert pr.delivered_text(Launch(["x"], env={"AGENTD_WAKEUP_FILE": str(wakeup)}, wakeup_via="none")) is None
    assert pr.delivered_text(None) is None



def kept_project(project: Project) -> tuple[Path, UnitKeeper]:
    """A project whose session s1 of unit u (module core) read, ran a failing check and left an edit."""
    root = project.root
    project.init_git()
    project.init_memory()
    (root / "src").mkdir()
    (root / "src" / "parser.py").write_text("def parse(text):\n    return None\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    record_decision(root, MODULE_DECISION, "because callers iterate, so [] is safe", module="core")
    record_decision(root, GLOBAL_DECISION, "because clients pin it, so changes go behind a flag")
    (root / "src" / "parser.py").write_text("def parse(text):\n    return []\n")
    trail = Trail("test", actions=[Action(Kind.READ, "shell", command="cat src/parser.py", reads=("src/parser.py",)),
                                   Action(Kind.COMMAND, "shell", command="python3 tests/check.py", exit_code=2, ok=False),
                                   Action(Kind.EDIT, "apply_patch", edits=("src/parser.py",), ok=True)])
    keeper = UnitKeeper(root, "u", "core", ["src/**"])
    kept = keeper.keep(Moment.CHECKPOINT, "s1", lambda: trail)
    assert kept.wip and kept.resumed is not None and kept.resumed["cold_actions_to_edit"] == 3
    return root, keeper


def test_a_normal_wakeup_recalls_every_probe(project: Project) -> None:
    root, keeper = kept_project(project)
    text = build_wakeup(root, "core", ["src/**"], unit="u").text
    got = keeper.recall(text)
    names = [p.name for p in recallprobe.project_probes(root, "core", stopped.load(root, "u"))]
    assert names == ["task", "decision (core)", "decision (global)", "file in flight: src/parser.py", "last command",
                     "WIP commit", "constraint 1"]
    assert got == {"recall": 1.0, "found": 7, "probes": 7, "missing": [], "checked": names}
    assert TASK.split("\n")[0][:20] in text and CONSTRAINT[:20] in text


def test_a_wakeup_without_the_module_decision_names_it(project: Project) -> None:
    root, keeper = kept_project(project)
    text = build_wakeup(root, "core", ["src/**"], unit="u").text
    cut = "\n".join(line for line in text.splitlines() if MODULE_DECISION not in line)
    got = keeper.recall(cut)
    assert (got["recall"], got["found"], got["probes"], got["missing"]) == (round(6 / 7, 4), 6, 7, ["decision (core)"])


def test_recall_is_below_one_when_the_real_last_command_is_missing_though_agentds_own_is_there(project: Project) -> None:
    """Issue 26 §3: the probe expects the session's real last command (from its trail), never agentd's own
    checkpoint command, so a wakeup that shows only `agentd task-state: ok` does not recall it."""
    root, _ = kept_project(project)
    trail = Trail("the screen", actions=[
        Action(Kind.COMMAND, "screen", command="python3 tests/check.py", exit_code=2, ok=False),
        Action(Kind.COMMAND, "screen", command="agentd note: ok"), Action(Kind.COMMAND, "screen", command="agentd task-state: ok")])
    keeper = UnitKeeper(root, "g", "core", ["src/**"])
    keeper.keep(Moment.CHECKPOINT, "s2", lambda: trail)
    probes = recallprobe.project_probes(root, "core", stopped.load(root, "g"))
    assert [p.needles for p in probes if p.name == "last command"] == [("`python3 tests/check.py` → exit 2",)]
    text = build_wakeup(root, "core", ["src/**"], unit="g").text
    assert "`python3 tests/check.py` → exit 2" in text and "agentd task-state" not in text
    assert keeper.recall(text)["recall"] == 1.0
    # the wakeup an older agentd wrote: agentd's own command as the last one, the real one gone
    lost = text.replace("`python3 tests/check.py` → exit 2", "`agentd task-state: ok` → exit status unknown")
    got = keeper.recall(lost)
    assert got["missing"] == ["last command"] and got["recall"] < 1.0


class RecallingKeeper(FakeKeeper):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str | None] = []

    def recall(self, delivered: str | None) -> dict:
        self.seen.append(delivered)
        return pr.check([pr.Probe("task", ("the task",))], delivered).as_dict()


class WakingHost(FakeHost):
    async def respawn(self, why: str):
        self.fresh = FakeDriver(self.clock, wakeup="# Wakeup briefing\nthe task")
        return self.fresh, None, 10


def test_the_cycle_records_recall_of_what_the_adapter_delivered() -> None:
    clock, memory = FakeClock(), FakeMemory()
    agent, host = FakeDriver(clock), WakingHost(clock, FakeMemory())
    keeper = RecallingKeeper()
    record = asyncio.run(cycle.run(host, agent, memory, plan(), unit="u", keeper=keeper))
    assert keeper.seen == ["# Wakeup briefing\nthe task"]
    assert record.recall == {"recall": 1.0, "found": 1, "probes": 1, "missing": [], "checked": ["task"]}
    assert record.as_dict()["recall"]["recall"] == 1.0
    plain = asyncio.run(cycle.run(host, FakeDriver(clock), memory, plan(), unit="u", keeper=FakeKeeper()))
    assert plain.recall is None  # a keeper that cannot check records nothing
