"""The fake agent (a test double) driven through a real PTY with pexpect.

Every test kills what it started, grandchildren included (by pid).  No sleeps
for synchronisation: pexpect expectations with timeouts and deadline loops.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import psutil
import pytest

from supervisor.fakeagent import DEFAULT_PROMPT, flood_payload, work_lines

REPO = Path(__file__).resolve().parents[1]
PROMPT = DEFAULT_PROMPT
TIMEOUT = 15


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT, interval: float = 0.01) -> bool:
    """Poll ``condition`` until true or the deadline passes; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (exited, or a zombie waiting to be reaped)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Agents:
    """Starts fake agents and remembers every process to kill at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.children: list[pexpect.spawn] = []
        self.pids: list[int] = []

    def spawn(self, *flags: str, env: dict[str, str] | None = None) -> pexpect.spawn:
        full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
        child = pexpect.spawn(
            sys.executable, ["-m", "supervisor.fakeagent", *flags],
            cwd=str(self.tmp_path), env=full_env, timeout=TIMEOUT, echo=False,
            dimensions=(40, 120), maxread=65536,
        )
        child.delaybeforesend = None
        child.delayafterclose = 0
        child.delayafterterminate = 0
        self.children.append(child)
        self.pids.append(child.pid)
        return child

    def grandchild(self, child: pexpect.spawn) -> int:
        child.expect(rb"grandchild (\d+)\r\n")
        pid = int(child.match.group(1))
        self.pids.append(pid)
        return pid

    def cleanup(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for child in self.children:
            child.close(force=True)
        leftovers = [pid for pid in self.pids if not wait_until(lambda p=pid: gone(p), timeout=10)]
        assert not leftovers, f"processes survived cleanup: {leftovers}"


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    a = Agents(tmp_path)
    try:
        yield a
    finally:
        a.cleanup()


def command(child: pexpect.spawn, line: str) -> bytes:
    """Type ``line`` and return everything printed before the next prompt."""
    child.sendline(line)
    child.expect_exact(PROMPT)
    return child.before


def finished(child: pexpect.spawn) -> pexpect.spawn:
    child.expect(pexpect.EOF)
    child.close()
    return child


# ---------------------------------------------------------------- prompt and commands


def test_banner_then_prompt_without_newline(agents: Agents) -> None:
    child = agents.spawn("--banner", "Hello agent")
    child.expect_exact(PROMPT)
    assert child.before == b"Hello agent\r\n"
    # Nothing (no newline) follows the prompt until we type: the reply comes straight after it.
    child.sendline("echo hi there")
    child.expect_exact(PROMPT)
    assert child.before == b"hi there\r\n"
    assert command(child, "") == b""


def test_custom_prompt(agents: Agents) -> None:
    child = agents.spawn("--prompt", "agent$ ")
    child.expect_exact("agent$ ")
    child.sendline("pid")
    child.expect_exact("agent$ ")
    assert child.before == f"{child.pid}\r\n".encode()


def test_work_output_is_deterministic(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    expected = "".join(line + "\r\n" for line in work_lines(7)).encode()
    assert command(child, "work 7") == expected
    # The next batch continues the numbering.
    assert command(child, "work 2") == "".join(line + "\r\n" for line in work_lines(2, offset=7)).encode()
    colored = agents.spawn("--color")
    colored.expect_exact(PROMPT)
    out = command(colored, "work 3")
    assert out.count(b"\x1b[0m") == 3 and b"Reading" in out


def test_write_appends_to_file_relative_to_cwd(agents: Agents, tmp_path: Path) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    assert command(child, "write notes.md first line") == b"wrote notes.md\r\n"
    assert command(child, "write notes.md second line") == b"wrote notes.md\r\n"
    assert (tmp_path / "notes.md").read_text() == "first line\nsecond line\n"
    assert command(child, "write missing-dir/x.md text").startswith(b"error: write:")


def test_env_and_print_env(agents: Agents) -> None:
    child = agents.spawn("--print-env", "FAKE_ONE", "--print-env", "FAKE_TWO",
                         env={"FAKE_ONE": "alpha", "FAKE_TWO": "beta gamma"})
    child.expect_exact(PROMPT)
    assert child.before.endswith(b"FAKE_ONE=alpha\r\nFAKE_TWO=beta gamma\r\n")
    assert command(child, "env FAKE_TWO") == b"beta gamma\r\n"
    assert command(child, "env FAKE_UNSET_XYZ") == b"\r\n"


def test_unknown_command_and_help(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    assert command(child, "frobnicate now") == b"unknown command: frobnicate\r\n"
    assert b"spawn-setsid" in command(child, "help")


def test_sleep_is_busy_then_prompts(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    start = time.monotonic()
    assert command(child, "sleep 0.3") == b""
    assert time.monotonic() - start >= 0.3


def test_pid_is_own_pid(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    assert command(child, "pid") == f"{child.pid}\r\n".encode()


def test_script_runs_at_start(agents: Agents, tmp_path: Path) -> None:
    script = tmp_path / "script.txt"
    script.write_text("# a comment\necho from script\n\nwrite scripted.txt done\n")
    child = agents.spawn("--script", str(script))
    child.expect_exact(PROMPT)
    assert child.before.endswith(b"from script\r\nwrote scripted.txt\r\n")
    assert (tmp_path / "scripted.txt").read_text() == "done\n"


def test_work_interval_prints_on_its_own(agents: Agents) -> None:
    child = agents.spawn("--work-interval", "0.05", "--work-lines", "2")
    child.expect_exact(PROMPT)
    lines = work_lines(4)
    child.expect_exact(lines[1] + "\r\n")
    child.expect_exact(lines[3] + "\r\n")  # the second tick continues the numbering


# ---------------------------------------------------------------- exits and signals


def test_exit_is_status_zero(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("exit")
    assert finished(child).exitstatus == 0


def test_crash_exits_with_code(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("crash 7")
    assert finished(child).exitstatus == 7


def test_crash_after_delay_with_exit_code(agents: Agents) -> None:
    child = agents.spawn("--crash-after", "0.2", "--exit-code", "5")
    child.expect_exact(PROMPT)
    start = time.monotonic()
    assert finished(child).exitstatus == 5
    assert time.monotonic() - start < TIMEOUT


def test_exit_after_output_last_bytes_arrive(agents: Agents) -> None:
    child = agents.spawn("--exit-after-output", "LAST-BYTES-BEFORE-EXIT", "--exit-code", "3")
    child.expect(pexpect.EOF)
    assert child.before.endswith(b"LAST-BYTES-BEFORE-EXIT")
    child.close()
    assert child.exitstatus == 3


def test_sigterm_kills_by_default(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    os.kill(child.pid, signal.SIGTERM)
    assert finished(child).signalstatus == signal.SIGTERM


def test_ignore_sigterm_survives_term_and_dies_on_kill(agents: Agents) -> None:
    child = agents.spawn("--ignore-sigterm")
    child.expect_exact(PROMPT)
    os.kill(child.pid, signal.SIGTERM)
    # It still answers after the signal was delivered: it ignored it.
    assert command(child, "pid") == f"{child.pid}\r\n".encode()
    assert command(child, "echo still here") == b"still here\r\n"
    os.kill(child.pid, signal.SIGKILL)
    assert finished(child).signalstatus == signal.SIGKILL


def test_ignore_sighup(agents: Agents) -> None:
    child = agents.spawn("--ignore-sighup")
    child.expect_exact(PROMPT)
    os.kill(child.pid, signal.SIGHUP)
    assert command(child, "echo after hup") == b"after hup\r\n"
    plain = agents.spawn()
    plain.expect_exact(PROMPT)
    os.kill(plain.pid, signal.SIGHUP)
    assert finished(plain).signalstatus == signal.SIGHUP


# ---------------------------------------------------------------- grandchildren


def test_spawn_grandchild_same_session(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("spawn")
    gpid = agents.grandchild(child)
    child.expect_exact(PROMPT)
    assert psutil.Process(gpid).ppid() == child.pid
    assert os.getsid(gpid) == os.getsid(child.pid)
    assert os.getpgid(gpid) == os.getpgid(child.pid)


def test_spawn_setsid_grandchild_is_in_new_session(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("spawn-setsid")
    gpid = agents.grandchild(child)
    child.expect_exact(PROMPT)
    assert psutil.Process(gpid).ppid() == child.pid
    assert os.getsid(gpid) == gpid != os.getsid(child.pid)
    assert os.getpgid(gpid) == gpid != os.getpgid(child.pid)
    # Killing the agent's process group does not reach it: it escaped.
    os.killpg(os.getpgid(child.pid), signal.SIGKILL)
    finished(child)
    assert not gone(gpid)


def test_grandchild_flags_at_start(agents: Agents) -> None:
    child = agents.spawn("--spawn-grandchild", "--spawn-setsid-grandchild")
    first = agents.grandchild(child)
    second = agents.grandchild(child)
    child.expect_exact(PROMPT)
    assert os.getsid(first) == os.getsid(child.pid)
    assert os.getsid(second) == second


# ---------------------------------------------------------------- flood


def payload_of(output: bytes) -> bytes:
    """Undo the terminal's ONLCR (\\n -> \\r\\n); the payload itself has no \\r."""
    return output.replace(b"\r\n", b"\n")


def test_flood_payload_is_exact_and_deterministic() -> None:
    assert len(flood_payload(1_000_003)) == 1_000_003
    assert flood_payload(10, 60) == flood_payload(70)[60:]
    assert flood_payload(128).count(b"\n") == 2


@pytest.mark.parametrize("size", [1, 64, 100_001, 3_000_000])
def test_flood_command_emits_exactly_n_bytes(agents: Agents, size: int) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline(f"flood {size}")
    child.expect_exact(PROMPT, searchwindowsize=4096)
    assert payload_of(child.before) == flood_payload(size)


def test_flood_flag_at_start(agents: Agents) -> None:
    child = agents.spawn("--banner", "B", "--flood", "250000")
    child.expect_exact(PROMPT, searchwindowsize=4096)
    assert payload_of(child.before) == b"B\n" + flood_payload(250000)
