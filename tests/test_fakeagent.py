"""The fake agent (a test double) driven through a real PTY with pexpect.

Every test kills what it started, grandchildren included (by pid).  No sleeps
for synchronisation: pexpect expectations with timeouts and deadline loops.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import psutil
import pytest

from supervisor.fakeagent import DEFAULT_PROMPT, checkpoint_texts, flood_payload, work_lines
from tests.conftest import alive, wait_until

REPO = Path(__file__).resolve().parents[1]
PROMPT = DEFAULT_PROMPT
TIMEOUT = 15


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
        wait_until(lambda: not [pid for pid in self.pids if alive(pid)], 10,
                   what=f"every process to end: {[pid for pid in self.pids if alive(pid)]} survived cleanup")


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


def test_unknown_command_is_a_task_and_help(agents: Agents) -> None:
    # A message that is not a command is a task for the "agent" (it used to
    # print "unknown command"): it says what it works on and prints work lines.
    child = agents.spawn()
    child.expect_exact(PROMPT)
    expected = "working on: frobnicate now\r\n" + "".join(line + "\r\n" for line in work_lines(4))
    assert command(child, "frobnicate now") == expected.encode()
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
    assert finished(child).exitstatus == 5  # on its own, within pexpect's timeout


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
    assert alive(gpid)


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


# ---------------------------------------------------------------- raw input and line editing

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"


def input_log(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def logged(path: Path, count: int) -> list[dict[str, object]]:
    """Wait until ``count`` messages are in the input log; return them."""
    wait_until(lambda: len(input_log(path)) >= count, TIMEOUT, interval=0.01,
               what=f"{count} messages in the input log (got {input_log(path)})")
    return input_log(path)


def test_terminal_mode_is_raw_without_echo_then_restored(agents: Agents, tmp_path: Path) -> None:
    # A shell runs the agent, then prints the terminal mode once it has exited.
    code = (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-m', 'supervisor.fakeagent'])\n"
        "print('AFTER', subprocess.run(['stty', '-a'], capture_output=True, text=True).stdout, 'END')\n"
    )
    full_env = dict(os.environ, PYTHONPATH=str(REPO))
    child = pexpect.spawn(sys.executable, ["-c", code], cwd=str(tmp_path), env=full_env,
                          timeout=TIMEOUT, echo=True, dimensions=(40, 200))
    agents.children.append(child)
    agents.pids.append(child.pid)
    child.expect_exact(PROMPT)
    # ECHO was on: the agent echoes typed text itself (one copy, not two).
    child.send("echo typed\r")
    child.expect_exact(PROMPT)
    assert child.before == b"echo typed\r\ntyped\r\n"
    child.sendcontrol("d")
    child.expect(rb"AFTER (.*) END", timeout=TIMEOUT)  # all of it: under load it comes in pieces
    mode = child.match.group(1).decode()
    for flag in ("icanon", "echo", "icrnl", "isig", "opost", "onlcr"):
        assert re.search(rf"(?<![-\w]){flag}\b", mode), f"{flag} not restored: {mode}"
    finished(child)


def test_output_processing_is_kept(agents: Agents) -> None:
    # \n still prints as \r\n (ONLCR), which every earlier test relies on.
    child = agents.spawn()
    child.expect_exact(PROMPT)
    assert command(child, "echo a") == b"a\r\n"


def test_backspace_ctrl_u_and_escape_keys_edit_the_line(agents: Agents, tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    child = agents.spawn("--input-log", str(log))
    child.expect_exact(PROMPT)
    # Backspace removes whole UTF-8 characters; arrow keys (CSI and SS3) are ignored.
    child.send("echo helloo\x7f wörld\x7f\x7f\x7f\x7fald\x1b[A\x1bOB\r")
    child.expect_exact(PROMPT)
    assert child.before == b"hello wald\r\n"
    child.send("garbage\x15echo clean\r")
    child.expect_exact(PROMPT)
    assert child.before == b"clean\r\n"
    assert [m["text"] for m in logged(log, 2)] == ["echo hello wald", "echo clean"]


def test_cr_lf_and_crlf_each_submit_once(agents: Agents, tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    child = agents.spawn("--input-log", str(log))
    child.expect_exact(PROMPT)
    child.send("echo one\r\necho two\recho three\n")
    for word in (b"one", b"two", b"three"):
        child.expect_exact(PROMPT)
        assert child.before == word + b"\r\n"
    assert [m["n"] for m in logged(log, 3)] == [1, 2, 3]


def test_bracketed_paste_is_one_message_with_newlines(agents: Agents, tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    child = agents.spawn("--input-log", str(log))
    child.expect_exact(PROMPT)
    text = "echo first line\nsecond line\r\n\tthird, indented\n"
    child.send(PASTE_START + text + PASTE_END)
    child.send("\r")
    child.expect_exact(PROMPT)
    # Multi-line: a task, never run line by line as commands.
    assert child.before.startswith(b"working on: echo first line\r\n")
    assert b"second line" not in child.before
    assert logged(log, 1) == [{"n": 1, "text": text}]


def test_12k_bracketed_paste_arrives_whole(agents: Agents, tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    child = agents.spawn("--input-log", str(log))
    child.expect_exact(PROMPT)
    # A wakeup-like text: long lines (no canonical 4 KiB limit), unicode, and a
    # fake end marker prefix inside it.
    lines = [f"- [{i:04d}] fact about module_{i} — keep \x1b[201 literally? no: [201~ is text" for i in range(160)]
    text = "# Wakeup\n" + "\n".join(lines).replace("\x1b", "") + "\n" + "x" * 5000 + "\nend"
    assert len(text.encode()) > 12 * 1024
    child.send(PASTE_START + text + PASTE_END + "\r")
    child.expect_exact("working on: # Wakeup\r\n")
    child.expect_exact(PROMPT)
    first = logged(log, 1)[0]
    assert first["text"] == text
    child.sendline("echo next")
    child.expect_exact(PROMPT)
    assert child.before == b"next\r\n"
    assert logged(log, 2)[1] == {"n": 2, "text": "echo next"}


def test_empty_messages_are_not_logged_and_ctrl_c_drops_the_line(agents: Agents, tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    child = agents.spawn("--input-log", str(log))
    child.expect_exact(PROMPT)
    child.send("\r")
    child.expect_exact(PROMPT)
    child.send("echo never\x03")
    child.expect_exact("^C\r\n" + PROMPT)
    assert command(child, "echo kept") == b"kept\r\n"
    assert input_log(log) == [{"n": 1, "text": "echo kept"}]


def test_ctrl_d_on_empty_line_exits_zero(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.send("echo x")  # not empty: Ctrl-D is ignored
    child.sendcontrol("d")
    child.send("\x15")
    child.sendcontrol("d")
    assert finished(child).exitstatus == 0


def test_ctrl_c_interrupts_sleep(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("sleep 60")
    child.sendcontrol("c")
    child.expect_exact(PROMPT)  # long before the 60 s (pexpect's timeout is shorter)
    assert child.before == b"^C interrupted\r\n"
    assert command(child, "echo alive") == b"alive\r\n"


def test_hold_is_busy_until_its_file_exists(agents: Agents, tmp_path: Path) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("hold go 2")
    child.expect_exact("".join(line + "\r\n" for line in work_lines(2)))  # its work lines first
    child.sendline("echo typed-while-held")
    # still busy: no prompt (the typed line is kept for later)
    assert child.expect_exact([PROMPT, pexpect.TIMEOUT], timeout=1.0) == 1
    (tmp_path / "go").write_text("")
    child.expect_exact(PROMPT)
    assert child.before == b"released by go\r\n"
    child.expect_exact(PROMPT)
    assert child.before == b"typed-while-held\r\n"
    child.sendline("hold never")
    child.sendcontrol("c")
    child.expect_exact(PROMPT)
    assert child.before == b"^C interrupted\r\n"


def test_hang_answers_and_prints_nothing_until_a_signal(agents: Agents) -> None:
    child = agents.spawn("--work-interval", "0.1", "--work-lines", "1")
    child.expect_exact(PROMPT)
    child.expect_exact(work_lines(1)[0])  # it prints on its own every 0.1 s
    child.sendline("hang")
    child.sendline("echo anyone")
    child.sendcontrol("c")
    # a work line may still be on its way; then silence (it would print every 0.1 s otherwise)
    for _ in range(10):
        if child.expect([rb".+", pexpect.TIMEOUT], timeout=1.0) == 1:
            break
    else:
        raise AssertionError("the agent kept printing after hang")
    child.kill(signal.SIGTERM)
    assert finished(child).signalstatus == signal.SIGTERM


def test_input_typed_while_busy_is_kept(agents: Agents) -> None:
    child = agents.spawn()
    child.expect_exact(PROMPT)
    child.sendline("sleep 0.3")
    child.sendline("echo queued")
    child.expect_exact(PROMPT)
    child.expect_exact(PROMPT)
    assert child.before == b"queued\r\n"


def test_work_interval_redraws_prompt_and_typed_text(agents: Agents, tmp_path: Path) -> None:
    code = "import sys; from supervisor.fakeagent import main; sys.exit(main(sys.argv[1:]))"
    full_env = dict(os.environ, PYTHONPATH=str(REPO))
    child = pexpect.spawn(sys.executable, ["-c", code, "--work-interval", "0.05", "--work-lines", "1"],
                          cwd=str(tmp_path), env=full_env, timeout=TIMEOUT, echo=True, dimensions=(40, 120))
    agents.children.append(child)
    agents.pids.append(child.pid)
    child.expect_exact(PROMPT)
    child.send("echo half")
    # The next tick erases the line, prints the work, and redraws prompt + typed text.
    child.expect_exact("\r\x1b[K")
    child.expect(rb"\r\n" + re.escape(PROMPT.encode()) + rb"echo half")
    child.send(" done\r")
    child.expect_exact("half done\r\n")


# ---------------------------------------------------------------- tasks and checkpoints


def test_task_prints_working_on_and_work_lines(agents: Agents) -> None:
    child = agents.spawn("--task-lines", "2")
    child.expect_exact(PROMPT)
    long_line = "please refactor " + "the parser " * 20
    out = command(child, long_line)
    first, rest = out.split(b"\r\n", 1)
    assert first.startswith(b"working on: please refactor the parser") and first.endswith("…".encode())
    assert len(first.decode()) == len("working on: ") + 60
    assert rest == "".join(line + "\r\n" for line in work_lines(2)).encode()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A temp project with an initialised .agent/ store."""
    root = tmp_path / "proj"
    root.mkdir()
    agentd = Path(sys.executable).parent / "agentd"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    subprocess.run([str(agentd), "--root", str(root), "init"], check=True, capture_output=True, env=env, timeout=60)
    return root


def checkpoint_env(root: Path, session: str) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    return {"AGENTD_ROOT": str(root), "AGENTD_SESSION": session, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}


def test_checkpoint_confirm_writes_through_the_real_cli(agents: Agents, store: Path) -> None:
    session = "20261130T000000-abc123"
    child = agents.spawn(env=checkpoint_env(store, session))
    child.expect_exact(PROMPT)
    command(child, "work 3")
    child.send(PASTE_START + "CHECKPOINT: save what you have confirmed\nmore instructions" + PASTE_END + "\r")
    child.expect_exact("checkpoint written\r\n", timeout=60)
    assert child.before == b"$ agentd note: ok\r\n$ agentd decide: ok\r\n$ agentd task-state: ok\r\n"
    child.expect_exact(PROMPT)
    texts = checkpoint_texts(session, 1, 3)
    engram = (store / ".agent" / "engram.md").read_text()
    assert f"[confirmed] {texts['note']}" in engram
    decisions = (store / ".agent" / "decisions.log").read_text()
    assert texts["decision"] in decisions and texts["why"] in decisions and "[task]" in decisions
    task = (store / ".agent" / "current-task.md").read_text()
    assert f"State at interruption: {texts['state']}\n" in task
    assert task.count("State at interruption:") == 1
    assert "(describe the current task here)" in task  # the rest of the file is kept
    # A second checkpoint rewrites the state line and numbers on.
    child.sendline("CHECKPOINT again")
    child.expect_exact("checkpoint written\r\n", timeout=60)
    task = (store / ".agent" / "current-task.md").read_text()
    assert checkpoint_texts(session, 2, 3)["state"] in task and task.count("State at interruption:") == 1


def test_checkpoint_confirm_creates_missing_current_task(agents: Agents, store: Path) -> None:
    (store / ".agent" / "current-task.md").unlink()
    child = agents.spawn(env=checkpoint_env(store, "s-missing"))
    child.expect_exact(PROMPT)
    child.sendline("CHECKPOINT")
    child.expect_exact("checkpoint written\r\n", timeout=60)
    assert checkpoint_texts("s-missing", 1, 0)["state"] in (store / ".agent" / "current-task.md").read_text()


def test_checkpoint_ignore_writes_nothing(agents: Agents, store: Path) -> None:
    before = {p: p.read_bytes() for p in (store / ".agent").rglob("*") if p.is_file()}
    child = agents.spawn("--on-checkpoint", "ignore", env=checkpoint_env(store, "s-ignore"))
    child.expect_exact(PROMPT)
    assert command(child, "CHECKPOINT now") == b"I have nothing to add.\r\n"
    after = {p: p.read_bytes() for p in (store / ".agent").rglob("*") if p.is_file()}
    assert after == before


def test_checkpoint_slow_waits_then_confirms_or_is_interrupted(agents: Agents, store: Path) -> None:
    child = agents.spawn("--on-checkpoint", "slow:0.5", env=checkpoint_env(store, "s-slow"))
    child.expect_exact(PROMPT)
    start = time.monotonic()
    child.sendline("CHECKPOINT")
    child.expect_exact("checkpoint written\r\n", timeout=60)
    assert time.monotonic() - start >= 0.5
    slow = agents.spawn("--on-checkpoint", "slow:60", env=checkpoint_env(store, "s-interrupted"))
    slow.expect_exact(PROMPT)
    slow.sendline("CHECKPOINT")
    slow.expect_exact("thinking about what to save...\r\n")
    slow.sendcontrol("c")
    slow.expect_exact(PROMPT)
    assert slow.before == b"^C interrupted\r\n"
    assert "s-interrupted" not in (store / ".agent" / "engram.md").read_text()


def test_bad_checkpoint_mode_is_rejected() -> None:
    result = subprocess.run([sys.executable, "-m", "supervisor.fakeagent", "--on-checkpoint", "maybe"],
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
                            stdin=subprocess.DEVNULL, timeout=30)
    assert result.returncode == 2 and "confirm, ignore or slow:SECONDS" in result.stderr


def test_pipe_input_still_works(tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    result = subprocess.run([sys.executable, "-m", "supervisor.fakeagent", "--input-log", str(log)],
                            input=b"echo piped\nwork 1\n", capture_output=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=30, cwd=tmp_path)
    assert result.returncode == 0
    assert b"fake> piped\nfake> " in result.stdout
    assert [m["text"] for m in input_log(log)] == ["echo piped", "work 1"]
