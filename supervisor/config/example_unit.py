"""The commented example unit that ``agentd init`` writes into a project without ``units/``.

It runs agentd's fake agent and is disabled, so that a new project has
something valid to edit, ``agentd check`` passes, and nothing is started by
surprise (the fake agent would write notes into the project's memory).
"""

from __future__ import annotations

from pathlib import Path

EXAMPLE_NAME = "example"

EXAMPLE_UNIT = """\
# An example unit, written by `agentd init`. One file per agent: units/NAME.toml
# (NAME: lowercase letters, digits, '-' and '_'). Every key is described in
# agentd's README ("Unit files"); `agentd check` validates this folder.
#
# As written it runs agentd's fake agent (a scripted test double: no API key)
# and is disabled. Try it with `agentd start example`, watch it with
# `agentd status` and `agentd logs example -f`, end it with `agentd stop`.
# For a real agent: set [agent] kind and command (see the commented lines),
# set enabled = true, and name the file after the module it works on.

[unit]
description = "example: the fake agent (edit me)"
enabled = false                 # true: `agentd start` starts it
# after = ["db"]                # start after these units (ordering only)
# requires = ["db"]             # ... and run only while they run

[agent]
kind = "generic"                # generic | codex | claude
# An argv list, never a shell string; "python" is agentd's own interpreter.
command = ["python", "-m", "supervisor.fakeagent"]
prompt = "fake> $"              # generic agents: their idle prompt (a regex on the screen)
# Codex CLI:    kind = "codex",  command = ["codex"]     (see docs/codex.md)
# Claude Code:  kind = "claude", command = ["claude"]    (see docs/claude.md)
# Not a shell or a REPL: the wakeup briefing is typed as the first message, and
# an interactive shell would run it as commands (`agentd check` warns).
workdir = "."
# env = { OPENAI_API_KEY = "..." }   # values of *_KEY, *_TOKEN, ... are redacted

[scope]
# module = "backend"            # its decision log (default: the unit's name)
# paths = ["src/backend/**"]    # what it may change; the scope guard reports the rest

[restart]
policy = "on-failure"           # no | on-failure | always
stop_timeout = 10               # seconds from SIGTERM to SIGKILL

[context]
window = 200000                 # the model's context window, in tokens
checkpoint_at = 0.70            # checkpoint, then a fresh session, at 70 % of it

[checkpoint]
deadline = 300                  # seconds for the agent to write its notes
grace = 15
# Under systemd, TimeoutStopSec must cover deadline + grace + stop_timeout + 15 s:
# `agentd doctor --env` checks it.
"""


def write_example_unit(units_dir: Path) -> Path | None:
    """Create ``units_dir`` with the example unit when the folder does not exist; return what was written.

    A ``units/`` that exists (even empty) is the user's: it is left alone.
    """
    if units_dir.exists():
        return None
    from ..memory.store import write_if_missing

    path = units_dir / f"{EXAMPLE_NAME}.toml"
    return path if write_if_missing(path, EXAMPLE_UNIT) else None
