"""Issue 16 with the REAL Codex CLI against the fake Responses server, offline (tests/codex_jail.py).

Session 1 plays tests/trail_scenario.py (two ``cat`` reads, a plan, the failing
check, an ``apply_patch`` edit: its first productive edit is its 5th tool call),
then puts src/parser.py back as committed (``git show HEAD:... >``) and ignores
the checkpoint.  Session 2 plays the scenario again: it re-reads both files,
unchanged since session 1 ended, runs the same check and makes the same edit:
exactly 2 re-reads, 1 repeated command, first edit at call 5 (cold 5), and
6 responses of 1,007 tokens to it (the fake server's usage is pinned).
Session 3 runs one new command only: 0 and 0.  Each wakeup (Codex's developer
instructions) recalls every probe.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests import trail_scenario as ts
from tests.codex_fixtures import Jail, codex_bin, jail, log, setup_trail, wait_idle
from tests.conftest import Project, wait_until

__all__ = ["codex_bin", "jail"]

RESTORE = f"git show HEAD:{ts.EDIT} > {ts.EDIT}"
USAGE_IN = 1000


def done_replies(jail: Jail) -> int:
    return sum(1 for r in log(jail) if ts.DONE in json.dumps(r.get("reply")))


def scenario(project: Project, jail: Jail, runs: int) -> None:
    project.agentd("send", "cx", ts.ASK)
    wait_until(lambda: ts.EDIT_NEW in (project.root / ts.EDIT).read_text(), 90, what="the scenario's edit")
    wait_until(lambda: done_replies(jail) >= runs, 60, what="the scenario's end")
    wait_idle(project)


def tool_answers(jail: Jail) -> int:
    return sum(1 for r in log(jail) if "DONE: tool ran" in json.dumps(r.get("reply")))


def run(project: Project, jail: Jail, command: str) -> None:
    """One ``exec_command`` of ``command`` and the model's answer to its output; then the turn's end."""
    before = tool_answers(jail)
    project.agentd("send", "cx", f"RUN: {command}")
    wait_until(lambda: tool_answers(jail) > before, 90, what=f"the answer to {command}")
    wait_idle(project, 90)


def cycle(project: Project) -> dict:
    old = project.unit_status("cx")["session"]
    project.agentd("checkpoint", "cx")
    record = project.history("cx")[-1]
    assert record["old_session"] == old and record["outcome"] == "respawned", record
    wait_until(lambda: (r := project.unit_status("cx")) and r["session"] == record["new_session"] and r["turn"] == "idle",
               90, interval=0.1, what="the fresh session to be idle")
    return record


def test_codex_resumed_sessions_report_exact_re_reads_repeats_and_recall(project: Project, jail: Jail, codex_bin: Path) -> None:
    setup_trail(project, codex_bin)
    jail.start()
    wait_idle(project)
    # every response reports 1,000 input tokens and 7 output: the tokens to resume count responses exactly
    jail.call(op="control", checkpoint="ignore", input_tokens=USAGE_IN)
    scenario(project, jail, 1)
    original = (project.root / ts.EDIT).read_text()
    run(project, jail, RESTORE)
    wait_until(lambda: ts.EDIT_NEW not in (project.root / ts.EDIT).read_text(), 30, what="the file put back")
    assert original != (project.root / ts.EDIT).read_text()
    first = cycle(project)
    cold = first["stopped"]["resumed"]
    assert (cold["previous"], cold["actions_to_edit"], cold["cold_actions_to_edit"]) == (None, 5, 5)
    assert first["recall"]["recall"] == 1.0 and first["recall"]["missing"] == []
    assert "last command" in first["recall"]["checked"] and f"file in flight: {ts.EDIT}" in first["recall"]["checked"]
    scenario(project, jail, 2)
    second = cycle(project)
    resumed = second["stopped"]["resumed"]
    assert resumed["session"] == first["new_session"] and resumed["previous"] == first["old_session"]
    assert resumed["rereads"] == list(ts.READS) and resumed["repeated"] == [ts.TEST_COMMAND]
    assert (resumed["rereads_count"], resumed["repeated_count"], resumed["breaks_count"]) == (2, 1, 0)
    assert (resumed["actions_to_edit"], resumed["cold_actions_to_edit"]) == (5, 5)
    assert resumed["tokens_to_edit"] == 6 * (USAGE_IN + 7)  # the wakeup's answer, then one response per call
    assert second["recall"]["recall"] == 1.0
    run(project, jail, "python3 -c 'print(40 + 2)'")
    third = cycle(project)
    fresh = third["stopped"]["resumed"]
    assert (fresh["rereads_count"], fresh["repeated_count"], fresh["actions_to_edit"]) == (0, 0, None)
    report = json.loads(project.agentd("report", "cx", "--json").stdout)
    assert [(s["session"], s["rereads"], s["repeated"], s["actions_to_edit"], s["tokens_to_edit"], s["recall"])
            for s in report["sessions"]] == [(first["new_session"], 2, 1, 5, 6 * (USAGE_IN + 7), 1.0),
                                             (second["new_session"], 0, 0, None, None, 1.0),
                                             (third["new_session"], None, None, None, None, 1.0)]
    print(project.agentd("report", "cx").stdout)
