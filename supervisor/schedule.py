"""Unattended runs: cron starts and stops with apscheduler, missed runs, usage limits.

* :func:`parse_cron` accepts standard 5-field cron (minute hour day month
  weekday) and 6 fields with seconds first (for short intervals and tests).
  Weekdays follow APScheduler: names (``mon``-``sun``) are unambiguous; numbers
  count from Monday = 0.
* :class:`UnitScheduler` adds one apscheduler job per ``[schedule] start`` /
  ``stop`` on the daemon's event loop (``AsyncIOScheduler``), with
  ``coalesce=True`` and ``misfire_grace_time = grace``: a run that is late by
  less than the grace time fires once, never twice.  Runs missed while the
  daemon was down are caught up at start the same way (the last fire time of
  each job is kept in ``<state>/schedule.json``).
* :func:`usage_limit` recognises an agent saying that the provider's usage or
  rate limit was hit, and when it resets, so the unit can wait instead of
  crash-looping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from .durable import write_json

Action = Callable[[str, str, bool], Awaitable[None]]  # (unit, "start" | "stop", missed)


def parse_cron(expr: str, tz: str) -> CronTrigger:
    """A trigger for ``expr``; ValueError with the reason when it is not valid."""
    fields = expr.split()
    try:
        if len(fields) == 5:
            return CronTrigger.from_crontab(expr, timezone=ZoneInfo(tz))
        if len(fields) == 6:
            second, minute, hour, day, month, dow = fields
            return CronTrigger(second=second, minute=minute, hour=hour, day=day, month=month,
                               day_of_week=dow, timezone=ZoneInfo(tz))
    except (ValueError, KeyError) as exc:
        raise ValueError(f"cron expression {expr!r} is not valid: {exc}") from None
    raise ValueError(
        f"cron expression {expr!r} needs 5 fields (minute hour day month weekday) or 6 (seconds first)"
    )


def last_fire_between(trigger: CronTrigger, start: datetime, end: datetime) -> datetime | None:
    """The latest fire time of ``trigger`` in ``[start, end]``, or None."""
    last = None
    t = trigger.get_next_fire_time(None, start)
    for _ in range(100_000):
        if t is None or t > end:
            break
        last = t
        t = trigger.get_next_fire_time(t, t + timedelta(seconds=1))
    return last


class UnitScheduler:
    """Cron jobs of every unit, on the daemon's loop."""

    def __init__(self, state_dir: Path, action: Action) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self._path = state_dir / "schedule.json"
        self._action = action
        self._scheduler = AsyncIOScheduler(timezone=timezone.utc)
        self._jobs: dict[tuple[str, str], Any] = {}
        self._last = self._load()

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self._path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save(self) -> None:
        write_json(self._path, self._last, mode=0o600, indent=None)

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)

    def set_unit(self, name: str, schedule: Any) -> list[tuple[str, bool]]:
        """(Re)place the unit's jobs; return the catch-up runs due now as (action, missed)."""
        self.remove_unit(name)
        due: list[tuple[str, bool]] = []
        now = datetime.now(timezone.utc)
        for action in ("start", "stop"):
            expr = getattr(schedule, action)
            if not expr:
                continue
            trigger = parse_cron(expr, schedule.timezone)
            grace = int(schedule.grace) or 1
            job = self._scheduler.add_job(
                self._fire, trigger, args=(name, action), id=f"{name}:{action}",
                misfire_grace_time=grace, coalesce=True, max_instances=1, replace_existing=True,
            )
            self._jobs[(name, action)] = job
            last_run = self._last.get(name, {}).get(action)
            missed = last_fire_between(trigger, now - timedelta(seconds=schedule.grace), now)
            if missed is not None and (last_run is None or datetime.fromisoformat(last_run) < missed):
                self._remember(name, action, missed)
                due.append((action, True))
        return due

    def remove_unit(self, name: str) -> None:
        for action in ("start", "stop"):
            job = self._jobs.pop((name, action), None)
            if job is not None:
                try:
                    job.remove()
                except Exception:  # noqa: BLE001 - already gone
                    pass

    def _remember(self, name: str, action: str, when: datetime) -> None:
        self._last.setdefault(name, {})[action] = when.isoformat()
        self._save()

    async def _fire(self, name: str, action: str) -> None:
        self._remember(name, action, datetime.now(timezone.utc).replace(microsecond=0))
        await self._action(name, action, False)

    def next_times(self, name: str) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for action in ("start", "stop"):
            job = self._jobs.get((name, action))
            when = getattr(job, "next_run_time", None) if job is not None else None
            out[action] = when.isoformat() if when else None
        return out


# Usage limits -----------------------------------------------------------------------

# Error messages, not talk about limits: "rate limit" alone (an agent writing a
# rate limiter) does not count; "rate limit reached/exceeded/hit" does.
_LIMIT_RE = re.compile(
    r"(?:usage|rate)[ -]limits?\b.{0,40}?\b(?:reached|exceeded|hit)\b"
    r"|\b(?:hit|reached|exceeded) (?:the |your )?(?:\w+ )?(?:usage|rate)[ -]limit"
    r"|you(?:'ve| have) (?:hit|reached) your (?:\w+ )?limit"
    r"|quota (?:exceeded|exhausted)|out of credits|too many requests|(?:http|status|error)[ :]*429\b"
    r"|request rejected \(429\)",  # Claude Code 2.1.328: "API Error: Request rejected (429) · ... rate limit"
    re.IGNORECASE,
)
#: One of these (lower case) is in every match of _LIMIT_RE in ASCII text.
_LIMIT_WORDS = ("limit", "quota", "credits", "too many requests", "429")
_RESET_IN_RE = re.compile(r"(?:try again|resets?|retry|available again)\s+in\s+(\d+)\s*(second|sec|s|minute|min|m|hour|hr|h)\w*",
                          re.IGNORECASE)
_RESET_AT_RE = re.compile(r"(?:try again|resets?|retry|available again)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?",
                          re.IGNORECASE)
_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?")


@dataclass(frozen=True)
class UsageLimit:
    line: str
    reset_at: datetime | None  # when the agent said; None when it did not


def usage_limit(text: str, now: datetime | None = None) -> UsageLimit | None:
    """The last line of ``text`` that says a usage/rate limit was hit, with its reset time."""
    if text.isascii():  # every shape of _LIMIT_RE holds one of these words: most text holds none (one pass each)
        low = text.lower()
        if not any(word in low for word in _LIMIT_WORDS):
            return None
    if _LIMIT_RE.search(text) is None:  # one pass over the text (a line's match is also the text's)
        return None
    now = now or datetime.now(timezone.utc)
    found, after = None, ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _LIMIT_RE.search(line):
            found, after = line.strip(), (lines[i + 1].strip() if i + 1 < len(lines) else "")
    if found is None:
        return None
    # a TUI wraps the message: Codex 0.169.0's "try again at 1:42 PM." is on the line after the limit's
    return UsageLimit(found[:300], _reset_time(found, now) or _reset_time(after, now))


def _reset_time(line: str, now: datetime) -> datetime | None:
    iso = _ISO_RE.search(line)
    if iso:
        try:
            when = datetime.fromisoformat(iso.group(0).replace("Z", "+00:00").replace(" ", "T"))
            return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    rel = _RESET_IN_RE.search(line)
    if rel:
        amount = int(rel.group(1))
        unit = rel.group(2).lower()[0]
        seconds = amount * {"s": 1, "m": 60, "h": 3600}[unit]
        return now + timedelta(seconds=seconds)
    at = _RESET_AT_RE.search(line)
    if at and (at.group(2) or at.group(3)):
        hour = int(at.group(1)) % 24
        minute = int(at.group(2) or 0)
        if at.group(3):
            hour = hour % 12 + (12 if at.group(3).lower() == "pm" else 0)
        when = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        return when if when > now else when + timedelta(days=1)
    return None


#: Seconds between scans of a streaming agent's new output for usage-limit messages.
USAGE_SCAN_EVERY = 3.0


class UsageScanner:
    """Looks for a usage-limit message in what an agent printed since the last look (at most every few seconds)."""

    def __init__(self, every: float = USAGE_SCAN_EVERY) -> None:
        self.every = every
        self._scanned = 0  # transcript bytes already looked at
        self._at = float("-inf")

    def scan(self, written: int, tail: Callable[[int], str], now: float) -> UsageLimit | None:
        """``written``: transcript bytes so far; ``tail(n)``: its last n bytes as text."""
        if written == self._scanned or now - self._at < self.every:
            return None
        new = min(written - self._scanned, 3000)
        self._scanned, self._at = written, now
        return usage_limit(tail(max(new, 200)))
