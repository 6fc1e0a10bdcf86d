"""Where a unit's agent stopped: the record the daemon keeps at each checkpoint and crash, and its wakeup section.

A :class:`Stopped` holds what was true when a session ended: the agent's own
trail (:class:`~supervisor.trail.model.Trail`: the last ask, the plan, every
tool call), the scope's uncommitted files and the WIP commit that saved them.
The daemon writes it (:class:`~.keeper.UnitKeeper`), the next wakeup reads
it (:func:`section`).

Where it is kept: ``.agent/local/stopped/<unit>.json``, atomically.  Per host
(``local/`` is git-ignored and never synced), because everything in it is
about this clone: its work tree, the WIP commit in its object store, the
agent's own files under this host's home.  In the project, not in the
daemon's state directory, so it survives the daemon and ``agentd wakeup``
prints it without one.

The section is deterministic (the same file gives the same text, no clock)
and every text the agent wrote is quoted on one line, so nothing in it can
start a line of the briefing (no heading, no list item, no fence of its own).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..durable import write_json
from ..session.redact import redact_value
from ..memory.store import AgentPaths
from ..trail.model import Action, StepStatus, Trail
from .briefing import Section

STOPPED_DIR = "stopped"
ASK_CHARS = 600
PLAN_STEPS = 12
COMMANDS = 5
CHANGED = 20
READS = 10
SCREEN_LINES = 12
UNCOMMITTED = 20
_MARK = {StepStatus.COMPLETED: "[x]", StepStatus.IN_PROGRESS: "[>]", StepStatus.PENDING: "[ ]"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass
class Stopped:
    """One session's end, as kept for the next wakeup."""

    unit: str
    module: str
    session: str | None  # agentd's session id
    moment: str  # why it ended: checkpoint, crash, stop, restart, revert, scheduled stop
    time: str  # when (UTC, ISO 8601)
    trail: Trail | None = None
    ask: str | None = None  # the newest ask agentd did not type itself
    ask_from: str | None = None  # the earlier session it came from, when this one had none
    plan_from: str | None = None  # the same for the plan
    wip: dict[str, Any] | None = None  # Wip.as_dict()
    uncommitted: list[str] = field(default_factory=list)  # "M src/a.py", "R old -> new", ...
    stat: str = ""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "module": self.module, "session": self.session, "moment": self.moment,
                "time": self.time, "trail": self.trail.as_dict() if self.trail else None, "ask": self.ask,
                "ask_from": self.ask_from, "plan_from": self.plan_from, "wip": self.wip,
                "uncommitted": list(self.uncommitted), "stat": self.stat, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stopped:
        trail = data.get("trail")
        return cls(unit=str(data.get("unit", "?")), module=str(data.get("module", "?")), session=data.get("session"),
                   moment=str(data.get("moment", "?")), time=str(data.get("time", "")),
                   trail=Trail.from_dict(trail) if isinstance(trail, dict) else None, ask=data.get("ask"),
                   ask_from=data.get("ask_from"), plan_from=data.get("plan_from"),
                   wip=data.get("wip") if isinstance(data.get("wip"), dict) else None,
                   uncommitted=[str(u) for u in data.get("uncommitted") or []], stat=str(data.get("stat") or ""),
                   notes=[str(n) for n in data.get("notes") or []])

    def summary(self) -> dict[str, Any]:
        """What the cycle's history entry records of it (bounded like the section)."""
        trail = self.trail
        out: dict[str, Any] = {"moment": self.moment, "session": self.session, "ask": _clip(self.ask or "", ASK_CHARS) or None,
                               "wip": (self.wip or {}).get("commit"), "wip_ref": (self.wip or {}).get("ref"),
                               "uncommitted": self.uncommitted[:UNCOMMITTED], "notes": list(self.notes)}
        if trail is not None:
            out.update(source=trail.source,
                       plan=[f"{_MARK[s.status]} {s.text}" for s in trail.plan[:PLAN_STEPS]],
                       changed=trail.files_changed()[-CHANGED:], read=trail.files_read()[:READS],
                       commands=[{"command": a.command, "exit_code": a.exit_code} for a in trail.commands()[-COMMANDS:]],
                       actions=len(trail.actions))
        return out


def store_dir(root: Path) -> Path:
    return AgentPaths(Path(root)).local / STOPPED_DIR


def save(root: Path, stopped: Stopped) -> Path:
    path = store_dir(root) / f"{stopped.unit}.json"
    write_json(path, redact_value(stopped.as_dict()), mode=0o600)  # file names that hold a token, too
    return path


def load(root: Path, unit: str | None = None, module: str | None = None) -> Stopped | None:
    """The unit's record, or (no unit) the newest record of ``module``; None when there is none."""
    folder = store_dir(root)
    paths = [folder / f"{unit}.json"] if unit else sorted(folder.glob("*.json"))
    found: list[Stopped] = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            record = Stopped.from_dict(data)
            if unit or record.module == (module or "global"):
                found.append(record)
    found.sort(key=lambda s: (s.time, s.unit))
    return found[-1] if found else None


# The wakeup section ------------------------------------------------------------------

def quote(text: str, limit: int = 300) -> str:
    """Agent text as one quoted line: controls and line breaks folded, cut at ``limit`` characters."""
    return "“" + _clip(text, limit).replace("“", '"').replace("”", '"') + "”"


def quote_end(text: str, limit: int = 160) -> str:
    """:func:`quote`, but a long text keeps its end (how a command's output ends: its error), not its start."""
    flat = " ".join(_CONTROL.sub(" ", str(text)).split())
    kept = flat if len(flat) <= limit else "…" + flat[-(limit - 1):].lstrip()
    return "“" + kept.replace("“", '"').replace("”", '"') + "”"


def code(text: str, limit: int = 200) -> str:
    """A command as inline code on one line (a fence longer than any backtick run inside)."""
    body = _clip(text, limit)
    fence = "`" * (max((len(m) for m in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def _clip(text: str, limit: int) -> str:
    flat = " ".join(_CONTROL.sub(" ", str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def command_item(action: Action) -> str:
    """A command as "your last commands" shows it: the command as code, then how it ended (``→ exit 2``)."""
    status = "exit status unknown" if action.exit_code is None else f"exit {action.exit_code}"
    return f"{code(action.command or '')} → {status}"


def _paths(paths: list[str]) -> str:
    return ", ".join(code(p, 160) for p in paths)


def section(stopped: Stopped | None) -> Section:
    """The "Where you stopped" section (see the module docstring); items most important first."""
    sec = Section("stopped", "Where you stopped", [], empty_text="(no record of an earlier session)")
    if stopped is None:
        return sec
    ref = shlex.join(["cat", f".agent/local/{STOPPED_DIR}/{stopped.unit}.json"])
    sec.restore = ref
    trail = stopped.trail
    source = f"from {trail.source}" if trail else "no trail of the agent's own"
    sec.title = f"Where you stopped (unit {stopped.unit}, session {stopped.session or '?'}, {stopped.moment} at {stopped.time}; {source})"
    wip = stopped.wip or {}
    if wip.get("commit"):
        sec.add(f"- your uncommitted work was saved as WIP commit {wip['commit'][:12]} ({wip.get('ref')}): "
                f"`git show {wip['commit'][:12]}` shows it; saving left your files on disk as they were "
                f"(`agentd wip restore {stopped.unit} {wip.get('number')}` brings them back if they were lost)", ref)
    if stopped.ask:
        where = f" (asked in session {stopped.ask_from})" if stopped.ask_from else ""
        sec.add(f"- the last thing you were asked{where}: {quote(stopped.ask, ASK_CHARS)}", ref)
    if trail is not None and trail.goal:
        sec.add(f"- your goal ({trail.goal_status or 'active'}): {quote(trail.goal, 300)}", ref)
    if trail is not None and trail.plan:
        done = sum(1 for s in trail.plan if s.status is StepStatus.COMPLETED)
        where = f", written in session {stopped.plan_from}" if stopped.plan_from else ""
        sec.add(f"- your plan ({done} of {len(trail.plan)} steps done{where}; [x] done, [>] in progress, [ ] to do):", ref)
        for step in trail.plan[:PLAN_STEPS]:
            sec.add(f"  - {_MARK[step.status]} {quote(step.text, 200)}", ref)
    changed = trail.files_changed()[-CHANGED:] if trail is not None else []
    if changed:
        sec.add(f"- files you changed (in flight, last changed last): {_paths(changed)}", ref)
    commands = trail.commands()[-COMMANDS:] if trail is not None else []
    if commands:
        sec.add("- your last commands and how they ended (oldest first):", ref)
        for action in commands:
            tail = f" — output ends: {quote_end(action.output, 160)}" if action.output and action.exit_code not in (0, None) else ""
            sec.add(f"  - {command_item(action)}{tail}", ref)
    if stopped.uncommitted:
        more = len(stopped.uncommitted) - UNCOMMITTED
        shown = ", ".join(code(u, 160) for u in stopped.uncommitted[:UNCOMMITTED]) + (f" (+{more} more)" if more > 0 else "")
        sec.add(f"- uncommitted in your scope{f' ({stopped.stat})' if stopped.stat else ''}: {shown}", ref)
    elif wip.get("commit") is None and trail is not None:
        sec.add("- nothing was uncommitted in your scope", ref)
    reads = trail.files_read()[:READS] if trail is not None else []
    if reads:
        sec.add(f"- files you had read: {_paths(reads)}", ref)
    for note in stopped.notes:
        sec.add(f"- note: {_clip(note, 200)}", ref)
    if trail is not None and trail.screen:
        sec.add("- the last lines it printed (quoted):", ref)
        for line in trail.screen[-SCREEN_LINES:]:
            sec.add(f"  | {quote(line, 200)}", ref)
    return sec

