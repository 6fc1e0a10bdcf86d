"""The report over the history: one row per resumed session, oldest first, medians per unit and for the project.

Pure: :func:`rows` takes the cycle records (``<state>/history/UNIT.jsonl``, as
read) and joins the two things a unit's history holds about one session:

* ``stopped.resumed``: how the session came back, recorded when it ended (the
  keeper's figures, :mod:`.figures`);
* ``recall``: its probe recall, recorded by the cycle that started it (:mod:`.probes`).

:func:`summary` gives, per unit and for the whole project, the count of
sessions, the headline (the share of resumes that fragmented: re-read a file,
repeated a command, made an edit twice or broke a constraint) and the median
of each figure (None where no session has it).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

FIGURES = ("actions_to_edit", "rereads", "repeated", "twice", "breaks", "seconds_to_edit", "tokens_to_edit", "recall")
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class Row:
    unit: str
    session: str | None
    previous: str | None = None
    started: str | None = None  # when the cycle that started it began
    trigger: str | None = None  # what started it (the cycle's trigger)
    actions: int | None = None
    actions_to_edit: int | None = None
    cold_actions_to_edit: int | None = None
    rereads: int | None = None
    reread_files: list[str] = field(default_factory=list)
    repeated: int | None = None
    repeated_commands: list[str] = field(default_factory=list)
    twice: int | None = None  # edits made again, the same change as the session before made
    twice_files: list[str] = field(default_factory=list)
    breaks: int | None = None
    break_list: list[str] = field(default_factory=list)
    seconds_to_edit: float | None = None
    tokens_to_edit: int | None = None
    recall: float | None = None
    missing: list[str] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)

    @property
    def fragmented(self) -> bool | None:
        """It re-read, repeated a command, made an edit twice or broke a constraint; None without figures."""
        counts = (self.rereads, self.repeated, self.twice, self.breaks)
        if all(c is None for c in counts):
            return None
        return any(c for c in counts)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fragmented": self.fragmented}


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: an age (``30m``, ``2h``, ``7d``, ``1w``) or an ISO date/time (UTC when no zone)."""
    value = text.strip()
    found = _AGO.match(value)
    if found:
        return now - timedelta(seconds=float(found.group(1)) * _UNIT_SECONDS[found.group(2)])
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: give an age like 30m, 2h, 7d or a date like 2026-12-01 "
                         "or 2026-12-01T09:00") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _when(record: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(str(record.get("started")), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def rows(unit: str, records: Iterable[Mapping[str, Any]], since: datetime | None = None,
         sessions: Iterable[Mapping[str, Any]] = ()) -> list[Row]:
    """One row per session the history says something about (see the module docstring), oldest first (by when
    the session started; one whose start is not known, by when it ended).

    ``sessions`` (``UNIT.sessions.jsonl``) adds the recall of sessions started outside a cycle (a crash
    restart, a schedule) when their start recorded one."""
    by_session: dict[str, Row] = {}
    order: list[Row] = []

    def row(session: str | None) -> Row:
        key = str(session)
        if key not in by_session:
            by_session[key] = Row(unit, session)
            order.append(by_session[key])
        return by_session[key]

    records = list(records)
    ended: dict[int, str] = {}  # row -> when the cycle that ended its session began (no start known)
    starts = {str(rec["new_session"]): _when(rec) for rec in records if rec.get("new_session")}

    def recent(when: datetime | None) -> bool:
        return since is None or (when is not None and when >= since)

    for start in sessions:
        if isinstance(start.get("recall"), Mapping) and start.get("previous") and start.get("session"):
            started = _when(start)
            starts.setdefault(str(start["session"]), started)
            if recent(started):
                r = row(start["session"])
                r.recall, r.missing = start["recall"].get("recall"), list(start["recall"].get("missing") or [])
                r.previous, r.started, r.trigger = start.get("previous"), start.get("started"), start.get("why")
    for rec in records:
        if isinstance(rec.get("recall"), Mapping) and rec.get("new_session") and recent(_when(rec)):
            r = row(rec["new_session"])
            r.recall, r.missing = rec["recall"].get("recall"), list(rec["recall"].get("missing") or [])
            r.previous, r.started, r.trigger = rec.get("old_session"), rec.get("started"), rec.get("trigger")
        resumed = (rec.get("stopped") or {}).get("resumed") if isinstance(rec.get("stopped"), Mapping) else None
        session = str(resumed.get("session")) if isinstance(resumed, Mapping) else ""
        if isinstance(resumed, Mapping) and resumed.get("previous") and recent(starts.get(session, _when(rec))):
            r = row(resumed.get("session"))
            r.previous = r.previous or resumed.get("previous")
            r.actions, r.actions_to_edit = resumed.get("actions"), resumed.get("actions_to_edit")
            r.cold_actions_to_edit = resumed.get("cold_actions_to_edit")
            r.reread_files, r.repeated_commands = list(resumed.get("rereads") or []), list(resumed.get("repeated") or [])
            r.break_list, r.twice_files = list(resumed.get("breaks") or []), list(resumed.get("twice") or [])
            r.rereads, r.repeated = len(r.reread_files), len(r.repeated_commands)
            seen = resumed.get("edits_seen", True)
            r.breaks = len(r.break_list) if seen else None
            r.twice = len(r.twice_files) if seen else None
            if r.started is None and starts.get(session) is not None:
                r.started = starts[session].strftime("%Y-%m-%dT%H:%M:%SZ")
            ended.setdefault(id(r), str(rec.get("started") or ""))
            r.seconds_to_edit, r.tokens_to_edit = resumed.get("seconds_to_edit"), resumed.get("tokens_to_edit")
            r.cannot = list(resumed.get("cannot") or [])
    # by start; a session whose start is not known, by the moment it ended (before the one that cycle started);
    # stable: history order within a second
    return sorted(order, key=lambda r: (r.started or ended.get(id(r)) or "~", r.started is not None))


def _median(values: Sequence[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(float(statistics.median(known)), 4) if known else None


def summary(all_rows: Sequence[Row]) -> dict[str, Any]:
    """Per unit and for the project: sessions, flagged sessions (recall < 1), the headline (of the resumes
    with figures, how many fragmented, and their share) and the median of each figure."""
    def figures(group: Sequence[Row]) -> dict[str, Any]:
        judged = [r.fragmented for r in group if r.fragmented is not None]
        out: dict[str, Any] = {"sessions": len(group),
                               "recall_below_1": sum(1 for r in group if r.recall is not None and r.recall < 1.0),
                               "resumes_with_figures": len(judged), "fragmented": sum(judged),
                               "fragmented_share": round(sum(judged) / len(judged), 4) if judged else None}
        for name in FIGURES:
            out[f"median_{name}"] = _median([getattr(r, name) for r in group])
        out["median_cold_actions_to_edit"] = _median([r.cold_actions_to_edit for r in group])
        return out

    units: dict[str, list[Row]] = {}
    for r in all_rows:
        units.setdefault(r.unit, []).append(r)
    return {"units": {name: figures(group) for name, group in units.items()}, "project": figures(list(all_rows))}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def headline(figs: Mapping[str, Any]) -> str:
    """``fragmented 1 of 3 resumes (33.3%)``: the share of resumes that re-read, repeated, redid or broke."""
    if not figs.get("resumes_with_figures"):
        return "fragmented: - (no resume with figures)"
    return (f"fragmented {figs['fragmented']} of {figs['resumes_with_figures']} resumes "
            f"({figs['fragmented_share'] * 100:.1f}%)")


def render(all_rows: Sequence[Row]) -> str:
    """The table ``agentd report`` prints: the sessions oldest first, one median line per unit and for the
    project; under it, per unit and for the project, the headline (:func:`headline`)."""
    from tabulate import tabulate

    table = []
    for r in all_rows:
        flag = "" if r.recall is None or r.recall >= 1.0 else f" ! missing: {', '.join(r.missing)}"
        table.append([r.unit, r.session or "-", r.previous or "-", (r.started or "-").replace("T", " ").rstrip("Z"),
                      f"{_cell(r.actions_to_edit)} (cold {_cell(r.cold_actions_to_edit)})",
                      _cell(r.rereads), _cell(r.repeated), _cell(r.twice), _cell(r.breaks), _cell(r.seconds_to_edit),
                      _cell(r.tokens_to_edit), _cell(r.recall) + flag])
    sums = summary(all_rows)
    for name, figs in [*sums["units"].items(), ("PROJECT", sums["project"])]:
        table.append([f"{name} (median of {figs['sessions']})", "", "", "",
                      f"{_cell(figs['median_actions_to_edit'])} (cold {_cell(figs['median_cold_actions_to_edit'])})",
                      _cell(figs["median_rereads"]), _cell(figs["median_repeated"]), _cell(figs["median_twice"]),
                      _cell(figs["median_breaks"]), _cell(figs["median_seconds_to_edit"]),
                      _cell(figs["median_tokens_to_edit"]),
                      _cell(figs["median_recall"]) + (f" ({figs['recall_below_1']} below 1)" if figs["recall_below_1"] else "")])
    text = tabulate(table, headers=["UNIT", "SESSION", "AFTER", "STARTED", "ACTIONS TO EDIT", "RE-READS", "REPEATED",
                                    "EDITS TWICE", "BREAKS", "SECONDS TO EDIT", "TOKENS TO EDIT", "RECALL"])
    lines = [f"{name}: {headline(figs)}" for name, figs in [*sums["units"].items(), ("PROJECT", sums["project"])]]
    return text + "\n\n" + "\n".join(lines)
