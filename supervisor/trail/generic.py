"""A generic agent's trail: what it printed (its clean transcript), since it keeps no records agentd can read.

:func:`screen_trail` reads a session's clean transcript, the whole of it,
and keeps its last lines, without the idle prompt, and the commands it can
see: a line ``$ COMMAND`` (a shell echo, as most REPL agents print before
running one), ended by the next such line, with the exit status when a line
says it (``[exit 2]``, ``exit status 2``, ``exit code 2``, ``Process exited
with code 2``).  A command that only reads files (``cat``, ``less``,
``sed -n``, ``head``, ``tail``: :func:`~.common.reads_of_command`) is a read
of those files.  That is all a screen tells; the rest of a generic unit's
"where you stopped" comes from git (the scope's uncommitted files, the WIP
commit).

Two cuts come first (the adapter makes them, :mod:`supervisor.adapters.generic`):

* the session's trail **ends where agentd's checkpoint prompt began**: what the
  agent printed while it wrote its notes is agentd's business, not its work
  (:func:`until_checkpoint` finds the prompt's echo when the adapter did not
  see where it was typed);
* it **starts after the echo of the wakeup** typed as the first message
  (:func:`after_echo`): the commands a briefing quotes are not this session's.

agentd's own commands (``agentd note``, ``decide``, ``task-state``) stay in the
trail, as what the screen showed, but :meth:`~.model.Trail.commands` and the
report leave them out (:func:`~.common.is_agentd_command`).
"""

from __future__ import annotations

import re

from .common import is_agentd_command, norm_path, output_tail, reads_of_command
from .model import Action, Kind, Trail

SCREEN_LINES = 12
#: Where a screen trail comes from (:attr:`~.model.Trail.source`): it shows no edits and no tokens.
SCREEN_SOURCE = "the screen (clean transcript)"
_COMMAND = re.compile(r"^\s*\$ (\S.*)$")
_EXIT = re.compile(r"(?:\[exit (-?\d+)\]|\bexit (?:status|code):? (-?\d+)|Process exited with code (-?\d+))", re.I)
#: The part of a checkpoint prompt looked for in its echo.
ECHO_CHARS = 60


def screen_trail(text: str, *, prompt: re.Pattern[str] | None = None, lines: int = SCREEN_LINES,
                 source: str = SCREEN_SOURCE, cwd: str | None = None, root: str | None = None) -> Trail:
    """The trail a screen shows (see the module docstring); ``cwd`` / ``root`` make the files read
    relative to the project root, as the other trails name them."""
    rows = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    rows = [ln for ln in rows if ln.strip() and not _is_prompt(ln, prompt)]
    trail = Trail(source=source, cwd=cwd, screen=rows[-lines:])
    current: dict[str, object] | None = None
    actions: list[Action] = []

    def finish() -> None:
        if current is not None:
            code = current.get("exit")
            command = str(current["command"])
            reads = reads_of_command(command) if not is_agentd_command(command) else None
            actions.append(Action(Kind.READ if reads else Kind.COMMAND, "screen", command=command,
                                  exit_code=code if isinstance(code, int) else None,
                                  ok=None if not isinstance(code, int) else code == 0,
                                  reads=tuple(norm_path(p, cwd, root) for p in reads or ()),
                                  output="" if reads else output_tail("\n".join(current["output"]))))  # type: ignore[arg-type]

    for row in rows:
        found = _COMMAND.match(row)
        if found:
            finish()
            current = {"command": found.group(1).strip(), "output": []}
            continue
        status = _EXIT.search(row)
        if status and current is not None and "exit" not in current:
            current["exit"] = int(next(g for g in status.groups() if g is not None))
        elif current is not None and "exit" not in current:
            current["output"].append(row)  # type: ignore[union-attr]
    finish()
    trail.actions = actions
    return trail


def after_echo(text: str, typed: str | None) -> str:
    """``text`` after the terminal's echo of ``typed`` (the wakeup), or all of it when the echo is not found.

    A wakeup typed into a REPL is echoed onto the screen; the commands it quotes
    (``$ cat ...`` in a recent summary) are not ones this session ran.  The echo
    is found by the start of the wakeup's last non-blank line, looked for after the start of its first.
    """
    lines = [ln.strip() for ln in (typed or "").splitlines() if ln.strip()]
    if not lines:
        return text
    begun = text.find(lines[0][:ECHO_CHARS])
    at = text.find(lines[-1][:ECHO_CHARS], max(begun, 0))
    if at < 0:
        return text
    end = text.find("\n", at)
    return "" if end < 0 else text[end + 1:]


def until_checkpoint(text: str, checkpoint: str | None) -> str:
    """``text`` up to the line where the last echo of agentd's checkpoint prompt ``checkpoint`` begins (all of it
    when there is none).  For when the adapter did not see where it typed the prompt (the daemon was reloaded
    during the session): a session kept after a checkpoint that could not be written, which then went on
    working, loses the work after that prompt here."""
    head = " ".join((checkpoint or "").split())[:ECHO_CHARS]
    at = text.rfind(head) if head else -1
    return text if at < 0 else text[:text.rfind("\n", 0, at) + 1]


def _is_prompt(row: str, prompt: re.Pattern[str] | None) -> bool:
    """A line that is only the idle prompt (its trailing blank was stripped with the line)."""
    return prompt is not None and (prompt.search(row) is not None or prompt.search(row + " ") is not None)
