"""Issue 13 item 2: a FIFO, a symlink to /dev/zero or a huge file in units/ hangs neither `check` nor a reload.

Before: ``mkfifo units/f.toml; agentd reload`` blocked the daemon in open()
(only SIGKILL ended it) and ``check`` hung; a symlink to /dev/zero made
``check`` allocate until MemoryError.  Now each is refused, naming the file,
and the other units are untouched.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Project

from .conftest import final_checks


def _plant(units: Path) -> dict[str, str]:
    """The bad files and what the error must say about each."""
    os.mkfifo(units / "fifo.toml")
    (units / "zero.toml").symlink_to("/dev/zero")
    (units / "huge.toml").write_bytes(b"#" * (2 << 20))
    (units / "dir.toml").mkdir()
    return {"fifo.toml": "FIFO", "zero.toml": "character device", "huge.toml": "byte limit", "dir.toml": "directory"}


def test_check_and_reload_refuse_special_unit_files_at_once(project: Project) -> None:
    project.fake_unit("steady")
    (project.root / "real.toml").write_text((project.root / "units" / "steady.toml").read_text())
    (project.root / "units" / "linked.toml").symlink_to(project.root / "real.toml")  # a symlink to a file is fine
    project.agentd("start")
    pid = project.wait_state("steady", "running")["pid"]
    project.wait_state("linked", "running")
    expected = _plant(project.root / "units")

    check = project.agentd("check", check=False, timeout=60)
    assert check.returncode == 1
    for name, what in expected.items():
        line = next((ln for ln in check.stdout.splitlines() if ln.startswith("error") and name in ln), "")
        assert what in line, f"{name}: {check.stdout}"
    assert "ok     steady" in check.stdout and "ok     linked" in check.stdout

    report = project.agentd("reload", timeout=60, check=False)
    assert report.returncode == 1, report  # the refused files make the reload exit 1, the rest is done
    for name, what in expected.items():
        assert any(name in ln and what in ln for ln in report.stderr.splitlines()), report.stderr
    assert "steady" in report.stdout.split("kept:")[1]
    row = project.unit_status("steady")
    assert row["state"] == "running" and row["pid"] == pid
    assert len(project.status()["errors"]) == len(expected)
    final_checks(project, ["steady", "linked"])
