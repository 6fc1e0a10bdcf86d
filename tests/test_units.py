"""Unit files: validation errors name the file, the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config.units import UnitLoadError, load_unit, load_units, start_order, unit_path

GOOD = '[agent]\ncommand = ["python", "-m", "supervisor.fakeagent"]\n'


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def test_good_unit_defaults(tmp_path: Path) -> None:
    write(tmp_path / "units", "api", GOOD)
    specs, errors = load_units(tmp_path / "units", tmp_path)
    assert errors == []
    spec = specs["api"]
    assert spec.agent.command == ("python", "-m", "supervisor.fakeagent")
    assert spec.module == "api"  # module defaults to the unit name
    assert spec.restart.policy == "on-failure"
    assert spec.context.checkpoint_at == 0.70


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("typo", GOOD + "comand = 1\n", ["typo.toml", "[agent] comand", "unknown key; did you mean `command`?",
                                          "allowed keys in [agent]"]),
        # issue 27 §2: a mistyped key gets a "did you mean"; a key like no other gets none
        ("promt", GOOD + 'promt = "> "\n', ["[agent] promt", "did you mean `prompt`?"]),
        ("nothing", GOOD + "zzzzqqq = 1\n", ["[agent] zzzzqqq", "unknown key; allowed keys in [agent]"]),
        ("sectypo", GOOD + "[chekpoint]\ndeadline = 3\n", ["[chekpoint]", "unknown section; did you mean `checkpoint`?"]),
        ("shell", '[agent]\ncommand = "python -m x"\n', ["shell.toml", "[agent] command", "argv list"]),
        ("enum", GOOD + '[restart]\npolicy = "sometimes"\n', ["enum.toml", "[restart] policy", "'on-failure'", "'sometimes'"]),
        ("syntax", '[agent\ncommand = ["python"]\n', ["syntax.toml", "not valid TOML", "line 1"]),
        ("missing", '[agent]\nkind = "generic"\n', ["missing.toml", "[agent] command", "required"]),
        ("notfound", '[agent]\ncommand = ["no-such-program-xyz"]\n', ["notfound.toml", "[agent] command", "not found on PATH"]),
        ("section", GOOD + "[bogus]\nx = 1\n", ["section.toml", "[bogus]", "unknown section", "allowed sections"]),
        ("kind", '[agent]\nkind = "gpt"\ncommand = ["python"]\n', ["kind.toml", "[agent] kind", "'generic'"]),
        ("escape", GOOD + '[scope]\npaths = ["../other/**"]\n', ["escape.toml", "[scope] paths", "inside"]),
        ("Bad_Name", GOOD, ["Bad_Name.toml", "not valid", "rename"]),
    ],
)
def test_malformed_units_are_reported_and_others_load(tmp_path: Path, name: str, text: str, fragments: list[str]) -> None:
    units = tmp_path / "units"
    write(units, "good", GOOD)
    write(units, name, text)
    specs, errors = load_units(units, tmp_path)
    assert list(specs) == ["good"]
    assert len(errors) == 1
    message = str(errors[0])
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_examples_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / "units", "codex.example", "not even toml [")
    specs, errors = load_units(tmp_path / "units", tmp_path)
    assert specs == {} and errors == []


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "", "-x", "A", "x" * 64, "a.b"])
def test_names_cannot_escape_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        unit_path(tmp_path, name)
    with pytest.raises((ValueError, UnitLoadError)):
        load_unit(tmp_path, name)


def test_fingerprint_ignores_description_only(tmp_path: Path) -> None:
    units = tmp_path / "units"
    write(units, "a", '[unit]\ndescription = "one"\n' + GOOD)
    first = load_unit(units, "a").fingerprint()
    write(units, "a", '[unit]\ndescription = "two"\n' + GOOD)
    assert load_unit(units, "a").fingerprint() == first
    write(units, "a", GOOD + "[agent.env]\nX = '1'\n")
    assert load_unit(units, "a").fingerprint() != first


def test_start_order_honours_after_and_requires(tmp_path: Path) -> None:
    units = tmp_path / "units"
    write(units, "web", '[unit]\nafter = ["db"]\nrequires = ["api"]\n' + GOOD)
    write(units, "api", '[unit]\nafter = ["db"]\n' + GOOD)
    write(units, "db", GOOD)
    specs, _ = load_units(units, tmp_path)
    order = start_order(specs)
    assert order.index("db") < order.index("api") < order.index("web")
