"""What a long ``stop``, ``restart`` or ``reload`` waits for, said as it happens.

The command's own request blocks until the daemon is done; meanwhile a
thread asks the daemon for ``status`` on a second connection every
:data:`EVERY` seconds and prints, on stderr, each unit's new step::

    demo: waiting for the turn to end (up to 300 s; --now skips)
    demo: checkpoint prompt typed; waiting for the agent to write its notes (up to 300 s; --now skips)
    demo: checkpoint verified (the agent wrote its notes)
    demo: stopped

Polling from the CLI keeps the daemon's protocol as it is (one request, one
answer) and costs the daemon one status a few times a second for the
duration of the command.  :meth:`Progress.doing` is what Ctrl-C reports.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click

EVERY = 0.4


def step(row: dict[str, Any], deadline: float | None) -> str | None:
    """The line for a unit's state and activity (None: nothing worth a line)."""
    state, activity = row.get("state"), row.get("activity") or ""
    limit = f" (up to {deadline:g} s; --now skips)" if deadline else ""
    if activity == "waiting for the agent's turn to end":
        return f"waiting for the turn to end{limit}"
    if activity == "waiting for the agent to write its notes":
        return f"checkpoint prompt typed; waiting for the agent to write its notes{limit}"
    if activity.startswith("waiting: a person is typing"):
        return f"{activity}{limit}"
    if activity:
        return activity
    return {"stopping": "ending the session", "inactive": "stopped", "failed": f"failed: {row.get('reason')}",
            "backoff": "in backoff: " + str(row.get("reason")), "starting": "starting",
            "respawning": "starting the fresh session"}.get(str(state)) or (
        f"running (session {row.get('session')})" if state == "running" else None)


def flush_line(cycle: dict[str, Any]) -> str:
    flush = cycle.get("flush")
    if flush == "verified":
        return "checkpoint verified (the agent wrote its notes)"
    if flush == "auto":
        return "checkpoint not written by the agent: agentd wrote an [auto] note and the transcript's tail"
    return f"checkpoint {flush}"


def deadline(row: dict[str, Any]) -> float | None:
    """A status row's checkpoint deadline (what "up to N s" says), None without checkpoints."""
    limits = row.get("checkpoint_limits") or {}
    return limits.get("deadline")


class Progress:
    """Print each unit's steps while ``with Progress(...)`` runs (see the module docstring)."""

    def __init__(self, socket_path: Path, units: list[str] | None) -> None:
        self.socket_path, self.units = socket_path, units
        self.last: dict[str, str] = {}
        self.cycles: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentd-progress", daemon=True)
        self._first = True

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        if exc[0] is None:
            self.poll()  # the last step (stopped, running) once the command is done

    def doing(self) -> list[str]:
        """What each unit was last seen doing (for Ctrl-C)."""
        return [f"{unit}: {text}" for unit, text in self.last.items()]

    def _run(self) -> None:
        while not self._stop.wait(EVERY if not self._first else 0.05):
            self._first = False
            if not self.poll():
                return

    def poll(self) -> bool:
        """One look; False once the daemon no longer answers (it stopped)."""
        from ..control.client import call

        try:
            result = call(self.socket_path, "status", timeout=5.0, units=self.units)
        except Exception:  # noqa: BLE001 - the daemon went away (a full stop) or is busy: say nothing
            return False
        for row in result.get("units", []) if isinstance(result, dict) else []:
            self.see(row)
        return True

    def see(self, row: dict[str, Any]) -> None:
        unit = row["unit"]
        cycle = row.get("last_checkpoint") or {}
        if unit in self.cycles and cycle.get("started") and cycle.get("started") != self.cycles[unit]:
            click.echo(f"{unit}: {flush_line(cycle)}", err=True)
        self.cycles[unit] = cycle.get("started")
        text = step(row, deadline(row))
        if text and self.last.get(unit) != text:
            if unit in self.last or row.get("state") not in ("running", "inactive"):
                click.echo(f"{unit}: {text}", err=True)
            self.last[unit] = text
