"""The scope rules (:mod:`supervisor.scope.rules`) at their edges, pure: forbid lines, who is blamed and why,
the rule a violation names, the example path of an overlap.

``tests/test_scopeguard.py`` has the rules' main cases beside the watcher and
the revert; these pin what a wrong change to one rule would alter
(``python -m bench.mutation rules``).
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.scope.rules import (RECENT_OUTPUT, Candidate, Certainty, Violation, _synthetic, _under, attribute, check,
                                    forbid_globs_from_constraints, overlaps)


def cand(unit: str, wd: str = "", scope: tuple[str, ...] = (), busy: bool = False, age: float = 100.0) -> Candidate:
    return Candidate(unit, wd, list(scope), [], [], busy, age)


def test_a_fence_with_a_language_closes_on_its_own_marker_only() -> None:
    text = "```toml\nforbid: a/**\n~~~\nforbid: b/**\n```\nforbid: c/**\n~~~\nforbid: d/**\n~~~\n- forbid: e/**\n"
    assert forbid_globs_from_constraints(text) == ["c/**", "e/**"]


def test_a_comment_ends_the_globs_and_quotes_are_dropped() -> None:
    assert forbid_globs_from_constraints("forbid: a, 'b' # c, d # e\n") == ["a", "b"]
    assert forbid_globs_from_constraints("forbid: x#y\n") == ["x#y"]  # a # inside a glob is not a comment


def test_certainty_names_are_what_violations_jsonl_holds() -> None:
    assert [c.value for c in Certainty] == ["kernel", "watcher", "ambiguous"]


def test_recent_output_is_five_seconds_inclusive() -> None:
    assert attribute("a", [cand("api", age=RECENT_OUTPUT)]).unit == "api"
    assert attribute("a", [cand("api", age=5.01)]).unit is None
    assert attribute("a", [cand("api", age=1.5)], recent=1.0).unit is None


def test_a_working_directory_contains_its_paths_however_it_is_written() -> None:
    for wd in ("api", "api/", "./api", " api "):
        assert _under("api/x.py", wd) and _under("api", wd)
        assert not _under("apix/y.py", wd) and not _under("x/api/y.py", wd)
    for root in ("", ".", "./", "/"):
        assert _under("anything/at/all", root)


def test_why_a_change_is_or_is_not_blamed() -> None:
    assert attribute("x", []).why == "no unit is running"
    assert attribute("docs/x", [cand("api", "api", busy=True)]).why == "outside every running agent's working directory"
    fenced = cand("api", "", busy=True)
    fenced.permits = lambda rel: False
    assert attribute("x", [fenced]).why == "outside every running agent's working directory (or outside their fences)"
    got = attribute("api/x", [cand("api", "api", busy=True)])
    assert got.why == "only api is mid-turn" and got.candidates == ["api"]
    got = attribute("api/x", [cand("api", "api", age=1.25), cand("root", "", age=300)])
    assert got.unit == "api" and got.why == "only api of the 2 units running in a directory containing it printed 1.2s ago"
    idle = attribute("api/x", [cand("api", "api"), cand("root", "")])
    assert idle.why == "no agent running in a directory containing it was active (api, root)"
    assert idle.candidates == ["api", "root"]


def test_the_rule_a_violation_names() -> None:
    assert Violation("p", "r").kind == "scope"
    v = check("lib/x", ["src/**", "docs"], [], [])
    assert v == Violation("lib/x", 'outside scope: [scope] paths = ["src/**", "docs"]', "scope")
    assert check("src/a", ["src/**"], ["src/a"], []) == Violation("src/a", 'forbidden by [scope] forbid = "src/a"', "forbid")
    assert check(" ", [], [" "], [" "]) is None  # a blank glob forbids nothing, even a file named blank


def test_synthetic_examples_of_a_glob() -> None:
    assert _synthetic("./src/**/") == ["src/x", "src/x/x"]
    assert _synthetic("a/*.py") == ["a/x.py", "a/x.py/x"]
    assert _synthetic("a?b") == ["axb", "axb/x"]
    assert _synthetic("") == ["x"] and _synthetic("./") == ["x"]


@dataclass
class Scope:
    paths: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()


def test_an_empty_scope_overlaps_everything_it_does_not_forbid() -> None:
    assert overlaps(Scope(), Scope(), []) == "x"
    assert overlaps(Scope(forbid=("x",)), Scope(), []) is None  # x and below is all the synthetic paths there are
    assert overlaps(Scope(("./lib/",)), Scope(("lib/*.py",)), []) == "lib/x.py"
