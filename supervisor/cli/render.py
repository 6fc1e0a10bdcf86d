"""How the CLI shows things: durations, sizes, the status and history tables."""

from __future__ import annotations

def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def fmt_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "K", "M", "G"):
        if value < 1024 or unit == "G":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}G"


def fmt_count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)



def status_note(row: dict) -> str:
    """A unit's NOTE column: the parts it has, joined by "; " (never an empty part)."""
    sched = row.get("schedule") or {}
    parts = [f"next {k} {v[:19].replace('T', ' ')}" for k, v in sched.items() if v]
    if row.get("violations"):
        parts.append(f"{row['violations']} violation(s)")
    if row.get("queued_sends"):
        parts.append(f"{row['queued_sends']} queued")
    if row.get("next_restart_in") is not None:
        parts.append(f"restart in {row['next_restart_in']:.0f}s")
    parts.append(row.get("activity") or row.get("reason") or "")
    last = row.get("last_checkpoint")
    if last:
        ratio = f" {last['ratio'] * 100:.1f}%" if last.get("ratio") is not None else ""
        parts.append(f"last checkpoint {last['trigger']} {last['flush']}{ratio}")
    return "; ".join(part for part in parts if part)


def render_status(result: dict, colour: bool = False, limit: int | None = None) -> str:
    """The status table; ``colour``: states in colour; ``limit``: fit this width (drop columns, cut NOTE)."""
    from .style import fit, state

    daemon = result["daemon"]
    head = f"agentd {daemon['version']} pid {daemon['pid']} up {fmt_duration(daemon['uptime'])} — {daemon['project_root']}"
    rows = []
    for row in result["units"]:
        ctx = row.get("context")
        context = "-"
        if ctx:
            approx = "" if ctx["exact"] else "~"
            context = f"{approx}{fmt_count(ctx['used'])}/{fmt_count(ctx['window'])} {ctx['ratio'] * 100:.0f}%"
        note = status_note(row)
        rows.append(
            [
                row["unit"],
                state(row["state"], colour),
                row["pid"] or "-",
                fmt_duration(row["uptime"]),
                row["restarts"],
                row["last_exit"] or "-",
                "-" if row["cpu_seconds"] is None else f"{row['cpu_seconds']:.1f}s",
                fmt_bytes(row["rss_bytes"]),
                context,
                note,
            ]
        )
    table = fit(["UNIT", "STATE", "PID", "UPTIME", "RESTARTS", "LAST EXIT", "CPU", "RSS", "CONTEXT", "NOTE"], rows, limit,
                drop=("LAST EXIT", "RSS", "CPU", "PID", "RESTARTS", "UPTIME"))
    lines = [head, table if rows else "(no units)"]
    for err in result.get("errors", []):
        lines.append(f"error: {err}")
    return "\n".join(lines)



def render_history(records: list[dict], limit: int | None = None) -> str:
    from .style import fit

    rows = []
    for rec in records:
        steps = " ".join(f"{k}={v:.1f}s" for k, v in (rec.get("steps") or {}).items())
        ratio = rec.get("ratio")
        rows.append([
            rec.get("started", "-"),
            rec.get("trigger"),
            f"{rec['tokens_before']}/{rec['window']}" if rec.get("tokens_before") is not None else "-",
            rec.get("wakeup_tokens") if rec.get("wakeup_tokens") is not None else "-",
            f"{ratio * 100:.1f}%" if ratio is not None else "-",
            rec.get("flush"),
            rec.get("outcome"),
            f"{rec.get('old_session') or '-'} -> {rec.get('new_session') or '-'}",
            steps,
        ])
    return fit(["STARTED", "TRIGGER", "TOKENS BEFORE", "WAKEUP", "RATIO", "FLUSH", "OUTCOME", "SESSIONS", "STEPS"], rows, limit,
               drop=("STEPS", "SESSIONS"))
