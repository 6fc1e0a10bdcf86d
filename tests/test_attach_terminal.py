"""`agentd attach` without a terminal, or with a 0x0 one (issue 13 item 11): clean messages, no traceback;
and what a viewer sees first (issue 27): a full-screen agent's screen repainted, a line agent's recent lines."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
from pathlib import Path

import pyte

from supervisor.cli.attach import terminal_size
from supervisor.control.repaint import CONTEXT_BYTES, opening, recent_context, screen_text
from tests.conftest import AGENTD, Project, clean_env, wait_until
from tests.web_fixtures import LOGIN_ROWS, tui_unit


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


# ---------------------------------------------------------------------- issue 27 §3: a TUI waiting on a screen
def test_attach_repaints_a_full_screen_agent_sitting_on_its_login_screen(project: Project) -> None:
    """Its last 4 KiB hold no line start (a spinner drawn with cursor moves, then the screen): the viewer
    used to get a blank terminal; it gets the screen, rendered, row by row."""
    import pexpect

    tui_unit(project, "tui")
    project.agentd("start")
    wait_until(lambda: "method:" in project.transcript("tui", suffix=".log"), 30, what="the login screen drawn")
    assert recent_context(project.state / "transcripts" / "tui" /
                          f"{project.unit_status('tui')['session']}.log") == b""  # what the viewer used to get
    viewer = pexpect.spawn(AGENTD[0], [*AGENTD[1:], "--root", str(project.root), "attach", "tui", "--read-only"],
                           env=clean_env(), cwd=str(project.root), dimensions=(40, 120), timeout=30)
    try:
        viewer.expect("attached to tui")
        for row in LOGIN_ROWS:
            viewer.expect_exact(row.strip())
    finally:
        viewer.terminate(force=True)
        viewer.close(force=True)


def _screen(data: bytes, rows: int = 12, cols: int = 60) -> pyte.Screen:
    screen = pyte.Screen(cols, rows)
    pyte.ByteStream(screen).feed(data)
    return screen


def test_a_repaint_draws_the_same_screen_colours_included_and_carries_no_sequence_of_the_agent(tmp_path: Path) -> None:
    drawn = (b"\x1b[?1049h\x1b[?1h" + b"x" * 5000 + b"\x1b[2J\x1b[3;4H\x1b[1;31mred bold\x1b[0m \x1b[7mrev\x1b[0m"
             b"\x1b[5;2H\x1b[38;5;208mtruecolour\x1b[48;2;1;2;3m bg \x1b[0m\x1b[6;1H\xe4\xb8\xad\xe6\x96\x87 wide"
             b"\x1b]52;c;c2VjcmV0\x07\x1b]8;;http://127.0.0.1:1/steal\x07link\x1b]8;;\x07\x1b]0;title\x07\x1b[4;9H")
    log = tmp_path / "s.log"
    log.write_bytes(drawn)
    first = opening(log, 12, 60)
    want, got = _screen(drawn), _screen(first)
    assert got.display == want.display and "red bold" in got.display[2] and "link" in got.display[5]
    for y in range(12):
        for x in range(60):
            assert got.buffer[y][x] == want.buffer[y][x], (y, x)
    assert (got.cursor.y, got.cursor.x) == (want.cursor.y, want.cursor.x) == (3, 8)
    assert first.startswith(b"\x1b[?1049h") and b"\x1b[?1h" in first  # the alternate screen, the cursor keys
    assert b"\x1b]" not in first and b"steal" not in first  # no OSC of the agent's: no clipboard, no link, no title
    assert screen_text(log, 12, 60)[2] == "   red bold rev"


def test_a_line_oriented_agent_gets_its_recent_lines_and_a_cut_starts_at_a_line(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_bytes(b"".join(b"\x1b[32mline %d\x1b[0m\r\n" % i for i in range(1000)) + b"\r\x1b[Kfake> ")
    first = opening(log, 40, 120)
    assert first.startswith(b"\x1b[32mline ") and first.endswith(b"line 999\x1b[0m\r\n\r\x1b[Kfake> ")
    assert len(first) <= CONTEXT_BYTES and screen_text(log, 40, 120) is None
    assert opening(log, 40, 120, upto=len(b"\x1b[32mline 0\x1b[0m\r\n")) == b"\x1b[32mline 0\x1b[0m\r\n"
