"""The control commands and ``status``, on a small Protocol (never on the Arbiter itself).

:func:`command_table` maps each command name to its handler, the
arguments it accepts (the control server refuses any other) and who may run
it (``who``, :mod:`supervisor.control.access`): the operator only, unless the
entry says otherwise.  A caller inside a unit (the agent, its hooks) may run
``ping``, and, for its own unit only, ``status`` and ``agent-event``
(``who=Own(...)``: the server binds the unit and session arguments to the
caller's, from the kernel); everything else is the operator's.  Handlers check
their arguments' types and turn a unit's refusals into one-line errors.
:func:`status_row` is what ``agentd status`` shows of one unit.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from .. import __version__
from ..control.framing import ControlError
from ..control.access import ANYONE, Own
from ..control.server import Command
from ..session.pty import open_sessions
from .lifecycle import UnitState
from .unit import UnitSupervisor


class Daemon(Protocol):
    """What the commands need of the daemon."""

    units: Mapping[str, UnitSupervisor]
    load_errors: list[Any]
    settings: Any
    started_wall: float
    confinement: Any  # daemon.confinement.Confinement (None before the daemon runs)
    web: Any  # supervisor.web.host.WebHost: the dashboard

    async def start_units(self, names: list[str] | None) -> dict[str, str]: ...
    async def stop_units(self, names: list[str] | None, why: str = ..., now: bool = ...) -> dict[str, str]: ...
    async def restart_units(self, names: list[str] | None, now: bool = ...) -> dict[str, str]: ...
    async def reload(self) -> dict[str, Any]: ...
    async def shutdown(self, now: bool = ...) -> dict[str, Any]: ...
    async def status(self, names: list[str] | None, stats: bool = ...) -> dict[str, Any]: ...
    async def broadcast(self, text: str, origin: str | None) -> dict[str, Any]: ...
    def stop_seconds(self) -> tuple[float, str]: ...  # the daemon's one stop budget and its source


def unit_of(daemon: Daemon, name: Any) -> UnitSupervisor:
    if not isinstance(name, str) or name not in daemon.units:
        from difflib import get_close_matches

        why = [e.message for e in daemon.load_errors if getattr(e, "path", None) is not None
               and e.path.name == f"{name}.toml"]
        if why:  # its file is there but does not load: say why, not "no such unit"
            raise ControlError(f"unit {name!r} is not loaded: {e_path(daemon, name)}: {why[0]} "
                               "(fix the file, then `agentd reload`)")

        known = ", ".join(sorted(daemon.units)) or "none"
        close = get_close_matches(name, list(daemon.units), n=1) if isinstance(name, str) else []
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ControlError(f"no such unit {name!r}{hint} (known units: {known})")
    return daemon.units[name]


def e_path(daemon: Daemon, name: str) -> str:
    """The unit file of ``name``, as status names it."""
    return str(daemon.settings.units_path / f"{name}.toml")


def _names(args: dict[str, Any]) -> list[str] | None:
    units = args.get("units")
    if units is None:
        return None
    if not isinstance(units, list) or not all(isinstance(u, str) for u in units):
        raise ControlError("units must be a list of unit names")
    return units


def _text(args: dict[str, Any], cmd: str, nonempty: bool = False) -> str:
    text = args.get("text")
    if not isinstance(text, str) or (nonempty and not text.strip()):
        raise ControlError(f"{cmd}: text must be a {'non-empty ' if nonempty else ''}string")
    return text


async def _refusal(call: Awaitable[Any]) -> Any:
    """A unit's ValueError is a refusal for the user, not a failure of the daemon."""
    try:
        return await call
    except ValueError as exc:
        raise ControlError(str(exc)) from None


def command_table(daemon: Daemon, attach: Callable[..., Awaitable[None]]) -> dict[str, Command]:
    async def ping(args: dict[str, Any]) -> Any:
        return {"pid": os.getpid(), "version": __version__}

    async def status(args: dict[str, Any]) -> Any:
        return await daemon.status(_names(args))

    async def start(args: dict[str, Any]) -> Any:
        return await daemon.start_units(_names(args))

    async def stop(args: dict[str, Any]) -> Any:
        return await daemon.stop_units(_names(args), now=bool(args.get("now")))

    async def restart(args: dict[str, Any]) -> Any:
        return await daemon.restart_units(_names(args), now=bool(args.get("now")))

    async def checkpoint(args: dict[str, Any]) -> Any:
        return await _refusal(unit_of(daemon, args.get("unit")).checkpoint())

    async def reset(args: dict[str, Any]) -> Any:
        names = _names(args)
        units = [unit_of(daemon, n) for n in names] if names else [
            u for u in daemon.units.values() if u.state is UnitState.FAILED]
        for unit in units:
            unit.reset_failed()
        return {u.name: u.state.value for u in units}

    async def reload(args: dict[str, Any]) -> Any:
        return await daemon.reload()

    async def send(args: dict[str, Any]) -> Any:
        unit = unit_of(daemon, args.get("unit"))
        return await _refusal(unit.talk.send(_text(args, "send"), bool(args.get("enter", True)), bool(args.get("raw"))))

    async def shutdown(args: dict[str, Any]) -> Any:
        return await daemon.shutdown(now=bool(args.get("now")))

    async def broadcast(args: dict[str, Any]) -> Any:
        return await daemon.broadcast(_text(args, "broadcast", nonempty=True).strip()[:500], args.get("origin"))

    async def queue(args: dict[str, Any]) -> Any:
        return unit_of(daemon, args.get("unit")).talk.queue(_text(args, "queue"))

    async def web(args: dict[str, Any]) -> Any:
        port = args.get("port")
        if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535):
            raise ControlError("web: port must be a port number from 0 to 65535 (0: any free port)")
        return await daemon.web.serve(stop=bool(args.get("stop")), port=port, exact=bool(args.get("exact")))

    async def agent_event(args: dict[str, Any]) -> Any:
        event = args.get("event")
        if not isinstance(event, dict):
            raise ControlError("agent-event: event must be a JSON object")
        session = args.get("session")
        return await unit_of(daemon, args.get("unit")).talk.agent_event(event, session if isinstance(session, str) else None)

    return {
        # who: the operator only, unless the entry names ANYONE or Own (a unit, for itself); see the module doc
        "ping": Command(ping, help="is the daemon alive", who=ANYONE),
        "status": Command(status, frozenset({"units"}), "units and their state", who=Own(unit=None, units="units")),
        "start": Command(start, frozenset({"units"}), "start units (all enabled when none given)"),
        "stop": Command(stop, frozenset({"units", "now"}), "stop units (checkpoint first unless now)"),
        "restart": Command(restart, frozenset({"units", "now"}), "restart units (through a checkpoint unless now)"),
        "checkpoint": Command(checkpoint, frozenset({"unit"}), "run a checkpoint cycle now"),
        "broadcast": Command(broadcast, frozenset({"text", "origin"}), "tell the other units about a global decision"),
        "queue": Command(queue, frozenset({"unit", "text"}), "type text at the unit's next turn end"),
        "agent-event": Command(agent_event, frozenset({"unit", "session", "event"}), "an event from the agent (notify, hooks)",
                               who=Own("unit", session="session")),
        "reset-failed": Command(reset, frozenset({"units"}), "clear the failed state"),
        "reload": Command(reload, help="re-read unit files"),
        "web": Command(web, frozenset({"stop", "port", "exact"}), "serve the dashboard (or stop serving it); its URL"),
        "send": Command(send, frozenset({"unit", "text", "enter", "raw"}), "type text into an agent"),
        "shutdown": Command(shutdown, frozenset({"now"}), "stop every unit, then the daemon"),
        "attach": Command(attach, frozenset({"unit", "read_only", "rows", "cols", "raw"}), "relay a live session",
                          stream=True),
    }


#: What status says of a unit that talks to a shell ([agent] talks_to = "shell").
TYPING_OFF = ("off (talks_to = \"shell\"): agentd types no checkpoint prompt, task, warning, constraints or "
              "facts into it; the wakeup is a file")


def cycle_summary(cycle: dict[str, Any] | None) -> dict[str, Any] | None:
    if not cycle:
        return None
    keys = ("started", "trigger", "flush", "outcome", "tokens_before", "wakeup_tokens", "ratio", "new_session", "recall")
    return {k: cycle.get(k) for k in keys}


def status_row(unit: UnitSupervisor, schedule: dict[str, str | None] | None, now: float | None = None) -> dict[str, Any]:
    """What ``agentd status`` shows of one unit (``now``: wall clock)."""
    now = time.time() if now is None else now
    driver = unit.driver
    return {
        "unit": unit.name,
        "description": unit.spec.unit.description,
        "state": unit.state.value,
        "pid": driver.pid if driver else None,
        "session": driver.session_id if driver else unit.last_session,
        "uptime": round(driver.uptime, 1) if driver else None,
        "restarts": unit.restarts,  # after an exit or a restart command; planned cycles are "cycles"
        "crashes": unit.crashes,  # sessions that ended on their own while running
        "cycles": unit.cycled,  # continuity cycles that started a fresh session
        "last_exit": unit.last_exit.describe() if unit.last_exit else None,
        "last_exit_planned": unit.exit_planned if unit.last_exit else None,  # agentd ended it (a cycle, a stop)
        "next_restart_in": round(unit.next_start_at - now, 1) if unit.next_start_at else None,
        "reason": unit.reason,
        "cpu_seconds": round(unit.stats[0], 2) if driver else None,
        "rss_bytes": unit.stats[1] if driver else None,  # the session's memory (memory_source says which figure)
        "memory_bytes": unit.stats[1] if driver else None,
        **(driver.confined.status() if driver else {"scope": None}),
        "transcript_bytes": driver.transcript_bytes if driver else None,
        "transcript_problem": driver.transcript_problem if driver else None,
        "enabled": unit.spec.unit.enabled,
        "module": unit.spec.module,
        "kind": unit.spec.agent.kind,
        "context": unit.context.as_dict() if unit.context and driver else None,
        "turn": driver.watcher.state.value if driver else None,
        "since_turn_end": (round(unit.clock() - driver.watcher.ended_at, 1)
                           if driver and driver.watcher.ended_at is not None else None),
        "activity": unit.activity,
        "activity_left": round(max(0.0, unit.activity_until - unit.clock()), 1) if unit.activity_until else None,
        "activity_bound": round(unit.activity_bound, 1) if unit.activity_bound is not None else None,
        "wakeup": unit.wakeup_state if driver else None,
        "queued_sends": len(unit.talk.sends),
        "last_checkpoint": cycle_summary(unit.last_cycle),
        "viewers": unit.talk.viewers,
        "violations": unit.violations,
        "schedule": schedule,
        "sandbox": _sandbox(unit),
        "typing": None if unit.spec.agent.types_own_text else TYPING_OFF,
        "frozen": unit.watch.frozen_now(driver.session_id) if driver else None,
        # a blocking screen, named at once: screen, todo, since, for (s), and the freeze it becomes after [freeze] after
        "blocked": unit.watch.blocked_now(driver.session_id) if driver else None,
        "checkpoint_limits": _checkpoint_limits(unit),
    }


def _checkpoint_limits(unit: UnitSupervisor) -> dict[str, Any] | None:
    """The loaded spec's checkpoint bounds (what "up to N s" says), None when checkpoints are off.

    The command line shows them while it waits on a stop, restart or reload,
    from this answer rather than by parsing unit files itself: the daemon's copy
    is the one it acts on, and the command starts without the settings.
    """
    cp = unit.spec.checkpoint
    if not cp.enabled:
        return None
    return {"deadline": cp.deadline, "grace": cp.grace, "on_stop": cp.on_stop, "stop_timeout": unit.stop_timeout}


def _sandbox(unit: UnitSupervisor) -> dict[str, Any] | None:
    """The agent's own sandbox as the unit sets it (bypassed is an explicit opt-in; a warning without the fence)."""
    try:
        return unit.adapter.sandbox().as_dict() if unit.adapter is not None else None
    except Exception as exc:  # noqa: BLE001 - status must always answer
        return {"mode": "unknown", "bypassed": False, "fenced": False, "writable": [], "warning": f"cannot tell: {exc}"}


def status(daemon: Daemon, units: list[UnitSupervisor], scheduler: Any) -> dict[str, Any]:
    """``agentd status``: the daemon, the units, the unit files that were refused."""
    for unit in units:
        if unit.driver is not None:
            unit.context = unit.driver.context()
    rows = [status_row(u, scheduler.next_times(u.name) if scheduler and (u.spec.schedule.start or u.spec.schedule.stop)
                       else None) for u in units]
    settings = daemon.settings
    return {
        "daemon": {"pid": os.getpid(), "version": __version__, "uptime": round(time.time() - daemon.started_wall, 1),
                   "project_root": str(settings.project_root), "units_dir": str(settings.units_path),
                   **(daemon.confinement.status() if daemon.confinement is not None else {}),
                   "stop_budget": dict(zip(("seconds", "source"), daemon.stop_seconds())),
                   "open_sessions": open_sessions()},
        "units": rows,
        "errors": [str(e) for e in daemon.load_errors],
    }


class StatsSampler:
    """CPU and memory of each session (its cgroup's figures, or its processes'), sampled at most once per
    ``interval`` seconds.  A status asked while the last sample is less than ``3 * interval`` old answers
    at once with it and the new sample is taken in the background (a run of ``agentd status`` never waits
    for psutil over every tree); an older one (or none) is waited for, and so is one that has no figures
    for a unit's current session (a unit started or restarted since: it would show 0 or the last session's)."""

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        self.interval, self.clock = interval, clock
        self._at = float("-inf")
        self._running: asyncio.Task[None] | None = None
        self._sampled: dict[str, str] = {}  # unit name -> the session its figures are of

    async def refresh(self, units: list[UnitSupervisor]) -> None:
        live = [u for u in units if u.driver is not None]
        if not live:
            return
        if self._running is not None and not self._running.done():
            if self._usable(live, self.clock()):
                return
            await asyncio.shield(self._running)
        now = self.clock()
        if self._covers(live) and now - self._at < self.interval:
            return
        self._running = asyncio.ensure_future(self._sample(live, now))
        if not self._usable(live, now):
            await asyncio.shield(self._running)

    def _covers(self, live: list[UnitSupervisor]) -> bool:
        """The last sample has figures of each live unit's current session."""
        return all(u.driver is not None and self._sampled.get(u.name) == u.driver.session_id for u in live)

    def _usable(self, live: list[UnitSupervisor], now: float) -> bool:
        """A status may answer with the last sample (and let the next one run in the background)."""
        return self._covers(live) and now - self._at < 3 * self.interval

    async def _sample(self, live: list[UnitSupervisor], now: float) -> None:
        def collect() -> None:
            try:
                for unit in live:
                    driver = unit.driver
                    if driver is not None:
                        unit.stats = driver.stats()
                        self._sampled[unit.name] = driver.session_id
                self._at = now
            except OSError:  # out of descriptors (/proc unreadable): status answers with the last figures
                pass

        await asyncio.to_thread(collect)
