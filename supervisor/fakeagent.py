"""A scripted fake coding agent.  THIS IS A TEST DOUBLE, not an agent.

It behaves like an interactive coding agent in a terminal so that agentd's
tests and the demo unit can exercise real PTYs, real processes and real
signals without an API key: it prints a banner, then a prompt (no newline
after it), reads one command per line, "works" (prints output), and prints the
prompt again.  All output goes straight to fd 1 with ``os.write`` (unbuffered).
Standard library only; starts fast.

Run: ``python -m supervisor.fakeagent [flags]``

Commands (typed at the prompt, one per line)
--------------------------------------------
``echo TEXT``          print TEXT
``work N``             print N lines of deterministic, plausible agent output
                       (ANSI-coloured with ``--color``)
``write PATH TEXT``    append TEXT + newline to PATH (relative to the working
                       directory), print ``wrote PATH``
``env NAME``           print the value of environment variable NAME (empty
                       line when unset)
``crash CODE``         exit at once with status CODE
``exit``               exit with status 0
``sleep S``            be busy for S seconds, then prompt again
``flood N``            write exactly N bytes of deterministic payload
                       (:func:`flood_payload`) as fast as possible, then prompt
``spawn``              start a long-lived grandchild (a sleeping Python
                       process), print ``grandchild PID``
``spawn-setsid``       same, but the grandchild runs in a new session (setsid:
                       it escapes the process group), print ``grandchild PID``
``pid``                print this process's pid
``help``               list the commands
Unknown commands print ``unknown command: ...``; empty lines just re-prompt.

Flags
-----
``--prompt TEXT``               prompt (default ``fake> ``)
``--banner TEXT``               banner printed first
``--crash-after SECONDS``       exit on its own after SECONDS with
                                ``--exit-code`` (default 1)
``--exit-code N``               status for ``--crash-after`` (default 1) and
                                ``--exit-after-output`` (default 0)
``--ignore-sigterm``            ignore SIGTERM (SIGKILL still kills it; the
                                ignored disposition is inherited by grandchildren)
``--ignore-sighup``             ignore SIGHUP; on terminal hang-up / EOF of
                                stdin keep running (like an agent that survives
                                its terminal) instead of exiting 0
``--spawn-grandchild``          ``spawn`` at start
``--spawn-setsid-grandchild``   ``spawn-setsid`` at start
``--flood BYTES``               ``flood BYTES`` at start
``--print-env NAME``            print ``NAME=value`` at start (repeatable)
``--work-interval SECONDS``     print ``--work-lines`` lines (default 3) every
                                SECONDS on its own, from a background thread
``--work-lines N``              lines per ``--work-interval`` tick
``--color``                     ANSI colours in ``work`` output
``--exit-after-output TEXT``    after the start-up actions print TEXT and exit
                                immediately (tests that the last bytes before
                                exit are not lost)
``--script FILE``               run the commands in FILE (one per line, ``#``
                                comments) at start, as if typed

Start-up order: banner, ``--print-env``, grandchildren, ``--flood``,
``--script``, ``--exit-after-output``, then the prompt loop.  Grandchildren
get /dev/null for stdin/stdout/stderr, so they never hold the terminal open.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

DEFAULT_PROMPT = "fake> "
DEFAULT_BANNER = "fakeagent 1.0 (a scripted test double for agentd) - type 'help'"
_FLOOD_LINE_BODY = b" the quick brown fox jumps over the lazy dog 0123456789\n"
_GRANDCHILD_CODE = "import time\nwhile True:\n    time.sleep(3600)\n"

_out_lock = threading.Lock()


def out(text: str | bytes) -> None:
    """Write to fd 1 at once (all of it); drop output if the terminal is gone."""
    data = text.encode() if isinstance(text, str) else text
    view = memoryview(data)
    with _out_lock:
        try:
            while view:
                view = view[os.write(1, view):]
        except OSError:  # EIO/EPIPE: terminal hung up; an agent would not notice either
            pass


def flood_payload(n: int, start: int = 0) -> bytes:
    """Bytes ``start``..``start+n`` of the infinite flood stream.

    The stream is 64-byte lines ``"%08d" + _FLOOD_LINE_BODY`` numbered from 0,
    so any prefix is deterministic and checkable.
    """
    line_len = 8 + len(_FLOOD_LINE_BODY)
    first, skip = divmod(start, line_len)
    count = -(-(skip + n) // line_len)
    block = b"".join(b"%08d%s" % (i, _FLOOD_LINE_BODY) for i in range(first, first + count))
    return block[skip:skip + n]


def flood(n: int) -> None:
    """Write exactly ``n`` payload bytes to stdout, in 64 KiB pieces."""
    done = 0
    while done < n:
        piece = flood_payload(min(1 << 16, n - done), done)
        out(piece)
        done += len(piece)


_WORK_TEMPLATES = (
    ("Reading", "src/module_{i}.py", "36"),
    ("Editing", "src/module_{i}.py: +{a} -{b}", "33"),
    ("Running", "pytest tests/test_module_{i}.py -q", "35"),
    ("Passed", "{a} tests in 0.{b}s", "32"),
    ("Thinking", "about step {i} of the plan", "90"),
)


def work_lines(n: int, color: bool = False, offset: int = 0) -> list[str]:
    """``n`` deterministic lines of plausible agent output."""
    lines = []
    for i in range(offset, offset + n):
        verb, detail, code = _WORK_TEMPLATES[i % len(_WORK_TEMPLATES)]
        detail = detail.format(i=i, a=(i * 7) % 50 + 1, b=(i * 3) % 10)
        if color:
            lines.append(f"\x1b[1;{code}m{verb}\x1b[0m {detail}")
        else:
            lines.append(f"{verb} {detail}")
    return lines


def spawn_grandchild(new_session: bool) -> int:
    """Start a long-lived sleeping Python child; with ``new_session`` it calls setsid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _GRANDCHILD_CODE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=new_session,  # setsid() in the child before exec
    )
    return proc.pid


class FakeAgent:
    """The command interpreter; one instance per process."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work_counter = 0

    def run_command(self, line: str) -> None:
        """Execute one command line (without its newline)."""
        name, _, rest = line.strip().partition(" ")
        if not name:
            return
        handler = COMMANDS.get(name)
        if handler is None:
            out(f"unknown command: {name}\n")
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

    def cmd_env(self, rest: str) -> None:
        out(os.environ.get(rest.strip(), "") + "\n")

    def cmd_crash(self, rest: str) -> None:
        os._exit(int(rest or "1"))

    def cmd_exit(self, rest: str) -> None:
        os._exit(0)

    def cmd_sleep(self, rest: str) -> None:
        time.sleep(float(rest))

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


COMMANDS = {
    "echo": FakeAgent.cmd_echo,
    "work": FakeAgent.cmd_work,
    "write": FakeAgent.cmd_write,
    "env": FakeAgent.cmd_env,
    "crash": FakeAgent.cmd_crash,
    "exit": FakeAgent.cmd_exit,
    "sleep": FakeAgent.cmd_sleep,
    "flood": FakeAgent.cmd_flood,
    "spawn": FakeAgent.cmd_spawn,
    "spawn-setsid": FakeAgent.cmd_spawn_setsid,
    "pid": FakeAgent.cmd_pid,
    "help": FakeAgent.cmd_help,
}


def read_lines(fd: int = 0):  # type: ignore[no-untyped-def]
    """Yield input lines from ``fd`` with raw ``os.read`` (EOF or EIO ends it)."""
    pending = b""
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the terminal hung up
            data = b""
        if not data:
            if pending:
                yield pending.decode(errors="replace")
            return
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode(errors="replace")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m supervisor.fakeagent",
                                description="Scripted fake coding agent (a test double).")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--banner", default=DEFAULT_BANNER)
    p.add_argument("--crash-after", type=float, metavar="SECONDS")
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
    return p.parse_args(argv)


def _background(target, interval: float) -> None:  # type: ignore[no-untyped-def]
    threading.Thread(target=target, args=(interval,), daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.ignore_sighup:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    agent = FakeAgent(args)

    if args.crash_after is not None:
        code = 1 if args.exit_code is None else args.exit_code

        def crash_later(delay: float) -> None:
            time.sleep(delay)
            os._exit(code)

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
        os._exit(0 if args.exit_code is None else args.exit_code)

    if args.work_interval is not None:

        def work_forever(interval: float) -> None:
            while True:
                time.sleep(interval)
                agent.cmd_work(str(args.work_lines))

        _background(work_forever, args.work_interval)

    out(args.prompt)
    for line in read_lines(0):
        agent.run_command(line)
        out(args.prompt)
    # stdin ended (EOF, or the terminal hung up).
    if args.ignore_sighup:
        while True:  # survive the hang-up, like a detached agent
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
