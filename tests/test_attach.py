"""``agentd attach``: the real daemon, real PTYs for the agent and for the viewer.

The viewer is the real CLI under pexpect (so it has a terminal to put in raw
mode).  Assertions are on what the agent *prints* (its transcript), never on
the terminal echo of a typed line.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator

import pexpect
import psutil
import pytest

from supervisor.control import attach as proto
from supervisor.control.framing import FrameDecoder, encode, frame
from tests.conftest import AGENTD, Project, alive, clean_env, read_reply, wait_until

TIMEOUT = 20


@pytest.fixture
def viewers() -> Iterator[list[pexpect.spawn]]:
    """Viewers started by a test; every one still alive at the end is killed."""
    started: list[pexpect.spawn] = []
    yield started
    for child in started:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)


def spawn_viewer(project: Project, viewers: list[pexpect.spawn], unit: str, *flags: str,
                 rows: int = 30, cols: int = 100) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable, ["-m", "supervisor", "--root", str(project.root), "attach", unit, *flags],
        cwd=str(project.root), env=clean_env(), dimensions=(rows, cols), timeout=TIMEOUT,
    )
    viewers.append(child)
    child.expect(r"\[agentd\] attached to " + unit)
    return child


def printed_line(project: Project, unit: str, text: str, session: str | None = None) -> bool:
    """The agent printed ``text`` as a whole line (not just an echoed command line)."""
    return re.search(rf"^{re.escape(text)}\r?$", project.transcript(unit, session), re.M) is not None


def terminal_size(pid: int) -> tuple[int, int]:
    """(rows, cols) of the controlling terminal of ``pid``, read from the PTY itself."""
    fd = os.open(psutil.Process(pid).terminal(), os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))
    finally:
        os.close(fd)
    return rows, cols


def events_of(project: Project, event: str, unit: str) -> list[dict]:
    return project.events(event, unit)


def detach(child: pexpect.spawn, unit: str) -> int:
    child.send(proto.DETACH_KEY)
    child.expect(rf"\[agentd\] detached from {unit}")
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def test_output_input_and_detach_leave_the_agent_running(project: Project, viewers: list[pexpect.spawn]) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    row = project.wait_state("worker", "running")
    wait_until(lambda: "fake> " in project.transcript("worker"), TIMEOUT, what="the prompt")

    viewer = spawn_viewer(project, viewers, "worker")
    viewer.expect("fakeagent 1.0")  # the recent screen context arrives at once
    project.agentd("send", "worker", "echo sent-while-attached")
    viewer.expect(r"[\r\n]sent-while-attached\r\n")  # live output

    viewer.send("echo hello-from-viewer\r")
    viewer.expect(r"[\r\n]hello-from-viewer\r\n")
    wait_until(lambda: printed_line(project, "worker", "hello-from-viewer"), TIMEOUT, what="typed input in the transcript")

    assert detach(viewer, "worker") == 0
    after = project.wait_state("worker", "running")
    assert after["pid"] == row["pid"] and alive(row["pid"])
    project.agentd("send", "worker", "echo still-alive")
    wait_until(lambda: printed_line(project, "worker", "still-alive"), TIMEOUT, what="the agent to keep working")
    (attached,) = events_of(project, "attached", "worker")
    assert attached["read_only"] is False and attached["viewers"] == 1
    detached = wait_until(lambda: events_of(project, "detached", "worker"), TIMEOUT, what="the detached event")
    assert detached[0]["reason"] == "detached" and detached[0]["viewers"] == 0
    assert detached[0]["input_bytes"] == len("echo hello-from-viewer\r")


def test_read_only_viewer_sees_output_but_its_keys_do_not_reach_the_agent(project: Project, viewers: list[pexpect.spawn]) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    project.wait_state("worker", "running")
    writer = spawn_viewer(project, viewers, "worker")
    watcher = spawn_viewer(project, viewers, "worker", "--read-only")
    counts = [e["viewers"] for e in events_of(project, "attached", "worker")]
    assert counts == [1, 2], counts

    writer.send("echo typed-by-writer\r")
    for child in (writer, watcher):
        child.expect(r"[\r\n]typed-by-writer\r\n")

    watcher.send("echo typed-by-watcher\r")
    assert detach(watcher, "worker") == 0
    wait_until(lambda: [e for e in events_of(project, "detached", "worker") if e["read_only"]], TIMEOUT,
               what="the read-only viewer to be gone")
    # Everything the watcher sent has been handled by now; a later line proves the agent read on.
    writer.send("echo after-watcher\r")
    wait_until(lambda: printed_line(project, "worker", "after-watcher"), TIMEOUT, what="the writer's later line")
    assert "typed-by-watcher" not in project.transcript("worker")
    assert detach(writer, "worker") == 0


class RawViewer:
    """A protocol-level viewer on the control socket (no terminal, no client checks)."""

    def __init__(self, project: Project, unit: str, read_only: bool, recv_buffer: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if recv_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_buffer)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(str(project.state / "agentd.sock"))
        self.sock.sendall(encode({"cmd": "attach", "args": {"unit": unit, "read_only": read_only, "rows": 24, "cols": 80}}))
        self.reply = read_reply(self.sock)
        self.decoder = FrameDecoder()

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self.sock.sendall(frame(kind, payload))

    def frames_until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        """Read frames until one of ``kind`` arrives (or the connection ends)."""
        seen: list[tuple[bytes, bytes]] = []
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                return seen
            seen.extend(self.decoder.feed(data))
            if any(k == kind for k, _ in seen):
                return seen

    def close(self) -> None:
        self.sock.close()


def test_daemon_ignores_input_from_a_read_only_viewer(project: Project) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    row = project.wait_state("worker", "running")
    viewer = RawViewer(project, "worker", read_only=True)
    try:
        assert viewer.reply["ok"] is True
        info = viewer.reply["result"]
        assert info["pid"] == row["pid"] and info["read_only"] is True and info["detach_key"] == "Ctrl-]"
        viewer.send(proto.INPUT, b"echo forged-by-read-only\r")
        viewer.send(proto.DETACH)
        detached = wait_until(lambda: events_of(project, "detached", "worker"), TIMEOUT, what="the detached event")
    finally:
        viewer.close()
    assert detached[0]["ignored_bytes"] == len(b"echo forged-by-read-only\r") and detached[0]["input_bytes"] == 0
    project.agentd("send", "worker", "echo marker")
    wait_until(lambda: printed_line(project, "worker", "marker"), TIMEOUT, what="the marker")
    assert "forged-by-read-only" not in project.transcript("worker")


SIZER = (
    "import os, sys\n"
    "print('sizer ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    cols, rows = os.get_terminal_size(0)\n"
    "    print(f'size={rows}x{cols}', flush=True)\n"
)


def test_window_size_and_its_changes_reach_the_agent(project: Project, viewers: list[pexpect.spawn]) -> None:
    # no wakeup: each line typed into the sizer would print a size of its own
    project.unit("sizer", f"[agent]\ncommand = {json.dumps(['python', '-c', SIZER])}\nrows = 40\ncols = 120\n"
                          "[wakeup]\non_start = false\n[checkpoint]\nenabled = false\n")
    project.agentd("start")
    project.wait_state("sizer", "running")
    wait_until(lambda: "sizer ready" in project.transcript("sizer"), TIMEOUT, what="the sizer")
    viewer = spawn_viewer(project, viewers, "sizer", rows=37, cols=111)
    viewer.send("\r")
    viewer.expect(r"size=(\d+)x(\d+)")
    assert viewer.match.group(0) == b"size=37x111"

    viewer.setwinsize(41, 123)  # SIGWINCH to the viewer
    # the viewer's signal handler, the resize frame and the daemon's ioctl take their time:
    # wait until the agent's own terminal has the new size, then ask the agent
    agent = project.unit_status("sizer")["pid"]
    wait_until(lambda: terminal_size(agent) == (41, 123), TIMEOUT, what="the new size on the agent's terminal")
    viewer.send("\r")
    viewer.expect(r"size=(\d+)x(\d+)")
    assert viewer.match.group(0) == b"size=41x123"
    assert detach(viewer, "sizer") == 0


def test_restart_reattaches_and_stop_ends_the_viewer(project: Project, viewers: list[pexpect.spawn]) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    first = project.wait_state("worker", "running")
    viewer = spawn_viewer(project, viewers, "worker")

    project.agentd("restart", "--now", "worker")
    viewer.expect(r"\[agentd\] session ended: session " + re.escape(first["session"]))
    viewer.expect(r"\[agentd\] attached to worker session (\S+) \(pid (\d+)\)")
    new_session, new_pid = viewer.match.group(1).decode(), int(viewer.match.group(2))
    second = project.wait_state("worker", "running")
    assert (new_session, new_pid) == (second["session"], second["pid"]) and new_pid != first["pid"]
    viewer.send("echo typed-into-the-new-session\r")
    wait_until(lambda: printed_line(project, "worker", "typed-into-the-new-session", second["session"]), TIMEOUT,
               what="input to the new session")

    project.agentd("stop", "--now", "worker")
    viewer.expect(r"\[agentd\] session ended: ")
    viewer.expect(r"\[agentd\] no new session of worker within")
    viewer.expect(pexpect.EOF)
    viewer.close()
    assert viewer.exitstatus == proto.CODE_NO_SESSION
    (detached,) = events_of(project, "detached", "worker")
    assert detached["sessions"] == [first["session"], second["session"]]


def test_a_viewer_that_does_not_read_is_dropped_and_the_agent_is_not_held_up(project: Project) -> None:
    project.fake_unit("worker")
    project.agentd("start")
    project.wait_state("worker", "running")
    stuck = RawViewer(project, "worker", read_only=True, recv_buffer=4096)
    try:
        flood = 3 * proto.MAX_BEHIND
        project.agentd("send", "worker", f"flood {flood}")
        wait_until(lambda: events_of(project, "viewer_dropped", "worker"), TIMEOUT, what="the slow viewer to be dropped")
        # The agent went on: its whole flood is in the session's transcript.
        log = project.state / "transcripts" / "worker" / f"{stuck.reply['result']['session']}.log"
        wait_until(lambda: log.stat().st_size > flood, TIMEOUT, what="the whole flood in the transcript")
        frames = stuck.frames_until(proto.CLOSE)
    finally:
        stuck.close()
    closing = [json.loads(p) for k, p in frames if k == proto.CLOSE]
    assert closing and "behind" in closing[0]["reason"] and closing[0]["code"] == proto.CODE_ERROR
    received = sum(len(p) for k, p in frames if k == proto.OUTPUT)
    assert received < flood  # it really was dropped, not served in full
    (detached,) = wait_until(lambda: events_of(project, "detached", "worker"), TIMEOUT, what="the detached event")
    assert detached["reason"] == "too slow" and detached["viewers"] == 0


def test_attach_to_an_unknown_or_stopped_unit_fails_cleanly(project: Project) -> None:
    argv = json.dumps(["python", "-m", "supervisor.fakeagent"])
    project.unit("idle", f"[unit]\nenabled = false\n[agent]\ncommand = {argv}\n")
    project.agentd("start")
    project.wait_state("idle", "inactive")
    unknown = project.agentd("attach", "nosuch", check=False)
    assert unknown.returncode == 1 and "no such unit 'nosuch'" in unknown.stderr
    stopped = project.agentd("attach", "idle", check=False)
    assert stopped.returncode == 1 and "no running session" in stopped.stderr


def test_a_due_checkpoint_waits_while_a_person_types(project: Project, viewers: list[pexpect.spawn]) -> None:
    project.fake_unit("worker", cycle=True)
    project.agentd("start")
    project.wait_state("worker", "running")
    wait_until(lambda: project.unit_status("worker")["wakeup"] == "delivered via first-message", 60,
               what="the wakeup to be delivered")
    viewer = spawn_viewer(project, viewers, "worker")
    viewer.send("e")  # a person starts typing a line
    wait_until(lambda: events_of(project, "attached", "worker"), TIMEOUT, what="the attach event")
    proc = subprocess.Popen([*AGENTD, "--root", str(project.root), "checkpoint", "worker"], env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        keys = iter("cho still-here")

        def waiting_for_the_person() -> dict | None:
            viewer.send(next(keys, " "))  # the person keeps typing (a key per poll: the quiet window never passes)
            r = project.unit_status("worker")
            return r if r["state"] == "checkpointing" and "a person is typing" in (r["activity"] or "") else None

        row = wait_until(waiting_for_the_person, 60, what="the checkpoint to wait for the person")
        assert project.history("worker") == []
        for ch in keys:  # keep typing: the checkpoint keeps waiting
            viewer.send(ch)
            assert project.unit_status("worker")["state"] == "checkpointing"
        viewer.send("\r")
        viewer.expect("still-here")
        assert project.history("worker") == []
        assert detach(viewer, "worker") == 0  # the person leaves: the checkpoint goes ahead
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
    record = project.history("worker")[-1]
    assert record["trigger"] == "command" and record["flush"] == "verified" and record["steps"]["wait_turn_end"] > 0
    assert row["viewers"] == 1
