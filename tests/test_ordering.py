"""Dependencies between units as pure plans: what starts, in which order, what stops with what."""

from __future__ import annotations

from pathlib import Path

from supervisor.config.check import refuse_cycles
from supervisor.daemon.ordering import dependents, requirements, start_plan, stop_layers
from tests.daemon_fakes import spec


def specs(tmp_path: Path, **units: str) -> dict:
    return {name: spec(tmp_path, text, name) for name, text in units.items()}


def test_requirements_are_pulled_in_and_ordered_first(tmp_path: Path) -> None:
    s = specs(tmp_path, db="", cache="", api='[unit]\nrequires = ["db"]\n', web='[unit]\nrequires = ["api"]\nafter = ["cache"]\n')
    assert requirements("web", s) == {"api", "db"}
    assert start_plan(["web"], s) == ["db", "api", "web"]  # cache is only 'after': not pulled in
    both = start_plan(["web", "cache"], s)
    assert sorted(both) == ["api", "cache", "db", "web"]
    assert both.index("db") < both.index("api") < both.index("web") and both.index("cache") < both.index("web")


def test_dependents_stop_before_their_requirements(tmp_path: Path) -> None:
    s = specs(tmp_path, db="", api='[unit]\nrequires = ["db"]\n', web='[unit]\nrequires = ["api"]\n', other="")
    assert dependents("db", s) == ["web", "api"]
    assert stop_layers(["db", "api", "web", "other"], s) == [["other", "web"], ["api"], ["db"]]


def test_after_orders_stops_in_reverse_too(tmp_path: Path) -> None:
    s = specs(tmp_path, cache="", web='[unit]\nafter = ["cache"]\n')
    assert stop_layers(["cache", "web"], s) == [["web"], ["cache"]]
    assert dependents("cache", s) == []  # after is ordering only


def test_a_cycle_is_refused_naming_its_units(tmp_path: Path) -> None:
    s = specs(tmp_path, a='[unit]\nrequires = ["b"]\n', b='[unit]\nafter = ["c"]\n', c='[unit]\nrequires = ["a"]\n', d="")
    kept, errors = refuse_cycles(s)
    assert set(kept) == {"d"}
    assert len(errors) == 3 and all("a -> b -> c -> a" in e.message or "b -> c -> a -> b" in e.message
                                    or "c -> a -> b -> c" in e.message for e in errors)
