"""What the dashboard shows of a unit: its card, its display state and its alarms (pure).

A *card* is a plain JSON-ready dict built from the unit's status row
(:func:`supervisor.daemon.commands.status_row`) and a few facts the row does
not carry (:class:`UnitFacts`: the context limits, the stall and checkpoint
limits, how long the agent has been silent).  Every card names its ``host``,
and its ``id`` is ``host/unit``: the fleet view (issue 20) lists the cards of
several daemons on one page, and nothing in a card depends on which daemon
serves the page.

Nothing here reads a clock or a file: ``now`` (wall-clock seconds) is passed in.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

#: An agent that compacted on its own and has sat at its prompt this long is an alarm.
IDLE_AFTER_COMPACTION = 120.0
#: Silence in a turn that is an alarm when the unit sets no ``[schedule] stall_after``.
DEFAULT_STALL = 900.0


class Display(str, enum.Enum):
    """The state as a person reads it: one glyph and one colour each (the page's legend)."""

    IN_TURN = "in-turn"
    IDLE = "idle"
    RUNNING = "running"
    STARTING = "starting"
    CHECKPOINTING = "checkpointing"
    WAITING = "waiting"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    BLOCKED = "blocked"  # a blocking screen (login, trust, update, an approval nobody answers): a person must act
    FROZEN = "frozen"  # the agent's process is stopped: it looks busy and does nothing
    FAILED = "failed"
    ERROR = "error"  # agentd's own handler for the unit raised
    STOPPED = "stopped"


#: glyph, label, tone (a CSS class) per display state.
LOOK: dict[Display, tuple[str, str, str]] = {
    Display.IN_TURN: ("▶", "in a turn", "busy"),
    Display.IDLE: ("●", "idle at its prompt", "ok"),
    Display.RUNNING: ("◍", "running", "ok"),
    Display.STARTING: ("◔", "starting", "info"),
    Display.CHECKPOINTING: ("⟳", "checkpointing", "cycle"),
    Display.WAITING: ("◷", "waiting", "wait"),
    Display.BACKOFF: ("↻", "backoff", "warn"),
    Display.STOPPING: ("◕", "stopping", "info"),
    Display.BLOCKED: ("⊘", "blocked", "warn"),
    Display.FROZEN: ("‖", "frozen", "bad"),
    Display.FAILED: ("✖", "failed", "bad"),
    Display.ERROR: ("✖", "error", "bad"),
    Display.STOPPED: ("■", "stopped", "off"),
}


class Alarm(str, enum.Enum):
    FAILED = "failed"
    ERROR = "error"
    BLOCKED = "blocked"  # a blocking screen, named by status (the session watch's blocked_screen, approval_wait)
    FROZEN = "frozen at the limit"
    FROZEN_SESSION = "frozen"  # the watch named a freeze (a blocking screen, an approval wait, ...)
    IDLE_AFTER_COMPACTION = "idle after compaction"
    STALLED = "stalled"
    DEADLINE = "checkpoint deadline passed"


#: The session watch's freezes (``status``'s ``frozen``) that a card's own alarm already names.
SAME_AS = {"idle_after_compaction": Alarm.IDLE_AFTER_COMPACTION.value, "stuck_above_hard_limit": Alarm.FROZEN.value,
           "checkpoint_overdue": Alarm.DEADLINE.value}


#: The session watch's freezes that are a screen waiting for a person.
BLOCKED_FREEZES = ("blocked_screen", "approval_wait")
#: Freezes that mean the session does nothing, whatever its turn says.
STILL_FREEZES = ("stopped_process",)
_SCREEN = re.compile(r"blocked: ([A-Za-z_-]+)")


def freeze_of(row: dict[str, Any]) -> str | None:
    """The freeze ``status`` names for the unit (``blocked_screen``, ``cycle_storm``, ...), or None."""
    frozen = row.get("frozen")
    state = frozen.get("state") if isinstance(frozen, dict) else None
    return state if isinstance(state, str) and state else None


def blocked_screen(row: dict[str, Any]) -> str | None:
    """The blocking screen a unit shows as ``status`` names it (``login``, ``trust``, ``approval``, ...), or None.

    Read from the row's ``frozen`` (a ``blocked_screen`` or ``approval_wait`` freeze, whose detail begins
    ``blocked: KIND``), or from a ``blocked`` field (a name, or ``{"kind"}``) when the row carries one.
    """
    named = row.get("blocked")
    if isinstance(named, dict):
        named = named.get("kind") or named.get("screen")
    if isinstance(named, str) and (match := re.match(r"[A-Za-z_-]+", named.removeprefix("blocked: "))):
        return match.group(0)
    freeze = freeze_of(row)
    if freeze not in BLOCKED_FREEZES:
        return None
    match = _SCREEN.match(str((row.get("frozen") or {}).get("detail") or ""))
    return match.group(1) if match else "approval" if freeze == "approval_wait" else "screen"


@dataclass(frozen=True)
class UnitFacts:
    """What a card needs beyond the status row (read from the unit by the server)."""

    checkpoint_at: float
    hard_limit: float
    stall_after: float | None
    checkpoint_deadline: float  # [checkpoint] deadline + grace
    silent_for: float | None  # seconds since the session's last output
    checkpoint_started: str | None  # ISO time the running checkpoint began
    last_cycle: dict[str, Any] | None  # the unit's last cycle record, whole


def display(row: dict[str, Any]) -> Display:
    """The display state of a status row."""
    state = row.get("state")
    if state in ("running", "starting") and blocked_screen(row):
        return Display.BLOCKED
    if state == "running" and freeze_of(row) in STILL_FREEZES:
        return Display.FROZEN
    if state == "running":
        return {"busy": Display.IN_TURN, "idle": Display.IDLE}.get(row.get("turn") or "", Display.RUNNING)
    if state in ("checkpointing", "respawning"):
        return Display.CHECKPOINTING
    if state == "inactive":
        sched = row.get("schedule") or {}
        reason = row.get("reason") or ""
        return Display.WAITING if sched.get("start") or reason.startswith("not started: requires") else Display.STOPPED
    return {"starting": Display.STARTING, "waiting": Display.WAITING, "backoff": Display.BACKOFF,
            "stopping": Display.STOPPING, "failed": Display.FAILED, "error": Display.ERROR}.get(state or "", Display.STOPPED)


def waiting_for(row: dict[str, Any], shown: Display) -> str | None:
    """What a waiting unit waits for: a usage limit, a requirement, a schedule."""
    if shown is not Display.WAITING:
        return None
    reason = row.get("reason") or ""
    if row.get("state") == "waiting":
        return "usage limit" + (f": {reason}" if reason else "")
    if reason.startswith("not started: requires"):
        return "requirement: " + reason.removeprefix("not started: ")
    nxt = (row.get("schedule") or {}).get("start")
    return f"schedule: next start {nxt}" if nxt else "schedule"


def alarms(row: dict[str, Any], facts: UnitFacts, now: float) -> list[dict[str, str]]:
    """The unit's alarms, most serious first: each ``{"kind", "text"}``."""
    found: list[dict[str, str]] = []
    state, turn = row.get("state"), row.get("turn")
    ctx = row.get("context") or {}
    if state in ("failed", "error"):
        found.append({"kind": Alarm.FAILED.value if state == "failed" else Alarm.ERROR.value,
                      "text": f"{state}: {row.get('reason') or 'no reason recorded'} (reset-failed starts it again)"})
    ratio = ctx.get("ratio")
    if state == "running" and ratio is not None and ratio >= facts.hard_limit:
        found.append({"kind": Alarm.FROZEN.value,
                      "text": f"context {ratio:.0%} is at or above the hard limit {facts.hard_limit:.0%} "
                              "and no checkpoint runs"})
    started = iso_epoch(facts.checkpoint_started)
    if state == "checkpointing" and started is not None and now - started > facts.checkpoint_deadline:
        found.append({"kind": Alarm.DEADLINE.value,
                      "text": f"checkpoint running for {now - started:.0f} s, past its deadline "
                              f"({facts.checkpoint_deadline:.0f} s)"})
    silent = facts.silent_for
    stall = facts.stall_after or DEFAULT_STALL
    if state == "running" and turn == "busy" and silent is not None and silent >= stall:
        found.append({"kind": Alarm.STALLED.value, "text": f"no output for {silent:.0f} s in a turn (stall after {stall:.0f} s)"})
    last = facts.last_cycle or {}
    since = row.get("since_turn_end")
    if (state == "running" and turn == "idle" and last.get("trigger") == "agent compacted"
            and since is not None and since >= IDLE_AFTER_COMPACTION):
        found.append({"kind": Alarm.IDLE_AFTER_COMPACTION.value,
                      "text": f"idle at its prompt for {since:.0f} s since it compacted its own context"})
    frozen = row.get("frozen") if isinstance(row.get("frozen"), dict) else {}
    kinds = {a["kind"] for a in found}
    at = sum(1 for a in found if a["kind"] in (Alarm.FAILED.value, Alarm.ERROR.value, Alarm.FROZEN.value))
    screen = blocked_screen(row) if state in ("running", "starting") else None
    if screen is not None:
        detail = frozen.get("detail") if freeze_of(row) in BLOCKED_FREEZES else None
        found.insert(at, {"kind": Alarm.BLOCKED.value, "text": str(detail or f"blocked: {screen}")})
    elif frozen and SAME_AS.get(frozen.get("state") or "", "") not in kinds:  # said once, by the card's own alarm
        found.insert(at, {"kind": Alarm.FROZEN_SESSION.value,
                          "text": f"frozen ({frozen.get('state')}): {frozen.get('detail')} (action: {frozen.get('action')})"})
    return found


#: A last cycle whose recall (the share of the checked items the wakeup kept) is below this is a warning.
RECALL_WARN = 0.8


def warnings(row: dict[str, Any], last_cycle: dict[str, Any] | None) -> list[str]:
    """What is worth a look but is no alarm: a usage limit, limits not applied, a low recall, ..."""
    found: list[str] = []
    if row.get("state") == "waiting":
        found.append("usage limit" + (f": {row['reason']}" if row.get("reason") else ""))
    limits = row.get("limits") or {}
    if limits.get("unavailable"):
        found.append("resource limits not applied: " + ", ".join(map(str, limits["unavailable"])))
    for text in ((row.get("context") or {}).get("window_warning"), (row.get("sandbox") or {}).get("warning"),
                 row.get("transcript_problem")):
        if text:
            found.append(str(text))
    recall = recall_of(last_cycle)
    if recall is not None and recall["recall"] < RECALL_WARN:
        found.append(f"last cycle's recall {recall['recall']:.0%} (below {RECALL_WARN:.0%})"
                     + (f", missing: {', '.join(recall['missing'])}" if recall["missing"] else ""))
    return found


def recall_of(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A cycle record's probe recall (``{"recall", "found", "probes", "missing"}``, as ``agentd history`` reads it), or None."""
    recall = (record or {}).get("recall")
    if isinstance(recall, (int, float)) and not isinstance(recall, bool):
        recall = {"recall": recall}  # a bare figure: what it found and missed is not known
    if not isinstance(recall, dict):
        return None
    value = recall.get("recall")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    missing = recall.get("missing")
    return {"recall": float(value), "found": recall.get("found"), "probes": recall.get("probes"),
            "missing": [str(m) for m in missing] if isinstance(missing, list) else []}


def _cycle(last: dict[str, Any] | None) -> dict[str, Any] | None:
    if not last:
        return None
    keys = ("started", "trigger", "flush", "outcome", "tokens_before", "wakeup_tokens", "ratio", "wip")
    return {**{k: last.get(k) for k in keys if k in last}, "recall": recall_of(last)}


def iso_epoch(text: str | None) -> float | None:
    """Seconds since the epoch of an ISO time (``...Z`` or naive UTC), or None."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def card(row: dict[str, Any], facts: UnitFacts, host: str, now: float) -> dict[str, Any]:
    """One unit as the overview shows it (JSON-ready; ``now``: wall clock)."""
    shown = display(row)
    glyph, label, tone = LOOK[shown]
    screen = blocked_screen(row)
    if shown is Display.BLOCKED and screen:
        label = f"blocked: {screen}"
    ctx = row.get("context")
    context = None
    if ctx:
        context = {**ctx, "checkpoint_at": facts.checkpoint_at, "hard_limit": facts.hard_limit}
    since = row.get("since_turn_end")
    restart_in = row.get("next_restart_in")
    return {
        "id": f"{host}/{row['unit']}",
        "host": host,
        "unit": row["unit"],
        "description": row.get("description") or "",
        "module": row.get("module"),
        "kind": row.get("kind"),
        "enabled": row.get("enabled"),
        "state": row.get("state"),
        "display": {"key": shown.value, "glyph": glyph, "label": label, "tone": tone},
        "waiting_for": waiting_for(row, shown),
        "turn": row.get("turn"),
        "reason": row.get("reason"),
        "activity": row.get("activity"),
        "pid": row.get("pid"),
        "session": row.get("session"),
        "uptime": row.get("uptime"),
        "restarts": row.get("restarts", 0),
        "crashes": row.get("crashes", 0),  # sessions that ended on their own: what a crash loop shows as
        "cycles": row.get("cycles", 0),  # planned fresh sessions (continuity cycles), never crashes
        "last_exit": row.get("last_exit"),
        "cpu_seconds": row.get("cpu_seconds"),
        "rss_bytes": row.get("rss_bytes"),
        "context": context,
        "last_turn_end": round(now - since, 1) if since is not None else None,
        "last_cycle": _cycle(facts.last_cycle),
        "violations": row.get("violations", 0),
        "queued_sends": row.get("queued_sends", 0),
        "viewers": row.get("viewers", 0),
        "schedule": row.get("schedule"),
        "checkpoint_limits": row.get("checkpoint_limits"),
        "next_restart_at": round(now + restart_in, 1) if restart_in is not None else None,
        "frozen": row.get("frozen"),
        "blocked": screen if shown is Display.BLOCKED else None,
        "alarms": alarms(row, facts, now),
        "warnings": warnings(row, facts.last_cycle),
    }


def legend() -> list[dict[str, str]]:
    """Every display state's glyph, label and tone, in the order the page's legend shows them."""
    return [{"key": d.value, "glyph": g, "label": lbl, "tone": t} for d, (g, lbl, t) in LOOK.items()]
