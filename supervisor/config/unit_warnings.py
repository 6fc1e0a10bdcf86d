"""Warnings for units that load but will misbehave: shells and REPLs as the agent (pure).

Two things go wrong when ``[agent] command`` runs an interactive shell or REPL:

* an interactive POSIX shell (bash, sh, dash, zsh, ksh, ...) ignores SIGTERM,
  so a stop waits the whole ``stop_timeout`` before SIGKILL ends it;
* agentd types text into the agent: the wakeup briefing as the first message
  (``wakeup_via = "first-message"``) and the checkpoint prompts.  A shell or a
  REPL runs what is typed, so it would execute the briefing's lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath

from .units import UnitSpec


class Interpreter(Enum):
    TERM_IGNORING_SHELL = "shell"      # interactive: ignores SIGTERM, runs typed lines
    SHELL = "other shell"              # runs typed lines
    REPL = "REPL"                      # evaluates typed lines


_POSIX_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh"}
_OTHER_SHELLS = {"fish", "tcsh", "csh", "nu", "xonsh", "elvish", "pwsh", "busybox"}
_REPLS = re.compile(r"(python[0-9.]*|pypy[0-9.]*|ipython[0-9.]*|bpython|node|nodejs|deno|bun|irb|pry|ghci|"
                    r"lua[0-9.]*|luajit|julia|R|sqlite3|psql|mysql|erl|iex|clojure|racket|guile|sbcl|ocaml|php)")
#: Arguments that make a shell or a REPL run a given program instead of reading the terminal.
_RUNS_PROGRAM = {"-c", "-m", "-e", "-p", "--eval", "--print", "--command", "-C", "run", "-f", "--file"}
#: Options that take a value (the value is not a script operand).
_VALUE_OPTIONS = {"--rcfile", "--init-file", "-o", "-O", "+O", "-W", "-X", "--require", "-r"}


@dataclass(frozen=True)
class Interactive:
    program: str
    kind: Interpreter


def interactive_interpreter(argv: Sequence[str]) -> Interactive | None:
    """The shell or REPL ``argv`` runs interactively (reading the terminal), or None."""
    args = list(argv)
    if args and PurePath(args[0]).name == "env":  # env [-i] [-u NAME] [VAR=value ...] PROGRAM ...
        args = args[1:]
        while args and (args[0].startswith("-") or "=" in args[0]):
            args = args[2:] if args[0] in ("-u", "--unset", "-C", "--chdir") else args[1:]
    if not args:
        return None
    program = PurePath(args[0]).name
    if program in _POSIX_SHELLS:
        kind = Interpreter.TERM_IGNORING_SHELL
    elif program in _OTHER_SHELLS:
        kind = Interpreter.SHELL
    elif _REPLS.fullmatch(program):
        kind = Interpreter.REPL
    else:
        return None
    rest = args[1:]
    if "-i" in rest or "--interactive" in rest:
        return Interactive(program, kind)
    skip = False
    for arg in rest:
        if skip:
            skip = False
            continue
        if arg in _RUNS_PROGRAM or arg == "-":
            return None
        if arg in _VALUE_OPTIONS:
            skip = True
            continue
        if not arg.startswith(("-", "+")):
            return None  # a script operand
    return Interactive(program, kind)


def unit_warnings(spec: UnitSpec, default_stop_timeout: float) -> list[str]:
    """One line per problem of ``spec`` that loading does not refuse (empty: nothing to say)."""
    found = interactive_interpreter(spec.agent.command)
    if found is None:
        return []
    warnings = []
    what = {Interpreter.TERM_IGNORING_SHELL: "an interactive shell", Interpreter.SHELL: "an interactive shell",
            Interpreter.REPL: "an interactive REPL"}[found.kind]
    if found.kind is Interpreter.TERM_IGNORING_SHELL:
        timeout = spec.restart.stop_timeout or default_stop_timeout
        warnings.append(
            f"[agent] command runs {found.program}, {what}: it ignores SIGTERM, so every stop waits the whole "
            f"stop_timeout ({timeout:g} s) before SIGKILL; run the agent itself in command "
            f"(or `{found.program} -c 'exec AGENT'`), or set a short [restart] stop_timeout")
    if not spec.agent.types_own_text:
        return warnings  # talks_to = "shell": agentd types nothing of its own into it
    typed = []
    if spec.agent.wakeup_route == "first-message" and spec.wakeup.on_start:
        typed.append('the wakeup briefing (wakeup_via = "first-message")')
    if spec.checkpoint.enabled:
        typed.append("the checkpoint prompts")
    warnings.append(
        f"[agent] command runs {found.program}, {what}: agentd types {' and '.join(typed or ['warnings'])} into it, "
        f"and {found.program} would execute them as commands; set [agent] talks_to = \"shell\" (agentd then "
        "types nothing of its own: the wakeup goes to a file), or run the agent itself")
    return warnings
