"""A scripted fake coding agent.  THIS IS A TEST DOUBLE, not an agent.

It behaves like an interactive coding agent in a terminal so that agentd's
tests and the demo unit can exercise real PTYs, real processes and real
signals without an API key: it prints a banner, then a prompt (no newline
after it), reads one message at a time, "works" (prints output), and prints
the prompt again.  All output goes straight to fd 1 with ``os.write``
(unbuffered).  Standard library only; starts fast.

Input, like a real TUI
----------------------
When stdin is a terminal it is switched to a raw-ish mode at start (ICANON,
ECHO, ISIG, IEXTEN off; ICRNL, INLCR, IGNCR, IXON off; output processing
such as ONLCR left alone, so ``\n`` still prints as ``\r\n``) and restored
on every exit the program controls (``exit``, ``crash``, Ctrl-D, EOF,
``--crash-after``, SIGTERM/SIGHUP with the default disposition).  The fake
agent does its own line editing (:class:`LineEditor`):

* printable characters are echoed if the terminal had ECHO on at start (so
  under pexpect with ``echo=False`` nothing is echoed, as before);
* Backspace (DEL or ^H) deletes a character, Ctrl-U the whole line;
* Enter (``\r`` or ``\n``; ``\r\n`` counts once) submits the message;
* a bracketed paste ``ESC[200~ ... ESC[201~`` is taken verbatim, newlines
  included, and the following Enter submits it as ONE message (no 4 KiB
  canonical line limit: a 12 KiB paste arrives whole);
* other escape sequences (arrow keys) are ignored;
* Ctrl-C discards the line (``^C``, new prompt); while busy (``sleep``, a
  slow checkpoint) it interrupts the work and goes back to the prompt;
* Ctrl-D on an empty line exits with status 0, like real agents.

Empty messages just re-prompt and are not logged.

Messages
--------
A one-line message whose first word is a command below runs it.  A message
whose first line starts with ``CHECKPOINT`` (the daemon's checkpoint prompt)
runs the ``--on-checkpoint`` behaviour.  Anything else is a *task*: the agent
prints ``working on: <first line, truncated>`` and ``--task-lines``
deterministic work lines (so the transcript grows), then the prompt.

``--on-checkpoint`` modes:

``confirm`` (default)  like an agent using its shell: runs
                       ``agentd [--root $AGENTD_ROOT] note TEXT --confirmed``
                       and ``agentd ... decide TEXT --why "because ..., so
                       ..." --tag task`` and ``agentd ... task-state TEXT``
                       (the "State at interruption" line of its module's
                       task) (argv lists, ``agentd`` from PATH, else
                       ``python -m supervisor``), prints ``checkpoint
                       written``.  Every text names ``$AGENTD_SESSION``
                       (:func:`checkpoint_texts`).
``ignore``             prints ``I have nothing to add.``, writes nothing.
``slow:S``             busy for S seconds (Ctrl-C interrupts it: nothing
                       written), then ``confirm``.

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
``run ARGV...``        run a program like an agent's shell tool (argv split
                       like a shell would, never run through one), print
                       ``$ ARGV...``, its output, then ``[exit N]``
``crash CODE``         exit at once with status CODE
``exit``               exit with status 0
``sleep S``            be busy for S seconds, then prompt again
``hold PATH [N]``      print N work lines (default 0), then be busy until PATH
                       exists (a test ends the turn when it chooses; Ctrl-C
                       interrupts), print ``released by PATH``, prompt again
``hang``               stop answering: read no more input (Ctrl-C included)
                       and print nothing more (``--work-interval`` output
                       included), until a signal ends the process
``ask S``              show an approval dialog ("Would you like to run the following
                       command?" ... "1. Yes, proceed") and wait S seconds for an
                       answer nobody gives (Ctrl-C declines it), then prompt again
``flood N``            write exactly N bytes of deterministic payload
                       (:func:`flood_payload`) as fast as possible, then prompt
``spawn``              start a long-lived grandchild (a sleeping Python
                       process), print ``grandchild PID``
``spawn-setsid``       same, but the grandchild runs in a new session (setsid:
                       it escapes the process group), print ``grandchild PID``
``pid``                print this process's pid
``help``               list the commands
Anything else is a task (see above); empty lines just re-prompt.

Flags
-----
``--prompt TEXT``               prompt (default ``fake> ``)
``--banner TEXT``               banner printed first
``--crash-after SECONDS``       exit on its own after SECONDS with
                                ``--exit-code`` (default 1)
``--crash-unless PATH``         exit at once (status 1) unless PATH exists
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
``--input-log PATH``            append every submitted message, exactly as
                                received and before it is interpreted, as a
                                JSON line ``{"n": N, "text": "..."}`` (N from 1)
``--on-checkpoint MODE``        ``confirm`` (default), ``ignore``, ``slow:S``
``--task-lines N``              work lines printed per task (default 4)

``--work-interval`` output never corrupts the line being typed: at the prompt
the line is erased, the work printed, and the prompt plus the typed text
redrawn.

Start-up order: banner, ``--print-env``, grandchildren, ``--flood``,
``--script``, ``--exit-after-output``, then the prompt loop.  Grandchildren
get /dev/null for stdin/stdout/stderr, so they never hold the terminal open.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

DEFAULT_PROMPT = "fake> "
DEFAULT_BANNER = "fakeagent 1.0 (a scripted test double for agentd) - type 'help'"
_FLOOD_LINE_BODY = b" the quick brown fox jumps over the lazy dog 0123456789\n"
_GRANDCHILD_CODE = "import time\nwhile True:\n    time.sleep(3600)\n"

# Re-entrant: the line editor holds it while it updates the line and echoes.
_out_lock = threading.RLock()


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


# ---------------------------------------------------------------- terminal and line editing

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"


class RawTerminal:
    """Puts a tty stdin into a raw-ish input mode and restores it (idempotent)."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.saved: list | None = None  # type: ignore[type-arg]
        #: Whether the terminal echoed input before we took over (we echo then).
        self.echo = False

    def enter(self) -> None:
        if not os.isatty(self.fd):
            return
        try:
            saved = termios.tcgetattr(self.fd)
        except termios.error:
            return
        self.saved = saved
        self.echo = bool(saved[3] & termios.ECHO)
        mode = [list(x) if isinstance(x, list) else x for x in saved]
        mode[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.IXON)
        mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
        mode[6][termios.VMIN] = 1
        mode[6][termios.VTIME] = 0
        termios.tcsetattr(self.fd, termios.TCSANOW, mode)

    def restore(self) -> None:
        saved, self.saved = self.saved, None
        if saved is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSANOW, saved)
            except termios.error:  # the terminal is gone
                pass


_terminal = RawTerminal(0)


def exit_now(code: int) -> None:
    """Restore the terminal mode, then exit at once (no cleanup handlers)."""
    _terminal.restore()
    os._exit(code)


def _die_by_signal(signum: int, frame: object) -> None:
    """Default-disposition signals: restore the terminal, then die by the same signal."""
    _terminal.restore()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class LineEditor:
    """Reads messages from a raw terminal (or a pipe), doing its own line editing.

    See the module docstring for the keys.  ``read_message`` returns one
    submitted message, or None for Ctrl-D on an empty line or end of input.
    """

    def __init__(self, fd: int, prompt: str, echo: bool) -> None:
        self.fd = fd
        self.prompt = prompt
        self.echo = echo
        self.pending = bytearray()  # read but not yet interpreted
        self.line = bytearray()  # the message being typed
        self.eof = False
        self.at_prompt = False  # the prompt is shown and we wait for input
        self._pasting = False
        self._skip_lf = False

    # -- output around the line ------------------------------------------------
    def show_prompt(self) -> None:
        with _out_lock:
            out(self.prompt)
            self.at_prompt = True

    def print_above(self, text: str) -> None:
        """Print ``text`` (whole lines) without corrupting the line being typed."""
        with _out_lock:
            if not self.at_prompt:
                out(text)
                return
            shown = self.line.decode(errors="replace") if self.echo else ""
            out("\r\x1b[K" + text + self.prompt + shown)

    def _echo(self, data: bytes | str) -> None:
        if self.echo:
            out(data)

    # -- input ----------------------------------------------------------------
    def _fill(self, timeout: float | None = None) -> bool:
        """Read what is available (waiting up to ``timeout``); False at end of input or timeout."""
        if self.eof:
            return False
        if timeout is not None:
            ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
            if not ready:
                return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the terminal hung up
            data = b""
        if not data:
            self.eof = True
            return False
        self.pending += data
        return True

    def read_message(self) -> str | None:
        """The next submitted message (exact text), or None (Ctrl-D / end of input)."""
        while True:
            result = self._interpret()
            if result is not _MORE:
                return result  # type: ignore[return-value]
            if not self._fill():
                with _out_lock:
                    self.at_prompt = False
                    if self.line:
                        text = self.line.decode(errors="replace")
                        self.line.clear()
                        return text
                return None

    def busy_wait(self, seconds: float) -> bool:
        """Be busy for ``seconds``; True when Ctrl-C interrupted it (input typed meanwhile is kept)."""
        deadline = time.monotonic() + seconds
        while True:
            if 3 in self.pending and not self._pasting:
                del self.pending[: self.pending.index(3) + 1]
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self.eof:
                time.sleep(remaining)
                return False
            self._fill(timeout=remaining)

    def _interpret(self) -> object:
        """Apply pending bytes to the line; a submitted message, None, or ``_MORE``."""
        buf = self.pending
        i = 0
        try:
            while i < len(buf):
                if self._pasting:
                    i, done = self._paste(i)
                    if not done:
                        return _MORE
                    continue
                b = buf[i]
                if self._skip_lf:
                    self._skip_lf = False
                    if b == 0x0A:
                        i += 1
                        continue
                if b == 0x1B:
                    end = _escape_end(buf, i)
                    if end is None:
                        return _MORE
                    if buf[i:end] == PASTE_START:
                        self._pasting = True
                    i = end
                elif b in (0x0D, 0x0A):
                    i += 1
                    self._skip_lf = b == 0x0D
                    return self._submit()
                elif b in (0x7F, 0x08):
                    i += 1
                    self._backspace()
                elif b == 0x15:  # Ctrl-U
                    i += 1
                    with _out_lock:
                        self.line.clear()
                        self._echo("\r\x1b[K" + self.prompt)
                elif b == 0x03:  # Ctrl-C at the prompt: drop the line
                    i += 1
                    with _out_lock:
                        self.line.clear()
                        out("^C\n" + self.prompt)
                elif b == 0x04:  # Ctrl-D: exit on an empty line
                    i += 1
                    if not self.line:
                        with _out_lock:
                            self.at_prompt = False
                        return None
                elif b < 0x20 and b != 0x09:
                    i += 1  # other control characters are ignored
                else:
                    j = i + 1
                    while j < len(buf) and (buf[j] >= 0x20 or buf[j] == 0x09) and buf[j] != 0x7F:
                        j += 1
                    with _out_lock:
                        self.line += buf[i:j]
                        self._echo(bytes(buf[i:j]))
                    i = j
            return _MORE
        finally:
            del buf[:i]

    def _paste(self, i: int) -> tuple[int, bool]:
        """Take pasted bytes from ``i`` verbatim; (new index, whether the end marker was seen)."""
        buf = self.pending
        end = buf.find(PASTE_END, i)
        if end < 0:
            # Keep a possible partial end marker for the next read.
            stop = max(i, len(buf) - (len(PASTE_END) - 1))
            chunk, new_i, done = bytes(buf[i:stop]), stop, False
        else:
            chunk, new_i, done = bytes(buf[i:end]), end + len(PASTE_END), True
            self._pasting = False
        with _out_lock:
            self.line += chunk
            self._echo(chunk)
        return new_i, done

    def _backspace(self) -> None:
        with _out_lock:
            if not self.line:
                return
            # Drop one UTF-8 character (continuation bytes first).
            while self.line and (self.line[-1] & 0xC0) == 0x80:
                self.line.pop()
            if self.line:
                self.line.pop()
            self._echo("\b \b")

    def _submit(self) -> str:
        with _out_lock:
            text = self.line.decode(errors="replace")
            self.line.clear()
            self.at_prompt = False
            self._echo("\n")
        return text


_MORE = object()  # "need more input" marker of LineEditor._interpret


def _escape_end(buf: bytearray, i: int) -> int | None:
    """End index of the escape sequence at ``buf[i]`` (ESC), or None when incomplete."""
    if i + 1 >= len(buf):
        return None
    kind = buf[i + 1]
    if kind == 0x5B:  # CSI: parameters, then a final byte 0x40-0x7E
        j = i + 2
        while j < len(buf):
            if 0x40 <= buf[j] <= 0x7E:
                return j + 1
            j += 1
        return None
    if kind == 0x4F:  # SS3 (application cursor keys)
        return i + 3 if i + 2 < len(buf) else None
    return i + 2


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

    def handle_message(self, text: str) -> None:
        """One submitted message: logged exactly, then a checkpoint, a command or a task."""
        if not text:
            return
        self.messages += 1
        if self.args.input_log:
            self.log_input(text)
        first = text.split("\n", 1)[0]
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
        _out_lock.acquire()  # the --work-interval printer waits for it forever
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
    return p.parse_args(argv)


def _background(target, interval: float) -> None:  # type: ignore[no-untyped-def]
    threading.Thread(target=target, args=(interval,), daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _terminal.enter()
    try:
        return run(args)
    finally:
        _terminal.restore()


def run(args: argparse.Namespace) -> int:
    """Start-up actions, then the prompt loop (the terminal mode is already set)."""
    for signum, ignored in ((signal.SIGTERM, args.ignore_sigterm), (signal.SIGHUP, args.ignore_sighup)):
        signal.signal(signum, signal.SIG_IGN if ignored else _die_by_signal)
    editor = LineEditor(0, args.prompt, echo=_terminal.echo)
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
                with _out_lock:
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


if __name__ == "__main__":
    sys.exit(main())
