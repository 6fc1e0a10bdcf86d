"""`agentd attach` without a terminal, or with a 0x0 one (issue 13 item 11): clean messages, no traceback."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios

from supervisor.cli.attach import terminal_size
from tests.conftest import AGENTD, Project, clean_env


def test_attach_with_stdin_not_a_terminal_says_what_to_do(project: Project) -> None:
    project.fake_unit("web")
    project.agentd("start")
    project.wait_state("web", "running")
    result = subprocess.run([*AGENTD, "--root", str(project.root), "attach", "web"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60, env=clean_env(), cwd=project.root)
    assert result.returncode == 1
    assert "stdin is not a terminal" in result.stderr and "--read-only" in result.stderr
    assert "agentd send web" in result.stderr and "Traceback" not in result.stderr


def test_a_terminal_without_a_size_gives_no_size() -> None:
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        assert terminal_size(slave) is None
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        assert terminal_size(slave) == (30, 100)
    finally:
        os.close(master)
        os.close(slave)


def test_attach_from_a_0x0_terminal_works_and_detaches(project: Project) -> None:
    import pexpect

    project.fake_unit("web")
    project.agentd("start")
    project.wait_state("web", "running")
    viewer = pexpect.spawn(AGENTD[0], [*AGENTD[1:], "--root", str(project.root), "attach", "web"], env=clean_env(),
                           cwd=str(project.root), dimensions=(0, 0), timeout=30)
    try:
        viewer.expect("attached to web")
        viewer.sendcontrol("]")
        viewer.expect(pexpect.EOF)
        viewer.close()
        assert viewer.exitstatus == 0
    finally:
        if viewer.isalive():
            viewer.terminate(force=True)
    assert project.unit_status("web")["state"] == "running"
