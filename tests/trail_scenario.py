"""The scripted "trail" session both fake model servers play (issue 15: the state at interruption).

A user message containing :data:`ASK_MARK` starts it.  The fake model then
acts like an agent in the middle of a task, one tool call per request (the
step is the number of tool results that followed the ask):

1. read :data:`READS` [0] (a shell ``cat``, or Claude's ``Read``);
2. read :data:`READS` [1];
3. write its plan / todos (:data:`PLAN_FIRST`: the reading done, the test run in progress);
4. run :data:`TEST_COMMAND`, which fails with :data:`TEST_EXIT`;
5. edit :data:`EDIT` (replace :data:`EDIT_OLD` with :data:`EDIT_NEW`);
6. update the plan (:data:`PLAN_SECOND`);
7. a final message.

It never writes engram or decisions; with the server's ``checkpoint`` control
set to ``"ignore"``, it answers the checkpoint prompt with a plain message.
:func:`project_files` writes the files the scenario expects (the test file
exits with :data:`TEST_EXIT`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from pathlib import Path

ASK_MARK = "TRAIL:"
ASK = "TRAIL: make the parser accept empty input"
READS = ("src/parser.py", "src/lexer.py")
TEST_COMMAND = "python3 tests/check_parser.py"
TEST_EXIT = 2
EDIT = "src/parser.py"
EDIT_OLD = "        return None"
EDIT_NEW = "        return []  # empty input parses to an empty list"
PLAN_FIRST = (("Read the parser and the lexer", "completed"), ("Run the parser check", "in_progress"),
              ("Make empty input parse", "pending"))
PLAN_SECOND = (("Read the parser and the lexer", "completed"), ("Run the parser check", "completed"),
               ("Make empty input parse", "in_progress"))
IGNORED = "I have nothing to add."
DONE = "DONE: trail scenario finished its steps"


@dataclass(frozen=True)
class Step:
    kind: str  # read | plan | run | edit | done
    path: str = ""
    command: str = ""
    plan: tuple[tuple[str, str], ...] = ()


STEPS = (
    Step("read", path=READS[0]),
    Step("read", path=READS[1]),
    Step("plan", plan=PLAN_FIRST),
    Step("run", command=TEST_COMMAND),
    Step("edit", path=EDIT),
    Step("plan", plan=PLAN_SECOND),
)


def step(done: int) -> Step:
    """The action after ``done`` tool results since the ask."""
    return STEPS[done] if done < len(STEPS) else Step("done")


def patch() -> str:
    """The edit as a Codex ``apply_patch`` patch."""
    return (f"*** Begin Patch\n*** Update File: {EDIT}\n@@\n-{EDIT_OLD}\n+{EDIT_NEW}\n*** End Patch\n")


def project_files(root: Path) -> None:
    """The files the scenario reads, runs and edits."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / READS[0]).write_text(f"def parse(text):\n    if not text:\n{EDIT_OLD}\n    return text.split()\n")
    (root / READS[1]).write_text("def tokens(text):\n    return text.split()\n")
    (root / "tests" / "check_parser.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom parser import parse\n"
        f"if parse('') != []:\n    print('FAIL: empty input does not parse')\n    sys.exit({TEST_EXIT})\nprint('ok')\n")


def assert_indexed_from_the_record(project: Any, unit: str) -> None:
    """The event index reads what the agent did from its own record, linked beside the transcript (issue 29):
    the failing check and how it ended are one ``trail`` event."""
    from tests.conftest import wait_until

    assert any((project.state / "transcripts" / unit).glob("*.record"))

    def hit() -> str:
        found = project.agentd("recall", "--events", TEST_COMMAND, f"exit {TEST_EXIT}", "--unit", unit, "--json",
                               check=False)
        return next((line for line in found.stdout.splitlines() if '"kind": "trail"' in line), "")

    wait_until(hit, 60, interval=0.5, what="the failing check and its exit status in the event index")
