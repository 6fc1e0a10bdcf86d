"""A project too deep for ``.agentd/agentd.sock`` (a Unix socket path holds at most 107 bytes) still runs."""

from __future__ import annotations

import os
from pathlib import Path

from supervisor.config.paths import UNIX_PATH_MAX, PlainPaths, short_socket_path
from tests.conftest import Project


def test_a_deep_project_gets_a_short_owner_only_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 40)
    project = Project(deep / "proj")
    project.fake_unit("web")
    paths = PlainPaths(project.root, Path(".agentd"))
    assert len(os.fsencode(project.root / ".agentd" / "agentd.sock")) > UNIX_PATH_MAX  # the precondition
    assert paths.socket_path == short_socket_path(project.root / ".agentd")
    try:
        project.agentd("start")
        assert project.wait_state("web", "running")["unit"] == "web"
        info = os.lstat(paths.socket_path.parent)
        assert info.st_uid == os.getuid() and info.st_mode & 0o777 == 0o700
        assert os.lstat(paths.socket_path).st_mode & 0o777 == 0o600
        project.agentd("stop")
        assert not paths.socket_path.exists()
    finally:
        project.cleanup()


def test_a_shallow_project_keeps_its_socket_in_its_state_directory(tmp_path: Path) -> None:
    paths = PlainPaths(tmp_path, Path(".agentd"))
    assert paths.socket_path == tmp_path / ".agentd" / "agentd.sock"
