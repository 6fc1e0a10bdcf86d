"""Issue 16 section 1: the fragmentation figures, as pure functions over two trails and blob hashes,
and the report's table over the history (per session, medians per unit and for the project)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from supervisor.report import figures as fig
from supervisor.report import table
from supervisor.trail.generic import screen_trail
from supervisor.trail.model import Action, Kind, Trail

SCOPE = ["src/**"]


def read(path: str, at: str | None = None) -> Action:
    return Action(Kind.READ, "shell", command=f"cat {path}", reads=(path,), at=at)


def run(command: str, code: int = 0, at: str | None = None) -> Action:
    return Action(Kind.COMMAND, "shell", command=command, exit_code=code, ok=code == 0, at=at)


def edit(path: str, at: str | None = None) -> Action:
    return Action(Kind.EDIT, "apply_patch", edits=(path,), ok=True, at=at)


def cold_trail() -> Trail:
    return Trail("t", actions=[read("src/parser.py"), read("src/lexer.py"), Action(Kind.PLAN, "update_plan"),
                               run("python3 tests/check.py", 2), edit("src/parser.py")])


BLOBS = {"src/parser.py": "p2", "src/lexer.py": "l1", "tests/check.py": "c1"}


def previous() -> fig.Baseline:
    exists = BLOBS.__contains__
    return fig.baseline(cold_trail(), "s1", BLOBS.get, exists)


def test_the_baseline_holds_reads_commands_with_their_inputs_and_edits_by_blob() -> None:
    base = previous()
    assert base.reads == {"src/parser.py": "p2", "src/lexer.py": "l1"}
    assert base.commands == {"python3 tests/check.py": {"tests/check.py": "c1"}}
    assert base.edits == {"src/parser.py": "p2"}
    assert fig.Baseline.from_dict(base.as_dict()) == base


def test_the_cold_session_reports_its_own_actions_to_the_first_edit() -> None:
    got = fig.resumed(cold_trail(), "s1", None, {}, scope=SCOPE)
    assert (got.actions_to_edit, got.cold_actions_to_edit, got.rereads, got.repeated) == (5, 5, [], [])


def test_re_reading_two_unchanged_files_and_repeating_one_command() -> None:
    trail = Trail("t", actions=[read("src/parser.py", "2026-12-01T10:00:00Z"), read("src/lexer.py"),
                                run("python3  tests/check.py", 2), read("src/parser.py"),
                                edit("src/parser.py", "2026-12-01T10:00:42.5Z")])
    now = {"src/parser.py": "p3", "src/lexer.py": "l1", "tests/check.py": "c1"}  # parser changed by this session, after its reads
    got = fig.resumed(trail, "s2", previous(), now, scope=SCOPE, cold=5)
    assert got.rereads == ["src/parser.py", "src/lexer.py"]
    assert got.repeated == ["python3 tests/check.py"]
    assert (got.actions_to_edit, got.cold_actions_to_edit, got.previous, got.seconds_to_edit) == (5, 5, "s1", 42.5)
    assert got.as_dict()["rereads_count"] == 2 and got.as_dict()["repeated_count"] == 1


def test_tokens_to_resume_are_those_of_the_first_productive_edits_call() -> None:
    trail = Trail("t", actions=[read("src/parser.py"), edit("tests/check.py"), edit("src/parser.py"), run("make")])
    trail.actions[:] = [replace(a, tokens=t) for a, t in zip(trail.actions, (1200, 2500, 3900, 5000))]
    got = fig.resumed(trail, "s2", previous(), {"src/parser.py": "p3"}, scope=SCOPE)
    assert (got.actions_to_edit, got.tokens_to_edit) == (3, 3900) and not any("tokens" in c for c in got.cannot)
    trail.actions[2] = replace(trail.actions[2], tokens=None)  # a call the record gives no usage for
    got = fig.resumed(trail, "s2", previous(), {"src/parser.py": "p3"}, scope=SCOPE)
    assert got.tokens_to_edit is None and any(c.startswith("tokens to resume") for c in got.cannot)


def test_going_straight_to_the_file_in_flight_reports_nothing_repeated() -> None:
    trail = Trail("t", actions=[edit("src/parser.py")])
    got = fig.resumed(trail, "s2", previous(), {"src/parser.py": "p3", "src/lexer.py": "l1", "tests/check.py": "c1"},
                      scope=SCOPE, cold=5)
    assert (got.actions_to_edit, len(got.rereads), len(got.repeated), got.breaks) == (1, 0, 0, [])


def test_a_file_changed_since_or_a_command_with_changed_input_is_not_repeated_work() -> None:
    trail = Trail("t", actions=[read("src/lexer.py"), run("python3 tests/check.py"), read("src/new.py")])
    now = {"src/parser.py": "p2", "src/lexer.py": "l9", "tests/check.py": "c9"}  # someone changed both
    got = fig.resumed(trail, "s2", previous(), now, scope=SCOPE)
    assert (got.rereads, got.repeated, got.actions_to_edit) == ([], [], None)


def test_a_read_after_its_own_edit_is_not_a_re_read_and_an_undone_edit_is_not_productive() -> None:
    trail = Trail("t", actions=[edit("src/lexer.py"), read("src/lexer.py"), edit("src/lexer.py"),
                                edit("src/parser.py")])
    # lexer.py ends as the previous session left it (the edit was undone): not productive; parser.py is
    got = fig.resumed(trail, "s2", previous(), {"src/parser.py": "p4", "src/lexer.py": "l1", "tests/check.py": "c1"},
                      scope=SCOPE)
    assert (got.rereads, got.actions_to_edit) == ([], 4)


def test_edits_outside_scope_and_forbidden_are_constraint_breaks() -> None:
    trail = Trail("t", actions=[edit("docs/a.md"), edit("src/secret/key.py"), edit("src/ok.py")])
    got = fig.resumed(trail, "s2", previous(), {}, scope=SCOPE, forbid=["src/secret/**"])
    assert got.breaks == ["outside scope: docs/a.md", "forbidden: src/secret/key.py"]
    assert got.actions_to_edit == 2  # a forbidden edit in scope still changed a file in scope


def test_a_generic_screen_counts_cat_lines_as_reads_and_says_what_it_cannot_tell() -> None:
    base = fig.baseline(Trail("screen", actions=[run("cat src/lexer.py"), run("make test")]), "g1",
                        {"src/lexer.py": "l1", "test": None}.get, lambda p: p == "src/lexer.py")
    assert base.reads == {"src/lexer.py": "l1"} and base.commands == {"make test": {}}
    again = Trail("screen", actions=[run("cat src/lexer.py"), run("make test"), run("make lint")])
    base.commands["agentd note: ok"] = {}  # what a checkpoint prints each time is not repeated work
    again.actions.append(run("agentd note: ok"))
    got = fig.resumed(again, "g2", base, {"src/lexer.py": "l1"}, scope=SCOPE, generic=True)
    assert (got.rereads, got.repeated, got.actions_to_edit) == (["src/lexer.py"], ["make test"], None)
    assert any("generic" in c and "no file edits and no tokens" in c for c in got.cannot) and not got.edits_seen
    assert got.tokens_to_edit is None
    [row] = table.rows("g", [{"stopped": {"resumed": got.as_dict()}}])
    assert (row.rereads, row.repeated, row.breaks) == (1, 1, None)  # a screen shows no edits: no breaks, not 0


def history() -> list[dict]:
    """A unit's cycle records: s1 (cold) -> s2 -> s3; s2's figures come with the cycle that ended it."""
    return [
        {"started": "2026-12-01T10:00:00Z", "trigger": "threshold", "old_session": "s1", "new_session": "s2",
         "recall": {"recall": 1.0, "found": 7, "probes": 7, "missing": []},
         "stopped": {"resumed": {"session": "s1", "previous": None, "actions": 5, "actions_to_edit": 5}}},
        {"started": "2026-12-01T11:00:00Z", "trigger": "threshold", "old_session": "s2", "new_session": "s3",
         "recall": {"recall": 0.8571, "found": 6, "probes": 7, "missing": ["decision (core)"]},
         "stopped": {"resumed": {"session": "s2", "previous": "s1", "actions": 5, "actions_to_edit": 5,
                                 "cold_actions_to_edit": 5, "rereads": ["a", "b"], "repeated": ["make"],
                                 "breaks": [], "seconds_to_edit": 12.0, "tokens_to_edit": 5035}}},
        {"started": "2026-12-01T12:00:00Z", "trigger": "crash", "old_session": "s3",
         "stopped": {"resumed": {"session": "s3", "previous": "s2", "actions": 1, "actions_to_edit": 1,
                                 "cold_actions_to_edit": 5, "rereads": [], "repeated": [], "breaks": [],
                                 "seconds_to_edit": 2.0, "tokens_to_edit": 1200}}},
    ]


def test_the_table_joins_recall_and_figures_per_session_with_medians() -> None:
    rows = table.rows("core", history())
    assert [(r.session, r.previous, r.rereads, r.repeated, r.actions_to_edit, r.recall) for r in rows] == [
        ("s2", "s1", 2, 1, 5, 1.0), ("s3", "s2", 0, 0, 1, 0.8571)]
    assert rows[1].missing == ["decision (core)"] and [r.tokens_to_edit for r in rows] == [5035, 1200]
    sums = table.summary(rows + table.rows("web", history()[1:2]))
    assert sums["units"]["core"]["median_rereads"] == 1.0 and sums["units"]["core"]["recall_below_1"] == 1
    assert sums["project"]["sessions"] == 4 and sums["project"]["median_actions_to_edit"] == 5.0
    assert sums["units"]["core"]["median_tokens_to_edit"] == 3117.5
    text = table.render(rows)
    assert "TOKENS TO EDIT" in text.splitlines()[0] and "5035" in text and "3117.5" in text
    assert "! missing: decision (core)" in text and "core (median of 2)" in text and "PROJECT (median of 2)" in text


def test_since_keeps_the_newer_sessions_and_bad_input_names_the_forms() -> None:
    now = datetime(2026, 12, 1, 12, 30, tzinfo=timezone.utc)
    assert [r.session for r in table.rows("core", history(), table.parse_since("2h", now))] == ["s3"]
    assert [r.session for r in table.rows("core", history(), table.parse_since("3h", now))] == ["s2", "s3"]
    assert table.rows("core", history(), table.parse_since("1h", now)) == []  # s3 started at 11:00
    assert [r.session for r in table.rows("core", history(), table.parse_since("2026-12-01T10:30", now))] == ["s3"]
    with pytest.raises(ValueError, match="30m, 2h, 7d"):
        table.parse_since("yesterday", now)


def test_blob_of_is_gits_blob_id_and_none_for_what_is_not_a_file(tmp_path) -> None:
    import subprocess

    from supervisor.report.gather import blob_of

    (tmp_path / "a.txt").write_text("hello\n")
    want = subprocess.run(["git", "hash-object", str(tmp_path / "a.txt")], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert blob_of(tmp_path, "a.txt") == want == blob_of(tmp_path, str(tmp_path / "a.txt"))
    assert blob_of(tmp_path, "missing.txt") is None and blob_of(tmp_path, ".") is None


def test_a_start_outside_a_cycle_brings_its_own_recall() -> None:
    starts = [{"session": "s1", "why": "start", "started": "2026-12-01T09:00:00Z"},
              {"session": "s2", "why": "crash", "previous": "s1", "started": "2026-12-01T10:00:00Z",
               "recall": {"recall": 0.5, "found": 1, "probes": 2, "missing": ["WIP commit"]}}]
    cycles = [{"started": "2026-12-01T11:00:00Z", "trigger": "crash", "old_session": "s2",
               "stopped": {"resumed": {"session": "s2", "previous": "s1", "actions": 2, "actions_to_edit": 2,
                                       "rereads": ["a"], "repeated": [], "breaks": []}}}]
    [row] = table.rows("u", cycles, sessions=starts)
    assert (row.session, row.trigger, row.recall, row.missing, row.rereads) == ("s2", "crash", 0.5, ["WIP commit"], 1)
    from supervisor.cli.timeline import _session_row

    assert "! recall 0.5, missing: WIP commit" in _session_row(starts[1])[6]
    assert table.rows("u", cycles, table.parse_since("2026-12-01T10:30", datetime(2026, 12, 2, tzinfo=timezone.utc)),
                      starts) == []  # s2 started before the cut


def test_the_command_names_an_unknown_unit_and_a_bad_since(tmp_path) -> None:
    from tests.conftest import Project

    project = Project(tmp_path)
    assert "no resumed session recorded yet" in project.agentd("report").stdout
    assert json.loads(project.agentd("report", "--json").stdout) == {
        "sessions": [], "units": {}, "project": table.summary([])["project"]}
    unknown = project.agentd("report", "nope", check=False)
    assert unknown.returncode == 1 and "no such unit 'nope'" in unknown.stderr
    bad = project.agentd("report", "--since", "yesterday", check=False)
    assert bad.returncode == 1 and "30m, 2h, 7d" in bad.stderr


def test_an_early_edit_that_puts_a_decisions_file_back_is_a_constraint_break() -> None:
    settled = [fig.Settled("parse empty input to []", {"src/parser.py": ("p1", "p2")})]
    back = Trail("t", actions=[edit("src/parser.py")])
    got = fig.resumed(back, "s2", previous(), {"src/parser.py": "p1"}, scope=SCOPE, settled=settled)
    assert got.breaks == ['undid "parse empty input to []": src/parser.py']
    onward = fig.resumed(back, "s2", previous(), {"src/parser.py": "p3"}, scope=SCOPE, settled=settled)
    late = Trail("t", actions=[read("src/lexer.py")] * 3 + [edit("src/parser.py")])
    assert onward.breaks == [] and fig.undone(late, settled, {"src/parser.py": "p1"}, window=3) == []
    assert fig.resumed(back, "s1", None, {"src/parser.py": "p1"}, scope=SCOPE, settled=settled).breaks == []  # cold


def test_settled_decisions_come_from_the_snapshots_before_and_with_each_decision(tmp_path) -> None:
    import subprocess

    from supervisor.memory.decisions import record_decision
    from supervisor.report.gather import blob_of, settled_decisions
    from tests.conftest import Project

    root = tmp_path
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    Project(root).agentd("init")
    (root / "src").mkdir()
    (root / "src" / "parser.py").write_text("return None\n")
    (root / "src" / "lexer.py").write_text("tokens\n")
    before = blob_of(root, "src/parser.py")
    record_decision(root, "start from the old parser", "because it works, so we keep it", module="core",
                    scope_paths=["src/**"])
    (root / "src" / "parser.py").write_text("return []\n")
    record_decision(root, "parse empty input to []", "because callers iterate, so [] is safe", module="core",
                    files=["src/parser.py"], scope_paths=["src/**"])
    [item] = settled_decisions(root, "core")
    assert item.decision == "parse empty input to []"
    assert dict(item.files) == {"src/parser.py": (before, blob_of(root, "src/parser.py"))}
    assert settled_decisions(root, "other") == []


# ------------------------------------------------------------------ each rule of the figures at its edge
def test_a_failed_read_is_not_a_re_read_and_leaves_nothing_in_the_baseline() -> None:
    failed = replace(read("src/lexer.py"), ok=False)  # e.g. `cat` of a file that is not there
    got = fig.resumed(Trail("t", actions=[failed]), "s2", previous(), {"src/lexer.py": "l1"}, scope=SCOPE)
    assert got.rereads == []
    assert fig.baseline(Trail("t", actions=[failed]), "s2", BLOBS.get, BLOBS.__contains__).reads == {}
    assert fig.reads_of(failed) == () and fig.reads_of(replace(failed, ok=None)) == ("src/lexer.py",)


def test_a_failed_edit_is_not_productive_and_one_call_may_edit_outside_then_inside() -> None:
    failed = replace(edit("src/parser.py"), ok=False)
    both = Action(Kind.EDIT, "apply_patch", edits=("docs/a.md", "src/parser.py"), ok=True)
    got = fig.resumed(Trail("t", actions=[failed, read("src/x.py"), both]), "s2", previous(), {"src/parser.py": "p3"},
                      scope=SCOPE)
    assert got.actions_to_edit == 3 and got.breaks == ["outside scope: docs/a.md"]
    assert fig.first_productive_edit(Trail("t", actions=[failed]), SCOPE, {}, {}) is None


def test_an_edit_that_ends_as_the_previous_session_left_its_edits_or_command_inputs_is_not_productive() -> None:
    base = fig.Baseline("s1", edits={"src/a.py": "a1"}, commands={"make": {"src/mk.py": "m1"}})
    trail = Trail("t", actions=[edit("src/a.py"), edit("src/mk.py"), edit("src/b.py")])
    got = fig.resumed(trail, "s2", base, {"src/a.py": "a1", "src/mk.py": "m1", "src/b.py": "b2"}, scope=SCOPE)
    assert got.actions_to_edit == 3


def test_words_that_are_options_or_empty_are_not_inputs() -> None:
    assert fig.command_words("pytest -q --tb=short '' tests/a.py") == ["tests/a.py"]
    assert fig.command_words("cat 'unclosed quote") == ["'unclosed", "quote"]  # unparsable: split on blanks
    assert fig.command_inputs("diff a b a -x", {"a", "b", "-x"}.__contains__) == ["a", "b"]


def test_seconds_to_resume_keep_milliseconds_and_need_both_timestamps() -> None:
    trail = Trail("t", actions=[read("src/a.py", "2026-12-01T10:00:00Z"), edit("src/parser.py", "2026-12-01T10:00:01.23456Z")])
    got = fig.resumed(trail, "s2", previous(), {"src/parser.py": "p3"}, scope=SCOPE)
    assert got.seconds_to_edit == 1.235 and not any(c.startswith("time to resume") for c in got.cannot)
    untimed = Trail("t", actions=[read("src/a.py"), edit("src/parser.py")])
    got = fig.resumed(untimed, "s2", previous(), {"src/parser.py": "p3"}, scope=SCOPE)
    assert got.seconds_to_edit is None and got.cannot == ["time to resume: the trail has no timestamps",
                                                          "tokens to resume: the agent's record has no usage for that call"]
    no_edit = fig.resumed(Trail("t", actions=[read("src/a.py")]), "s2", previous(), {}, scope=SCOPE)
    assert no_edit.cannot == [] and no_edit.seconds_to_edit is None


def test_an_empty_trail_has_no_figures_and_no_error() -> None:
    got = fig.resumed(Trail("t", actions=[]), "s2", previous(), {}, scope=SCOPE)
    assert (got.actions, got.actions_to_edit, got.seconds_to_edit, got.tokens_to_edit) == (0, None, None, None)
    assert got.edits_seen is True and got.as_dict()["edits_seen"] is True
    assert fig.baseline(None, "s0", BLOBS.get, BLOBS.__contains__) == fig.Baseline("s0")


def test_as_dict_counts_each_list() -> None:
    trail = Trail("t", actions=[edit("docs/a.md"), edit("docs/b.md")])
    data = fig.resumed(trail, "s2", previous(), {}, scope=SCOPE).as_dict()
    assert (data["rereads_count"], data["repeated_count"], data["breaks_count"]) == (0, 0, 2)


def test_the_undo_window_is_the_first_twenty_tool_calls() -> None:
    settled = [fig.Settled("parse empty input to []", {"src/parser.py": ("p1", "p2")})]
    at_20 = Trail("t", actions=[read("src/lexer.py")] * 19 + [edit("src/parser.py")])
    at_21 = Trail("t", actions=[read("src/lexer.py")] * 20 + [edit("src/parser.py")])
    assert fig.undone(at_20, settled, {"src/parser.py": "p1"}) == ['undid "parse empty input to []": src/parser.py']
    assert fig.undone(at_21, settled, {"src/parser.py": "p1"}) == []


def test_files_to_hash_are_every_file_either_session_names_once() -> None:
    base = fig.Baseline("s1", reads={"r.py": "r1"}, commands={"make": {"in.py": "i1"}}, edits={"e.py": "e1"})
    trail = Trail("t", actions=[read("r.py"), read("new.py"), edit("out.py"), edit("e.py")])
    assert fig.files_to_hash(trail, base) == ["r.py", "e.py", "in.py", "new.py", "out.py"]
    assert fig.files_to_hash(None, None) == []
    assert fig.files_to_hash(trail, None) == ["r.py", "new.py", "out.py", "e.py"]


def patch(path: str, change: str, ok: bool = True) -> Action:
    return Action(Kind.EDIT, "apply_patch", edits=(path,), ok=ok, change=change)


def test_the_same_change_made_again_after_a_respawn_is_an_edit_made_twice() -> None:
    """Issue 26 §4: an edit whose change (file and text written) the session before made too."""
    cold = Trail("t", actions=[patch("src/parser.py", "c-empty-list"), patch("src/lexer.py", "c-failed", ok=False),
                               Action(Kind.EDIT, "Write", edits=(), change="c-nothing")])
    base = fig.baseline(cold, "s1", BLOBS.get, BLOBS.__contains__)
    assert base.changes == {"c-empty-list": ["src/parser.py"]}  # a failed edit or one of no file made no change
    assert fig.Baseline.from_dict(json.loads(json.dumps(base.as_dict()))) == base
    again = Trail("t", actions=[read("src/lexer.py"), patch("src/parser.py", "c-empty-list"), patch("src/lexer.py", "c-failed"),
                                patch("src/parser.py", "c-empty-list", ok=False), patch("src/api.py", "c-new")])
    got = fig.resumed(again, "s2", base, {"src/parser.py": "p2"}, scope=SCOPE)
    assert got.twice == ["src/parser.py"] and got.as_dict()["twice_count"] == 1
    assert got.fragmented and got.as_dict()["fragmented"] is True
    assert fig.resumed(again, "s1", None, {}, scope=SCOPE).twice == []  # a cold session has no session before it
    failed = Trail("t", actions=[patch("src/parser.py", "c-empty-list", ok=False)])  # tried again, refused: not made
    assert fig.resumed(failed, "s2", base, {"src/parser.py": "p2"}, scope=SCOPE).twice == []
    clean = fig.resumed(Trail("t", actions=[patch("src/api.py", "c-new")]), "s2", base, {}, scope=SCOPE)
    assert (clean.twice, clean.fragmented, clean.as_dict()["fragmented"]) == ([], False, False)


@pytest.mark.parametrize("figure", ["rereads", "repeated", "twice", "breaks"])
def test_any_one_of_the_four_makes_a_resume_fragmented(figure: str) -> None:
    got = fig.Figures(session="s2", previous="s1", actions=3, actions_to_edit=None)
    assert not got.fragmented
    setattr(got, figure, ["x"])
    assert got.fragmented


def test_a_screens_reads_and_commands_with_their_exits_are_counted_exactly() -> None:
    """Issue 26 §4: cat, less, sed -n, head and tail lines of a REPL's screen are reads of those files (relative
    to the project root when the agent works in a subdirectory); the failing check, run again, is repeated."""
    first = screen_trail("$ cat parser.py\ndef parse(): ...\n$ python3 ../tests/check.py\nFAIL\n[exit 2]\n", cwd="/p/src", root="/p")
    assert [(a.kind, a.reads, a.exit_code) for a in first.actions] == [
        (Kind.READ, ("src/parser.py",), None), (Kind.COMMAND, (), 2)]
    base = fig.baseline(first, "g1", {"src/parser.py": "p1", "src/lexer.py": "l1"}.get, lambda p: False)
    second = screen_trail("$ less parser.py\n$ sed -n 1,5p parser.py\n$ head -n 3 lexer.py\n$ tail parser.py\n"
                          "$ python3 ../tests/check.py\nFAIL\nexit status 2\n$ agentd task-state: ok\n", cwd="/p/src", root="/p")
    assert [a.reads for a in second.actions[:4]] == [("src/parser.py",)] * 2 + [("src/lexer.py",), ("src/parser.py",)]
    got = fig.resumed(second, "g2", base, {"src/parser.py": "p1", "src/lexer.py": "l1"}, scope=SCOPE, generic=True)
    assert (got.rereads, got.repeated, got.twice, got.breaks) == (["src/parser.py"], ["python3 ../tests/check.py"], [], [])
    assert got.fragmented and any("no edits made twice" in c for c in got.cannot)


def test_the_headline_is_the_share_of_resumes_that_fragmented_per_unit_and_project_and_rows_go_by_time() -> None:
    records = history()
    records[2]["stopped"]["resumed"]["twice"] = ["src/parser.py"]
    late = {"started": "2026-12-01T09:00:00Z", "trigger": "threshold", "old_session": "w1", "new_session": "w2",
            "stopped": {"resumed": {"session": "w1", "previous": "w0", "actions": 2, "rereads": [], "repeated": [],
                                    "breaks": [], "edits_seen": False}}}
    core = table.rows("core", [records[2], records[0], records[1]])  # written out of order: shown by time
    assert [r.session for r in core] == ["s2", "s3"] and [r.started for r in core] == [
        "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z"]
    assert [(r.twice, r.fragmented) for r in core] == [(0, True), (1, True)]
    web = table.rows("web", [late])
    # w1 ended at 09:00; s2's start is not in these records: it ended when s3 started, so before it
    assert [r.session for r in table.rows("x", [records[1], late])] == ["w1", "s2", "s3"]
    assert (web[0].twice, web[0].breaks, web[0].fragmented) == (None, None, False)  # a screen: unknown, not 0
    sums = table.summary(core + web)
    assert (sums["units"]["core"]["fragmented"], sums["units"]["core"]["resumes_with_figures"]) == (2, 2)
    assert sums["units"]["core"]["fragmented_share"] == 1.0 and sums["units"]["web"]["fragmented_share"] == 0.0
    assert (sums["project"]["fragmented"], sums["project"]["fragmented_share"]) == (2, 0.6667)
    assert sums["units"]["core"]["median_twice"] == 0.5 and table.Row("u", "x").fragmented is None
    text = table.render(core + web)
    assert "EDITS TWICE" in text.splitlines()[0] and "core: fragmented 2 of 2 resumes (100.0%)" in text
    assert "PROJECT: fragmented 2 of 3 resumes (66.7%)" in text and "2026-12-01 10:00:00" in text
    assert table.headline(table.summary([table.Row("u", "x")])["project"]) == "fragmented: - (no resume with figures)"
    assert json.loads(json.dumps(core[0].as_dict()))["fragmented"] is True
