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


# ------------------------------------------------------------------ issue 31 §5
def test_check_refuses_a_requirement_that_does_not_exist_and_what_requires_it(project: Project) -> None:
    """Before: `check` said ok (rc 0) and `reload` then left the unit inactive for good."""
    from supervisor.config.check import load_project_units

    project.fake_unit("api")
    project.fake_unit("web", unit='requires = ["apii"]')
    project.fake_unit("front", unit='requires = ["web"]')
    check = project.agentd("check", check=False, timeout=60)
    assert check.returncode == 1, check.stdout
    web = next(ln for ln in check.stdout.splitlines() if "web.toml" in ln)
    assert web.startswith("error") and "requires 'apii', which does not exist" in web and "did you mean 'api'" in web
    front = next(ln for ln in check.stdout.splitlines() if "front.toml" in ln)
    assert front.startswith("error") and "requires 'web', which is refused" in front
    assert "ok     api" in check.stdout
    specs, errors = load_project_units(project.root / "units", project.root)
    assert set(specs) == {"api"} and len(errors) == 2  # start and reload refuse exactly the same
    only, _ = load_project_units(project.root / "units", project.root, {"web"})
    assert set(only) == {"web"}  # under run-unit the service manager runs what it requires


def test_start_and_restart_say_when_a_unit_runs_its_last_good_definition(project: Project) -> None:
    """Before: an invalid unit file did not stop start/restart from running the old spec, and nothing said so."""
    unit = project.fake_unit("steady")
    project.agentd("start")
    project.wait_state("steady", "running")
    good = unit.read_text()
    unit.write_text(good + "[[[ not toml\n")
    restart = project.agentd("restart", "--now", "steady", timeout=60)
    assert "warning: steady: steady.toml does not load now (not valid TOML" in restart.stderr, restart.stderr
    assert "runs its last good definition" in restart.stderr and "agentd reload" in restart.stderr
    project.agentd("stop", "--now", "steady")
    start = project.agentd("start", "steady", timeout=60)
    assert "warning: steady: steady.toml does not load now" in start.stderr, start.stderr
    unit.write_text(good.replace("stop_timeout = 3", "stop_timeout = 4"))
    changed = project.agentd("restart", "--now", "steady", timeout=60)
    assert "warning: steady: steady.toml changed since it was loaded" in changed.stderr, changed.stderr
    unit.write_text(good)
    assert "warning" not in project.agentd("restart", "--now", "steady", timeout=60).stderr
    final_checks(project, ["steady"])
