"""How the CLI shows things: durations, sizes, the status, history and violations tables.

Every name that did not come from agentd itself (a path, a reason quoting
one, an agent's exit text) is printed through :func:`~supervisor.visible.visible`:
its escapes made visible, never raw.
"""

from __future__ import annotations

from ..visible import visible

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



def recall_flag(recall: object) -> str:
    """The flag of a probe recall below 1 (imported late: status is a fast path)."""
    from .timeline import recall_flag as flag

    return flag(recall)


def status_note(row: dict) -> str:
    """A unit's NOTE column: the parts it has, joined by "; " (never an empty part)."""
    sched = row.get("schedule") or {}
    parts = [f"next {k} {v[:19].replace('T', ' ')}" for k, v in sched.items() if v]
    if row.get("violations"):
        parts.append(f"{row['violations']} violation(s)")
    scope = row.get("scope")
    if scope and not scope.startswith("fenced"):
        parts.append(f"scope: {scope}")
    limits = row.get("limits") or {}
    if limits.get("unavailable"):
        parts.append("limits unavailable: " + ", ".join(limits["unavailable"]))
    if row.get("queued_sends"):
        parts.append(f"{row['queued_sends']} queued")
    if row.get("next_restart_in") is not None:
        parts.append(f"restart in {row['next_restart_in']:.0f}s")
    frozen = row.get("frozen")
    if frozen:
        parts.append(f"{frozen['detail']} (action: {frozen['action']})")
    parts.append(row.get("activity") or row.get("reason") or "")
    if row.get("transcript_problem"):
        parts.append(row["transcript_problem"])
    if row.get("typing"):
        parts.append(f"typing {row['typing']}")
    sandbox = row.get("sandbox") or {}
    if sandbox.get("bypassed"):
        parts.append("sandbox bypassed" + ("" if sandbox.get("fenced") else " (no fence)"))
    for warning in (sandbox.get("warning"), (row.get("context") or {}).get("window_warning")):
        if warning:
            parts.append(f"warning: {warning}")
    last = row.get("last_checkpoint")
    if last:
        ratio = f" {last['ratio'] * 100:.1f}%" if last.get("ratio") is not None else ""
        parts.append(f"last checkpoint {last['trigger']} {last['flush']}{ratio}{recall_flag(last.get('recall'))}")
    return visible("; ".join(part for part in parts if part))


def scope_cell(scope: str | None) -> str:
    """The SCOPE column: fenced, watched, or - (no session)."""
    if not scope:
        return "-"
    return "fenced" if scope.startswith("fenced") else "watched"


def state_label(row: dict) -> str:
    """The STATE column: the unit's state, and a freeze by name (``running (blocked: trust)``)."""
    frozen = row.get("frozen")
    if not frozen:
        return row["state"]
    name = frozen["state"]
    if name in ("blocked_screen", "approval_wait"):
        screen = frozen["detail"].split(";")[0].removeprefix("blocked: ").split(" for ")[0]
        return f"{row['state']} (blocked: {screen})"
    return f"{row['state']} (frozen: {name})"


def render_status(result: dict, colour: bool = False, limit: int | None = None) -> str:
    """The status table; ``colour``: states in colour; ``limit``: fit this width (drop columns, cut NOTE)."""
    from .style import fit, state

    daemon = result["daemon"]
    head = f"agentd {daemon['version']} pid {daemon['pid']} up {fmt_duration(daemon['uptime'])} — {visible(daemon['project_root'])}"
    contained = daemon.get("containment")
    if contained:
        line = f"containment: {visible(contained['detail'])}; landlock: {visible(daemon.get('landlock', '-'))}"
        head += "\n" + (line if limit is None or len(line) <= limit else line[:limit - 1] + "…")
    rows = []
    for row in result["units"]:
        ctx = row.get("context")
        context = "-"
        if ctx:
            approx = "" if ctx["exact"] else "~"
            context = f"{approx}{fmt_count(ctx['used'])}/{fmt_count(ctx['window'])} {ctx['ratio'] * 100:.0f}%"
            if ctx.get("window_source") and ctx["window_source"] != "agent":
                context += f" (window: {ctx['window_source']})"
        note = status_note(row)
        rows.append(
            [
                row["unit"],
                state(state_label(row), colour, row["state"]),
                row["pid"] or "-",
                fmt_duration(row["uptime"]),
                row["restarts"],
                visible(row["last_exit"] or "-"),
                "-" if row["cpu_seconds"] is None else f"{row['cpu_seconds']:.1f}s",
                fmt_bytes(row.get("memory_bytes", row["rss_bytes"])),
                context,
                scope_cell(row.get("scope")),
                note,
            ]
        )
    table = fit(["UNIT", "STATE", "PID", "UPTIME", "RESTARTS", "LAST EXIT", "CPU", "MEM", "CONTEXT", "SCOPE", "NOTE"], rows,
                limit, drop=("LAST EXIT", "MEM", "CPU", "PID", "RESTARTS", "UPTIME", "SCOPE"))
    lines = [head, table if rows else "(no units)"]
    for err in result.get("errors", []):
        lines.append(f"error: {visible(err)}")
    return "\n".join(lines)



def render_violations(records: list[dict]) -> str:
    """``agentd violations``: one line per violation, paths and rules with their escapes made visible."""
    from tabulate import tabulate

    rows = [[visible(r.get("time", "-")), visible(r.get("unit") or "(" + ", ".join(r.get("candidates") or []) + "?)"),
             visible(r.get("path", "")), visible(r.get("rule", "")), visible(r.get("action", "")),
             visible(r.get("certainty") or "watcher"), visible(r.get("done") or "-")] for r in records]
    return tabulate(rows, headers=["TIME", "UNIT", "PATH", "RULE", "ACTION", "CERTAINTY", "DONE"], disable_numparse=True)
