"""``agentd logs``: the clean transcript of the live session, shown and followed, with the real daemon."""

from __future__ import annotations

import os
import select
import subprocess
import time

from supervisor.control.client import Client
from tests.conftest import AGENTD, Project, clean_env, wait_until
from tests.web_fixtures import LOGIN_ROWS, tui_unit


def read_until(follower: subprocess.Popen[bytes], text: str, timeout: float = 60) -> str:
    """What ``follower`` printed, up to ``text``; fails if it does not come.

    Reads the pipe's fd directly: a buffered reader would hold text that select() no longer sees.
    """
    assert follower.stdout is not None
    fd = follower.stdout.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"logs -f did not show {text!r} within {timeout} s: {seen[-2000:]!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"logs -f ended before {text!r}: {seen[-2000:]!r}"
        seen += chunk
    return seen.decode(errors="replace")


def follow(project: Project, unit: str, lines: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*AGENTD, "--root", str(project.root), "logs", unit, "-f", "-n", str(lines)],
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)


def test_logs_shows_and_follows_the_clean_transcript(project: Project) -> None:
    project.fake_unit("talker", "--color")
    project.agentd("start")
    project.wait_state("talker", "running")
    project.agentd("send", "talker", "echo first-line")
    wait_until(lambda: "first-line" in project.agentd("logs", "talker", "-n", "5").stdout, 30, what="the line in logs")
    out = project.agentd("logs", "talker", "-n", "50").stdout
    assert "\x1b[" not in out and "fakeagent 1.0" in out
    project.agentd("send", "talker", "work 2")
    wait_until(lambda: "\x1b[" in project.agentd("logs", "talker", "--raw", "-n", "20").stdout, 30,
               what="colour codes in the raw transcript")
    follower = follow(project, "talker", 1)
    try:
        read_until(follower, "fake> ")  # the last line: it follows from here on
        project.agentd("send", "talker", "echo followed-live")
        read_until(follower, "followed-live")
    finally:
        follower.kill()
        follower.wait(10)
    assert project.agentd("logs", "../etc", check=False).returncode != 0


def _second(session: str) -> str:
    """The whole second a session id names (``YYYYmmddTHHMMSS``, in every id format agentd wrote)."""
    return session[:15]


def test_after_two_restarts_within_one_second_logs_shows_the_live_session(project: Project) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    first = project.wait_state("worker", "running")
    project.agentd("send", "worker", "echo said-by-the-first-session")
    wait_until(lambda: "said-by-the-first-session" in project.transcript("worker", first["session"]), 30,
               what="the first session's line")

    def started() -> list[str]:
        return [e["session"] for e in project.events("unit_state", "worker") if e["new"] == "running"]

    # Restart twice, back to back, until two sessions started within the same second (the
    # case where ids with whole seconds sorted by their random suffix: the dead one last, half the time).
    with Client(project.state / "agentd.sock", timeout=60) as client:
        for _ in range(10):
            client.call("restart", units=["worker"], now=True)
            client.call("restart", units=["worker"], now=True)
            sessions = started()
            if _second(sessions[-1]) == _second(sessions[-2]):
                break
        else:
            raise AssertionError(f"no two restarts within one second in 10 tries: {started()}")
    live = project.wait_state("worker", "running")
    assert live["session"] == sessions[-1]
    project.agentd("send", "worker", "echo said-by-the-live-session")
    wait_until(lambda: "said-by-the-live-session" in project.transcript("worker", live["session"]), 30,
               what="the live session's line")

    shown = project.agentd("logs", "worker", "-n", "50").stdout
    assert "said-by-the-live-session" in shown and "said-by-the-first-session" not in shown
    follower = follow(project, "worker", 50)
    try:
        head = read_until(follower, "said-by-the-live-session")
        assert "said-by-the-first-session" not in head
        # and -f moves on with the unit: a restart while following shows the next session
        project.agentd("restart", "--now", "worker")
        after = wait_until(lambda: (r := project.unit_status("worker"))["session"] != live["session"]
                           and r["state"] == "running" and r, 30, what="the restarted session")
        project.agentd("send", "worker", "echo said-after-the-follow-began")
        read_until(follower, "said-after-the-follow-began")
        assert "said-after-the-follow-began" in project.transcript("worker", after["session"])
    finally:
        follower.kill()
        follower.wait(10)


def test_logs_shows_a_full_screen_agents_screen_not_a_word_a_line(project: Project) -> None:
    """A TUI places its words with cursor moves: the clean text has one a line; logs shows the screen."""
    tui_unit(project, "tui")
    project.fake_unit("plain")
    project.agentd("start")
    wait_until(lambda: "method:" in project.transcript("tui", suffix=".log"), 30, what="the login screen drawn")
    assert "Select\nlogin\nmethod:" in project.transcript("tui")  # the clean text: what logs used to show
    shown = project.agentd("logs", "tui")
    assert shown.stdout.splitlines() == ["", *LOGIN_ROWS[:1], "", LOGIN_ROWS[1], "", *LOGIN_ROWS[2:]]
    assert "full-screen" in shown.stderr and "loading" not in shown.stdout  # the splash was cleared
    assert project.agentd("logs", "tui", "-n", "2").stdout.splitlines() == list(LOGIN_ROWS[2:])
    every = project.agentd("logs", "--all").stdout
    assert f"tui   | {LOGIN_ROWS[1]}" in every and "tui   | method:" not in every
    wait_until(lambda: "fake> " in project.agentd("logs", "plain").stdout, 30, what="the plain agent's prompt")
    assert "full-screen" not in project.agentd("logs", "plain").stderr  # a line agent: its clean lines
    follower = follow(project, "tui", 5)
    try:
        read_until(follower, LOGIN_ROWS[3])
    finally:
        follower.kill()
        follower.wait(10)
