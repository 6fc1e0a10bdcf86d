"""What the unit page and the timeline read from files (blocking: the server calls these in a thread).

* cycles: ``<state>/history/UNIT.jsonl`` (:mod:`supervisor.continuity.records`);
* the wakeup: :func:`supervisor.continuity.wakeup.unit_wakeup`, exactly what
  ``agentd wakeup UNIT`` prints and the next session gets;
* decisions and facts: the memory store (:mod:`supervisor.memory`);
* violations: ``<state>/violations.jsonl``.

Every item on the timeline carries ``t``, seconds since the epoch, so items of
different files merge by time (decision lines have minutes, in local time).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from ..continuity.records import read_history
from ..durable import read_jsonl
from .model import iso_epoch

#: At most this many items of each kind on a page (the newest).
LIMIT = 500


def decision_epoch(text: str) -> float | None:
    """A decision line's ``YYYY-MM-DD HH:MM`` (local time) as seconds since the epoch."""
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M").timestamp()
    except ValueError:
        return None


def cycles(state_dir: Path, unit: str, limit: int = LIMIT) -> list[dict[str, Any]]:
    records = list(read_history(state_dir, unit))[-limit:]
    for rec in records:
        rec["t"] = iso_epoch(rec.get("started"))
    return records


def violations(state_dir: Path, unit: str | None = None, limit: int = LIMIT) -> list[dict[str, Any]]:
    rows = [r for r in read_jsonl(state_dir / "violations.jsonl") if unit is None or r.get("unit") == unit]
    for row in rows:
        row["t"] = iso_epoch(row.get("time"))
    return rows[-limit:]


def decisions(root: Path, modules: list[str | None] | None = None, limit: int = LIMIT) -> list[dict[str, Any]]:
    """Decisions of ``modules`` (None: every module and the global log), oldest first."""
    from ..memory import AgentPaths
    from ..memory.decisions import Entry, iter_all, log_modules

    paths = AgentPaths(root)
    if not paths.dir.is_dir():
        return []
    wanted = modules if modules is not None else list(dict.fromkeys([None, *log_modules(paths)]))
    entries: list[Entry] = []
    for module in wanted:
        entries.extend(e for e in iter_all(paths, module) if isinstance(e, Entry))
    entries.sort(key=Entry.sort_key)
    out = []
    for e in entries[-limit:]:
        d = e.decision
        out.append({"time": d.time, "t": decision_epoch(d.time), "module": e.module or "global", "tags": list(d.tags),
                    "decision": d.decision, "why": d.why, "files": list(d.files), "snapshot": d.snapshot})
    return out


def facts(root: Path, module: str | None) -> list[dict[str, Any]]:
    from ..memory import AgentPaths
    from ..memory import facts as store

    paths = AgentPaths(root)
    if not paths.dir.is_dir():
        return []
    found = store.load(paths, None) + (store.load(paths, module) if module else [])
    return [{"id": f.id, "status": f.status, "text": f.text, "module": f.module or "global", "source": f.source,
             "added": f.added, "invalid_why": f.invalid_why} for f in found]


def wakeup(spec: Any, root: Path) -> dict[str, Any]:
    """The wakeup the unit's next session gets (or why it cannot be built now)."""
    from ..continuity.wakeup import unit_wakeup

    try:
        w = unit_wakeup(spec, root)
    except Exception as exc:  # noqa: BLE001 - shown on the page, never fatal to the daemon
        return {"text": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"text": w.text, "tokens": w.tokens, "budget": spec.wakeup.budget, "error": None}


def unit_detail(state_dir: Path, root: Path, spec: Any) -> dict[str, Any]:
    """Everything the unit page shows that lives in files."""
    module = spec.module
    modules: list[str | None] = [None] + ([module] if module else [])
    return {
        "cycles": cycles(state_dir, spec.name),
        "wakeup": wakeup(spec, root),
        "decisions": decisions(root, modules, limit=100),
        "facts": facts(root, module),
        "violations": violations(state_dir, spec.name),
    }


def timeline(state_dir: Path, root: Path, units: list[str]) -> dict[str, Any]:
    """Every module's decisions and the global log, every unit's cycles, the violations."""
    all_cycles = [c for name in units for c in cycles(state_dir, name, limit=100)]
    all_cycles.sort(key=lambda c: c.get("t") or 0)
    return {"decisions": decisions(root), "cycles": all_cycles[-LIMIT:], "violations": violations(state_dir)}
