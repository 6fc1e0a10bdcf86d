"""A generic agent's trail: what it printed (its clean transcript), since it keeps no records agentd can read.

:func:`screen_trail` takes the end of the clean transcript and keeps its last
lines, without the idle prompt, and the commands it can see: a line
``$ COMMAND`` (a shell echo, as most REPL agents print before running one),
ended by the next such line, with the exit status when a line says it
(``[exit 2]``, ``exit status 2``, ``exit code 2``, ``Process exited with code
2``).  That is all a screen tells; the rest of a generic unit's "where you
stopped" comes from git (the scope's uncommitted files, the WIP commit).
"""

from __future__ import annotations

import re

from .common import output_tail
from .model import Action, Kind, Trail

SCREEN_LINES = 12
_COMMAND = re.compile(r"^\s*\$ (\S.*)$")
_EXIT = re.compile(r"(?:\[exit (-?\d+)\]|\bexit (?:status|code):? (-?\d+)|Process exited with code (-?\d+))", re.I)


def screen_trail(text: str, *, prompt: re.Pattern[str] | None = None, lines: int = SCREEN_LINES,
                 source: str = "the screen (clean transcript)") -> Trail:
    """The trail a screen shows (see the module docstring)."""
    rows = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    rows = [ln for ln in rows if ln.strip() and not _is_prompt(ln, prompt)]
    trail = Trail(source=source, screen=rows[-lines:])
    current: dict[str, object] | None = None
    actions: list[Action] = []

    def finish() -> None:
        if current is not None:
            code = current.get("exit")
            actions.append(Action(Kind.COMMAND, "screen", command=str(current["command"]),
                                  exit_code=code if isinstance(code, int) else None,
                                  ok=None if not isinstance(code, int) else code == 0,
                                  output=output_tail("\n".join(current["output"]))))  # type: ignore[arg-type]

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
    is found by the start of the wakeup's last non-blank line.
    """
    last = next((ln.strip() for ln in reversed((typed or "").splitlines()) if ln.strip()), "")
    if not last:
        return text
    at = text.rfind(last[:60])
    if at < 0:
        return text
    end = text.find("\n", at)
    return "" if end < 0 else text[end + 1:]


def _is_prompt(row: str, prompt: re.Pattern[str] | None) -> bool:
    """A line that is only the idle prompt (its trailing blank was stripped with the line)."""
    return prompt is not None and (prompt.search(row) is not None or prompt.search(row + " ") is not None)
