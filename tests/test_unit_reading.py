"""Reading unit files safely (issue 13 item 2) and the rules between a unit's keys (item 10)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from supervisor.config.check import load_project_units
from supervisor.config.unitfile import UnitFileError, read_unit_text
from supervisor.config.units import UnitLoadError, load_unit

GOOD = '[agent]\ncommand = ["python", "-m", "supervisor.fakeagent"]\n'


def test_a_regular_file_and_a_symlink_to_one_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(GOOD)
    (tmp_path / "b.toml").symlink_to(tmp_path / "a.toml")
    assert read_unit_text(tmp_path / "a.toml") == GOOD == read_unit_text(tmp_path / "b.toml")


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: p.symlink_to("/dev/zero"), "a character device (a symlink to /dev/zero)"),
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: p.symlink_to(p.parent / "nowhere"), "a broken symlink"),
    (lambda p: p.write_bytes(b"#" * ((1 << 20) + 1)), "more than the 1048576 byte limit"),
])
def test_special_or_huge_files_are_refused_at_once(tmp_path: Path, make, fragment: str) -> None:
    path = tmp_path / "bad.toml"
    make(path)
    started = time.monotonic()
    with pytest.raises(UnitFileError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        read_unit_text(path)
    assert time.monotonic() - started < 30  # a guard against a hang, not a speed claim


def test_load_unit_names_the_file_of_a_fifo(tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    os.mkfifo(units / "pipe.toml")
    with pytest.raises(UnitLoadError) as info:
        load_unit(units, "pipe")
    assert info.value.error.path == units / "pipe.toml" and "FIFO" in info.value.error.message
    with pytest.raises(UnitLoadError, match="no such unit file"):
        load_unit(units, "absent")


def _project(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    (root / "units").mkdir(parents=True, exist_ok=True)
    (root / "units" / f"{name}.toml").write_text(text)
    return root / "units", root


def test_checkpoint_at_above_hard_limit_is_refused(tmp_path: Path) -> None:
    units, root = _project(tmp_path, "eager", GOOD + "[context]\ncheckpoint_at = 0.95\n")
    specs, errors = load_project_units(units, root)
    assert "eager" not in specs
    [err] = errors
    assert err.path.name == "eager.toml"
    assert "checkpoint_at = 0.95 is above hard_limit = 0.9" in err.message and "set checkpoint_at below" in err.message
    (units / "eager.toml").write_text(GOOD + "[context]\ncheckpoint_at = 0.5\nhard_limit = 0.5\n")
    specs, errors = load_project_units(units, root)
    assert "eager" in specs and not errors  # equal is allowed


def test_a_workdir_outside_the_project_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    units, root = _project(tmp_path, "stray", GOOD.replace("\n", f'\nworkdir = "{outside}"\n', 1))
    (root / "inside").mkdir()
    (units / "fine.toml").write_text(GOOD.replace("\n", '\nworkdir = "inside"\n', 1))
    (root / "link").symlink_to(outside)
    (units / "linked.toml").write_text(GOOD.replace("\n", '\nworkdir = "link"\n', 1))
    specs, errors = load_project_units(units, root)
    assert sorted(specs) == ["fine"]
    messages = {e.path.name: e.message for e in errors}
    assert "outside the project" in messages["stray.toml"] and "scope guard" in messages["stray.toml"]
    assert "outside the project" in messages["linked.toml"]  # through a symlink too
