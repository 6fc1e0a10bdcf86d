"""What a long ``stop``, ``restart`` or ``reload`` waits for, said as it happens.

The command's own request blocks until the daemon is done; meanwhile a
thread asks the daemon for ``status`` on a second connection every
:data:`EVERY` seconds and prints, on stderr, each unit's new step::

    demo: waiting for the turn to end (up to 300 s; --now skips)
    demo: checkpoint prompt typed; waiting for the agent to write its notes (up to 300 s; --now skips)
    demo: checkpoint verified (the agent wrote its notes)
    demo: stopped
    api: no checkpoint: the agent cannot take a turn: blocked: login (...); ending the session

"up to N s" is the bound the daemon itself holds for that wait (the checkpoint's
deadline, cut to what the stop's budget leaves; a fresh agent's ready
timeout), and "--now skips" is said only of a checkpoint's waits in a command
that was not already ``--now``.

Polling from the CLI keeps the daemon's protocol as it is (one request, one
answer) and costs the daemon one status a few times a second for the
duration of the command.  :meth:`Progress.doing` is what Ctrl-C reports.

The words the commands say around the wait live here too: what a graceful
stop checkpoints first and the bound of it all (:func:`checkpointing`,
:func:`announce`), what goes on after Ctrl-C (:func:`interrupted`), what
the daemon's stop answered of units the polls missed (:func:`said_at_the_end`),
and ``agentd checkpoint``'s own narration (:func:`narrated_checkpoint`: it
used to print nothing until the cycle ended, 40 s for a stuck agent).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import click

from .context import AppContext, client_call, units_arg

EVERY = 0.4
#: Exit code after Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130


#: The checkpoint's own waits: what ``--now`` skips.
CHECKPOINT_WAITS = ("waiting for the agent's turn to end", "waiting for the agent to write its notes",
                    "waiting: a person is typing")


def step(row: dict[str, Any], now: bool = False) -> str | None:
    """The line for a unit's state and activity (None: nothing worth a line); ``now``: the command is
    already ``--now`` (nothing is left for it to skip)."""
    state, activity = row.get("state"), row.get("activity") or ""
    bound = row.get("activity_bound")
    checkpoint = activity.startswith(CHECKPOINT_WAITS) and state in ("checkpointing", "stopping")
    limit = f" (up to {bound:.0f} s{'; --now skips' if checkpoint and not now else ''})" if bound else ""
    if activity == "waiting for the agent's turn to end":
        return f"waiting for the turn to end{limit}"
    if activity == "waiting for the agent to write its notes":
        return f"checkpoint prompt typed; waiting for the agent to write its notes{limit}"
    if activity.startswith("no checkpoint:"):
        return f"{activity}; ending the session"
    if activity:
        return f"{activity}{limit}"
    reason = str(row.get("reason") or "")
    if state == "inactive" and "no checkpoint:" in reason:
        return "stopped without a checkpoint: " + reason[reason.index("no checkpoint:") + len("no checkpoint: "):]
    return {"stopping": "ending the session", "inactive": "stopped", "failed": f"failed: {reason}",
            "error": f"error: {reason}", "backoff": "in backoff: " + reason, "starting": "starting",
            "respawning": "starting the fresh session"}.get(str(state)) or (
        f"running (session {row.get('session')})" if state == "running" else None)


def flush_line(cycle: dict[str, Any]) -> str:
    flush = cycle.get("flush")
    if flush == "verified":
        return "checkpoint verified (the agent wrote its notes)"
    if flush == "auto":
        return "checkpoint not written by the agent: agentd wrote an [auto] note and the transcript's tail"
    return f"checkpoint {flush}"


class Progress:
    """Print each unit's steps while ``with Progress(...)`` runs (see the module docstring)."""

    def __init__(self, socket_path: Path, units: list[str] | None, now: bool = False) -> None:
        self.socket_path, self.units, self.now = socket_path, units, now
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
        text = step(row, self.now)
        if text and self.last.get(unit) != text:
            # a first look says nothing of a unit merely running or stopped, but one stopped without a
            # checkpoint (before the first look, on a busy machine) is said
            if unit in self.last or row.get("state") not in ("running", "inactive") or "without a checkpoint" in text:
                click.echo(f"{unit}: {text}", err=True)
            self.last[unit] = text


# ------------------------------------------------------------------ the commands' words around the wait
def checkpointing(app: AppContext, units: tuple[str, ...], daemon: bool = False) -> tuple[list[str], float, str]:
    """The running units a graceful stop or restart checkpoints first, how long the whole of it may take
    (each unit's checkpoint deadline and stop timeout; a stop of the daemon: its one stop budget), and why."""
    try:
        result = client_call(app.paths, "status", timeout=10.0, units=units_arg(units))
    except click.ClickException:
        return [], 0.0, ""
    names, longest = [], 0.0
    for row in result.get("units", []) if isinstance(result, dict) else []:
        limits = row.get("checkpoint_limits") or {}
        if row.get("state") in ("running", "checkpointing") and limits.get("on_stop"):
            names.append(row["unit"])
            longest = max(longest, limits["deadline"] + limits.get("stop_timeout", 0.0))
    budget = (result.get("daemon") or {}).get("stop_budget") if daemon and isinstance(result, dict) else None
    if budget:
        return names, budget["seconds"], f"the daemon's stop budget: {budget['source']}"
    return names, longest, "the checkpoint deadline and the stop timeout"


def announce(action: str, names: list[str], longest: float, why: str) -> None:
    if names:
        click.echo(f"{action}: checkpointing {', '.join(names)} first (up to {longest:.0f} s in all: {why}); "
                   "an agent that cannot take a turn is stopped at once; Ctrl-C stops waiting, not the daemon; "
                   "--now skips the checkpoint", err=True)


def progress_of(app: AppContext, units: tuple[str, ...], now: bool = False) -> Progress:
    return Progress(app.paths.socket_path, units_arg(units), now=now)


def interrupted(action: str, units: tuple[str, ...], now: bool, doing: list[str] | None = None) -> None:
    """Ctrl-C while the daemon works: say what goes on without us, and how to skip it."""
    what = ", ".join(units) if units else ("every unit, then itself" if action == "stop" else "the units")
    steps = ("ends each agent (SIGTERM, then SIGKILL after its stop_timeout)" if now else
             "checkpoints each running agent first (up to its [checkpoint] deadline + grace), then ends it "
             "(SIGTERM, then SIGKILL after its stop_timeout)")
    verb = "stopping" if action == "stop" else "restarting"
    hint = "" if now else f" `agentd {action} --now{' ' + ' '.join(units) if units else ''}` skips the checkpoints;"
    click.echo(f"\nagentd {action}: interrupted. The daemon goes on {verb} {what} in the background: it {steps}."
               f"{hint} `agentd status` shows where it is.", err=True)
    for line in doing or ():
        click.echo(f"  now: {line}", err=True)
    sys.exit(INTERRUPTED)


def said_at_the_end(progress: Progress, result: object) -> None:
    """What the daemon's stop answered of each unit that the progress lines did not say (a unit stopped
    between two looks; the daemon is gone before the last one)."""
    units = result.get("units") if isinstance(result, dict) else None
    for name, row in (units or {}).items():
        text = step({"state": row.get("state"), "reason": row.get("reason")})
        if text and text != "stopped" and progress.last.get(name) != text:
            click.echo(f"{name}: {text}", err=True)


def narrated_checkpoint(app: AppContext, unit: str) -> Any:
    """``agentd checkpoint UNIT``: say what it will wait for and how long at most, a blocking screen in the
    way first, then each step as it happens; returns the daemon's cycle record."""
    try:
        result = client_call(app.paths, "status", timeout=10.0, units=[unit])
    except click.ClickException:
        result = None  # the checkpoint request itself says what is wrong
    for row in result.get("units", []) if isinstance(result, dict) else []:
        limits = row.get("checkpoint_limits") or {}
        bound = f" (up to {limits['deadline'] + limits.get('grace', 0.0):.0f} s: its [checkpoint] deadline)" if limits else ""
        click.echo(f"checkpoint: {unit}: prompting for notes, verifying them on disk, then a fresh session{bound}; "
                   "Ctrl-C stops waiting, not the checkpoint", err=True)
        blocked = row.get("blocked") or row.get("frozen")
        if blocked:
            what = f"blocked: {blocked['screen']}: {blocked['todo']}" if "screen" in blocked else blocked.get("detail")
            click.echo(f"{unit}: {what} — the agent may not take the checkpoint's turn", err=True)
    progress = Progress(app.paths.socket_path, [unit], now=True)  # no --now here: nothing to skip
    try:
        with progress:
            return client_call(app.paths, "checkpoint", timeout=None, unit=unit)
    except KeyboardInterrupt:
        click.echo(f"\nagentd checkpoint: interrupted. The daemon goes on with {unit}'s checkpoint; "
                   "`agentd status` shows where it is.", err=True)
        for line in progress.doing():
            click.echo(f"  now: {line}", err=True)
        sys.exit(INTERRUPTED)
