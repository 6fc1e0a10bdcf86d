"""``agentd notify``: forward an agent's event (Codex notify, Claude Code hooks) to the daemon.

The agents run this on every turn and, for Claude Code, around tool calls, so
it must start fast: :func:`answer` handles the common form with the standard
library only, before click or any command module is imported::

    agentd notify [--unit U | --unit=U] [PAYLOAD]      (AGENTD_SOCKET set, as for every agent)

Anything else (help, another option, no ``$AGENTD_SOCKET``) returns None and
the click command runs; both forward through :func:`forward`, the one
implementation.  An agent's hook must never fail because of agentd: problems
go to stderr and the exit code stays 0.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def forward(unit: str, raw: str, socket_path: Path) -> tuple[str | None, str | None]:
    """Send the event ``raw`` (JSON text) for ``unit``; ``(what to print for the agent, problem)``."""
    try:
        event = json.loads(raw) if raw.strip() else {}
        if not isinstance(event, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return None, f"agentd notify: payload is not a JSON object: {exc}"
    from ..control.client import call

    try:
        reply = call(socket_path, "agent-event", timeout=20.0, unit=unit, session=os.environ.get("AGENTD_SESSION"),
                     event=event)
    except Exception as exc:  # noqa: BLE001 - an agent's hook must never break on agentd
        return None, f"agentd notify: {exc}"
    output = reply.get("output") if isinstance(reply, dict) else None
    return (str(output) if output else None), None


def parse(argv: list[str]) -> tuple[str, str | None] | None:
    """``(unit, payload)`` for the plain form (``argv`` after ``notify``), else None."""
    unit, payload, i = os.environ.get("AGENTD_UNIT") or None, None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--unit" and i + 1 < len(argv):
            unit, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--unit="):
            unit, i = arg.removeprefix("--unit="), i + 1
            continue
        if arg.startswith("-") or payload is not None:
            return None  # --help, --, an unknown option, a second payload: click says what it means
        payload, i = arg, i + 1
    return (unit, payload) if unit else None


def answer(argv: list[str]) -> int | None:
    """Run ``agentd notify`` here (``argv`` after ``notify``) and return 0, or None to let click run it."""
    socket_path = os.environ.get("AGENTD_SOCKET")
    parsed = parse(argv)
    if not socket_path or parsed is None:
        return None
    unit, payload = parsed
    output, problem = forward(unit, payload if payload is not None else sys.stdin.read(), Path(socket_path))
    if problem:
        sys.stderr.write(problem + "\n")
    if output:
        sys.stdout.write(output + "\n")
    sys.stdout.flush()
    return 0
