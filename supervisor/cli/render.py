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


#: The words for a cycle's flush in the NOTE column.
FLUSH_WORDS = {"verified": "notes verified", "auto": "[auto] note", "failed": "notes not written", "skipped": "no notes"}


def note_parts(row: dict) -> tuple[list[str], list[str]]:
    """A unit's NOTE, in two lists: what to do first (a blocking screen, a freeze, why it failed), then the
    rest; never an empty part."""
    first: list[str] = []
    blocked, frozen = row.get("blocked"), row.get("frozen")
    if frozen:
        first.append(f"{frozen['detail']} (action: {frozen['action']})")
    elif blocked:
        acts = (f"; [freeze] {blocked['freeze']} = {blocked['action']} after {blocked['after']:g}s"
                if blocked.get("after") is not None and blocked.get("action") else "")
        first.append(f"blocked: {blocked['screen']}: {blocked['todo']}{acts}")
    reason = row.get("activity") or row.get("reason") or ""
    urgent = row.get("state") in ("failed", "error", "backoff", "waiting") and not row.get("activity")
    rest: list[str] = []
    (first if urgent else rest).append(reason)
    if row.get("next_restart_in") is not None:
        rest.append(f"restart in {row['next_restart_in']:.0f}s")
    if row.get("queued_sends"):
        rest.append(f"{row['queued_sends']} queued")
    if row.get("violations"):
        rest.append(f"{row['violations']} violation(s)")
    if row.get("transcript_problem"):
        rest.append(row["transcript_problem"])
    if row.get("typing"):
        rest.append(f"typing {row['typing']}")
    sandbox = row.get("sandbox") or {}
    if sandbox.get("bypassed"):
        rest.append("sandbox bypassed" + ("" if sandbox.get("fenced") else " (no fence)"))
    for warning in (sandbox.get("warning"), (row.get("context") or {}).get("window_warning")):
        if warning:
            rest.append(f"warning: {warning}")
    limits = row.get("limits") or {}
    if limits.get("unavailable"):
        rest.append("limits unavailable: " + ", ".join(limits["unavailable"]))
    sched = row.get("schedule") or {}
    rest += [f"next {k} {v[:19].replace('T', ' ')}" for k, v in sched.items() if v]
    scope = row.get("scope")
    if scope and not scope.startswith("fenced"):
        rest.append(f"scope: {scope}")
    last = row.get("last_checkpoint")
    if last:
        flush = FLUSH_WORDS.get(last.get("flush"), last.get("flush") or "")
        ratio = (f", wakeup {last['ratio'] * 100:.1f}% of the context before"
                 if last.get("ratio") is not None else "")
        rest.append(f"last cycle: {last['trigger']}, {flush}{ratio}{recall_flag(last.get('recall'))}")
    return [visible(p) for p in first if p], [visible(p) for p in rest if p]


def status_note(row: dict) -> str:
    """A unit's NOTE column: what to do first, then the rest, joined by "; " (never an empty part)."""
    first, rest = note_parts(row)
    return "; ".join(first + rest)


def scope_cell(scope: str | None) -> str:
    """The SCOPE column: fenced, watched, or - (no session)."""
    if not scope:
        return "-"
    return "fenced" if scope.startswith("fenced") else "watched"


def state_label(row: dict) -> str:
    """The STATE column: the unit's state, a blocking screen by name (``running (blocked: login)``), a freeze."""
    frozen, blocked = row.get("frozen"), row.get("blocked")
    if blocked:
        return f"{row['state']} (blocked: {blocked['screen']})"
    if not frozen:
        return row["state"]
    name = frozen["state"]
    if name in ("blocked_screen", "approval_wait"):
        screen = frozen["detail"].split(";")[0].removeprefix("blocked: ").split(" for ")[0]
        return f"{row['state']} (blocked: {screen})"
    return f"{row['state']} (frozen: {name})"


def exit_cell(row: dict) -> str:
    """LAST EXIT: the exit, marked ``planned`` when agentd ended the session itself (a cycle, a stop)."""
    text = row.get("last_exit")
    if not text:
        return "-"
    return f"planned ({visible(text)})" if row.get("last_exit_planned") else visible(text)


#: The status table's columns, and the ones dropped first to fit a narrow terminal.
COLUMNS = ["UNIT", "STATE", "PID", "UPTIME", "CRASHES", "CYCLES", "LAST EXIT", "CPU", "MEM", "CONTEXT", "SCOPE", "NOTE"]
DROP = ("LAST EXIT", "MEM", "CPU", "PID", "CYCLES", "UPTIME", "SCOPE", "CRASHES")


def render_status(result: dict, colour: bool = False, limit: int | None = None, full: bool = False) -> str:
    """The status table; ``colour``: states in colour; ``limit``: fit this width (drop columns, cut NOTE, then
    say below the table, wrapped, what to do about each unit whose NOTE was cut); ``full``: no NOTE column,
    every unit's note below the table instead, whole and wrapped."""
    from .style import fit, state, wrap

    daemon = result["daemon"]
    head = f"agentd {daemon['version']} pid {daemon['pid']} up {fmt_duration(daemon['uptime'])} — {visible(daemon['project_root'])}"
    contained = daemon.get("containment")
    if contained:
        line = f"containment: {visible(contained['detail'])}; landlock: {visible(daemon.get('landlock', '-'))}"
        head += "\n" + (line if full or limit is None or len(line) <= limit else line[:limit - 1] + "…")
    rows, notes = [], []
    for row in result["units"]:
        ctx = row.get("context")
        context = "-"
        if ctx:
            approx = "" if ctx["exact"] else "~"
            context = f"{approx}{fmt_count(ctx['used'])}/{fmt_count(ctx['window'])} {ctx['ratio'] * 100:.0f}%"
            if ctx.get("window_source") and ctx["window_source"] != "agent":
                context += f" (window: {ctx['window_source']})"
        notes.append(note_parts(row))
        rows.append(
            [
                row["unit"],
                state(state_label(row), colour, row["state"]),
                row["pid"] or "-",
                fmt_duration(row["uptime"]),
                row.get("crashes", row.get("restarts", 0)),
                row.get("cycles", 0),
                exit_cell(row),
                "-" if row["cpu_seconds"] is None else f"{row['cpu_seconds']:.1f}s",
                fmt_bytes(row.get("memory_bytes", row["rss_bytes"])),
                context,
                scope_cell(row.get("scope")),
                "; ".join(notes[-1][0] + notes[-1][1]),
            ]
        )
    lines = [head]
    if not rows:
        lines.append("(no units)")
    elif full:
        lines.append(fit(COLUMNS[:-1], [r[:-1] for r in rows], limit, drop=DROP))
        pad = max(len(row["unit"]) for row in result["units"]) + 2
        for row, (first, rest) in zip(result["units"], notes):
            for i, part in enumerate(first + rest):
                lines += wrap(part, limit, first=f"{row['unit'] if i == 0 else '':<{pad}}", indent=pad)
    else:
        table = fit(COLUMNS, rows, limit, drop=DROP)
        lines.append(table)
        cut = [(row, first) for row, r, (first, _) in zip(result["units"], rows, notes) if r[-1] and r[-1] not in table]
        for row, first in cut:
            for part in first:  # what to do, whole
                lines += wrap(part, limit, first=f"{row['unit']}: ", indent=2)
        if cut:
            lines.append("(NOTE cut to fit the terminal: `agentd status --full` shows every note whole)")
    for err in result.get("errors", []):
        lines.append(f"error: {visible(err)}")
    return "\n".join(lines)


def render_reload(report: dict) -> str:
    """``agentd reload``: what was started, stopped, restarted and kept, then each unit whose file does not
    load, and why (kept on its old definition, or not loaded at all)."""
    lines = [f"{key}: {', '.join(report[key]) or '-'}" for key in ("started", "stopped", "restarted", "kept")]
    for key, words in (("kept_old", "kept on its old definition"), ("not_loaded", "not loaded")):
        lines += [f"{name}: {words}: {visible(why)}" for name, why in (report.get(key) or {}).items()]
    return "\n".join(lines)
