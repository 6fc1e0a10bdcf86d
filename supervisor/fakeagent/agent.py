"""The fake agent itself: its messages and commands, the checkpoint behaviours, its argv and main()."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .terminal import LineEditor, die_by_signal, exit_now, out, out_lock, stdin_terminal
from .work import flood, spawn_grandchild, work_lines

DEFAULT_PROMPT = "fake> "
DEFAULT_BANNER = "fakeagent 1.0 (a scripted test double for agentd) - type 'help'"



def agentd_argv() -> list[str]:
    """How to run the agentd CLI: from PATH (as an agent would), else this Python."""
    found = shutil.which("agentd")
    return [found] if found else [sys.executable, "-m", "supervisor"]


def checkpoint_texts(session: str, n: int, work_done: int) -> dict[str, str]:
    """The deterministic note, decision, why and state a ``confirm`` checkpoint writes."""
    return {
        "note": f"fakeagent session {session} checkpoint {n}: {work_done} work lines done and saved",
        "decision": f"fakeagent session {session} checkpoint {n}: keep the current plan",
        "why": f"because session {session} reached checkpoint {n}, so the plan carries over to the next session",
        "state": f"fakeagent session {session} stopped at checkpoint {n} after {work_done} work lines; next: continue the plan",
    }


def checkpoint_mode(value: str) -> str:
    """argparse type for ``--on-checkpoint``: confirm, ignore or slow:S."""
    if value in ("confirm", "ignore"):
        return value
    if value.startswith("slow:"):
        try:
            if float(value[5:]) >= 0:
                return value
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"{value!r}: expected confirm, ignore or slow:SECONDS")


class FakeAgent:
    """The command interpreter; one instance per process."""

    def __init__(self, args: argparse.Namespace, editor: LineEditor | None = None) -> None:
        self.args = args
        self.work_counter = 0
        self.messages = 0
        self.checkpoints = 0
        self.editor = editor or LineEditor(0, args.prompt, echo=False)
        self.plan = None
        if getattr(args, "plan_script", None):
            from .plan import PlanScript

            self.plan = PlanScript(args.plan_script, agentd_argv)  # scripted per task of a plan (fakeagent/plan.py)

    def handle_message(self, text: str) -> None:
        """One submitted message: logged exactly, then a checkpoint, a command or a task."""
        if not text:
            return
        self.messages += 1
        if self.args.input_log:
            self.log_input(text)
        text = without_digest(text)
        first = text.split("\n", 1)[0]
        if self.plan is not None and self.plan.handle(self, text):
            return
        if first.startswith("CHECKPOINT"):
            self.checkpoint()
        elif "\n" not in text.strip("\r\n"):
            self.run_command(text.strip("\r\n"))
        else:
            self.task(text)

    def log_input(self, text: str) -> None:
        """Append ``{"n": N, "text": ...}`` to ``--input-log`` in one write."""
        line = json.dumps({"n": self.messages, "text": text}, ensure_ascii=False) + "\n"
        fd = os.open(self.args.input_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def run_command(self, line: str) -> None:
        """Execute one command line (without its newline); an unknown one is a task."""
        name, _, rest = line.strip().partition(" ")
        if not name:
            return
        handler = COMMANDS.get(name)
        if handler is None:
            self.task(line)
            return
        try:
            handler(self, rest)
        except (ValueError, OSError) as exc:
            out(f"error: {name}: {exc}\n")

    # -- commands --------------------------------------------------------
    def cmd_echo(self, rest: str) -> None:
        out(rest + "\n")

    def cmd_work(self, rest: str) -> None:
        n = int(rest or "3")
        lines = work_lines(n, self.args.color, self.work_counter)
        self.work_counter += n
        out("".join(line + "\n" for line in lines))

    def cmd_write(self, rest: str) -> None:
        path, _, text = rest.partition(" ")
        if not path:
            raise ValueError("usage: write PATH TEXT")
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")
        out(f"wrote {path}\n")

    def cmd_run(self, rest: str) -> None:
        import shlex

        argv = shlex.split(rest)
        if not argv:
            raise ValueError("usage: run PROGRAM [ARGS...]")
        out(f"$ {shlex.join(argv)}\n")
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=60, check=False)
        text = proc.stdout.decode(errors="replace")
        out(text if not text or text.endswith("\n") else text + "\n")
        out(f"[exit {proc.returncode}]\n")

    def cmd_env(self, rest: str) -> None:
        out(os.environ.get(rest.strip(), "") + "\n")

    def cmd_crash(self, rest: str) -> None:
        exit_now(int(rest or "1"))

    def cmd_exit(self, rest: str) -> None:
        exit_now(0)

    def cmd_sleep(self, rest: str) -> None:
        if self.editor.busy_wait(float(rest)):
            out("^C interrupted\n")

    def cmd_hold(self, rest: str) -> None:
        name, _, lines = rest.strip().partition(" ")
        if not name:
            raise ValueError("usage: hold PATH [LINES]")
        if lines:
            self.cmd_work(lines)
        while not Path(name).exists():
            if self.editor.busy_wait(0.05):
                out("^C interrupted\n")
                return
        out(f"released by {name}\n")

    def cmd_hang(self, rest: str) -> None:
        out_lock.acquire()  # the --work-interval printer waits for it forever
        while True:
            time.sleep(3600)
    def cmd_ask(self, rest: str) -> None:
        out("\nWould you like to run the following command?\n\n  $ rm -rf build\n\n"
            "\u203a 1. Yes, proceed (y)\n  2. No, and tell the agent what to do differently (esc)\n")
        out("declined\n" if self.editor.busy_wait(float(rest or "3600")) else "no answer\n")

    def cmd_flood(self, rest: str) -> None:
        flood(int(rest))

    def cmd_spawn(self, rest: str) -> None:
        out(f"grandchild {spawn_grandchild(new_session=False)}\n")

    def cmd_spawn_setsid(self, rest: str) -> None:
        out(f"grandchild {spawn_grandchild(new_session=True)}\n")

    def cmd_pid(self, rest: str) -> None:
        out(f"{os.getpid()}\n")

    def cmd_help(self, rest: str) -> None:
        out("commands: " + " ".join(sorted(COMMANDS)) + "\n")

    # -- messages that are not commands -------------------------------------
    def task(self, text: str) -> None:
        """A task for the "agent": say what it works on, print deterministic work lines."""
        first = text.strip().split("\n", 1)[0].strip()
        if len(first) > 60:
            first = first[:59] + "…"
        out(f"working on: {first}\n")
        self.cmd_work(str(self.args.task_lines))

    def checkpoint(self) -> None:
        """The daemon's checkpoint prompt arrived: react as ``--on-checkpoint`` says."""
        mode = self.args.on_checkpoint
        if mode == "ignore":
            out("I have nothing to add.\n")
            return
        if mode.startswith("slow:"):
            out("thinking about what to save...\n")
            if self.editor.busy_wait(float(mode[5:])):
                out("^C interrupted\n")
                return
        self.write_checkpoint()

    def write_checkpoint(self) -> None:
        """Note, decision and state line through the real ``agentd`` CLI, as an agent would."""
        self.checkpoints += 1
        session = os.environ.get("AGENTD_SESSION", "no-session")
        texts = checkpoint_texts(session, self.checkpoints, self.work_counter)
        root = os.environ.get("AGENTD_ROOT")
        cli = agentd_argv() + (["--root", root] if root else [])
        steps = (
            ("note", [*cli, "note", texts["note"], "--confirmed"]),
            ("decide", [*cli, "decide", texts["decision"], "--why", texts["why"], "--tag", "task"]),
            ("task-state", [*cli, "task-state", texts["state"]]),
        )
        for name, argv in steps:
            try:
                result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as exc:
                out(f"checkpoint failed: agentd {name}: {exc}\n")
                return
            if result.returncode != 0:
                reason = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
                out(f"checkpoint failed: agentd {name}: {reason}\n")
                return
            out(f"$ agentd {name}: ok\n")
        out("checkpoint written\n")


#: How agentd's constraints digest begins when it types it after a message (supervisor/adapters/hookctx.py).
DIGEST_HEAD = "agentd: the project's"


def without_digest(text: str) -> str:
    """The message without the constraints digest agentd adds after what it types (a block after a blank line,
    or, for a REPL typed line by line, the end of the line): a command stays a one-line command."""
    for mark in ("\n\n" + DIGEST_HEAD, "  " + DIGEST_HEAD):
        at = text.find(mark)
        if at >= 0:
            return text[:at]
    return text


COMMANDS = {
    "echo": FakeAgent.cmd_echo,
    "work": FakeAgent.cmd_work,
    "write": FakeAgent.cmd_write,
    "env": FakeAgent.cmd_env,
    "run": FakeAgent.cmd_run,
    "crash": FakeAgent.cmd_crash,
    "exit": FakeAgent.cmd_exit,
    "sleep": FakeAgent.cmd_sleep,
    "hold": FakeAgent.cmd_hold,
    "hang": FakeAgent.cmd_hang,
    "ask": FakeAgent.cmd_ask,
    "flood": FakeAgent.cmd_flood,
    "spawn": FakeAgent.cmd_spawn,
    "spawn-setsid": FakeAgent.cmd_spawn_setsid,
    "pid": FakeAgent.cmd_pid,
    "help": FakeAgent.cmd_help,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m supervisor.fakeagent",
                                description="Scripted fake coding agent (a test double).")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--banner", default=DEFAULT_BANNER)
    p.add_argument("--crash-after", type=float, metavar="SECONDS")
    p.add_argument("--crash-unless", metavar="PATH")
    p.add_argument("--exit-code", type=int)
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--ignore-sighup", action="store_true")
    p.add_argument("--spawn-grandchild", action="store_true")
    p.add_argument("--spawn-setsid-grandchild", action="store_true")
    p.add_argument("--flood", type=int, metavar="BYTES")
    p.add_argument("--print-env", action="append", default=[], metavar="NAME")
    p.add_argument("--work-interval", type=float, metavar="SECONDS")
    p.add_argument("--work-lines", type=int, default=3, metavar="N")
    p.add_argument("--color", action="store_true")
    p.add_argument("--exit-after-output", metavar="TEXT")
    p.add_argument("--script", metavar="FILE")
    p.add_argument("--input-log", metavar="PATH")
    p.add_argument("--on-checkpoint", type=checkpoint_mode, default="confirm", metavar="MODE")
    p.add_argument("--task-lines", type=int, default=4, metavar="N")
    p.add_argument("--plan-script", metavar="FILE")
    return p.parse_args(argv)


def _background(target, interval: float) -> None:  # type: ignore[no-untyped-def]
    threading.Thread(target=target, args=(interval,), daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stdin_terminal.enter()
    try:
        return run(args)
    finally:
        stdin_terminal.restore()


def run(args: argparse.Namespace) -> int:
    """Start-up actions, then the prompt loop (the terminal mode is already set)."""
    for signum, ignored in ((signal.SIGTERM, args.ignore_sigterm), (signal.SIGHUP, args.ignore_sighup)):
        signal.signal(signum, signal.SIG_IGN if ignored else die_by_signal)
    editor = LineEditor(0, args.prompt, echo=stdin_terminal.echo)
    agent = FakeAgent(args, editor)

    if args.crash_unless is not None and not os.path.exists(args.crash_unless):
        out(f"{args.crash_unless} is missing: exiting\n")
        exit_now(1)
    if args.crash_after is not None:
        code = 1 if args.exit_code is None else args.exit_code

        def crash_later(delay: float) -> None:
            time.sleep(delay)
            exit_now(code)

        _background(crash_later, args.crash_after)

    out(args.banner + "\n")
    for name in args.print_env:
        out(f"{name}={os.environ.get(name, '')}\n")
    if args.spawn_grandchild:
        agent.cmd_spawn("")
    if args.spawn_setsid_grandchild:
        agent.cmd_spawn_setsid("")
    if args.flood is not None:
        flood(args.flood)
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.lstrip().startswith("#"):
                    agent.run_command(line.rstrip("\n"))
    if args.exit_after_output is not None:
        out(args.exit_after_output)
        exit_now(0 if args.exit_code is None else args.exit_code)

    if args.work_interval is not None:

        def work_forever(interval: float) -> None:
            while True:
                time.sleep(interval)
                with out_lock:
                    lines = work_lines(args.work_lines, args.color, agent.work_counter)
                    agent.work_counter += args.work_lines
                    editor.print_above("".join(line + "\n" for line in lines))

        _background(work_forever, args.work_interval)

    while True:
        editor.show_prompt()
        text = editor.read_message()
        if text is None:
            break
        agent.handle_message(text)
    if editor.eof and args.ignore_sighup:
        # stdin ended (the terminal hung up): survive it, like a detached agent.
        while True:
            signal.pause()
    return 0  # Ctrl-D on an empty line, or end of input

