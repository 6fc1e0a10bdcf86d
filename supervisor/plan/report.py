"""The morning report: what the night did, per task and in all, as JSON, a table and Markdown.

:func:`build` is the one source (pure: a run's spec and state): per task its
state (done, parked, blocked, pending), attempts, time and tokens, sessions
and cycles, the commit and its diffstat, each check's verdict with the tail of
its output, violations and freezes, and what the person must decide; then the
totals.  ``agentd plan report NAME`` prints it (``--json``: this dict), the
dashboard's Plan page shows it, and at the end of a run :func:`write` puts the
Markdown in ``.agent/reports/<plan>-<date>.md`` (the memory store, so ``agentd
sync`` carries it to the other machines).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..durable import atomic_write
from ..session.redact import redact_text
from .policy import decide_for_person
from .spec import PlanSpec
from .state import PlanState, Status

#: Characters of each check's output tail in the report.
REPORT_TAIL = 600


def _iso(epoch: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch)) if epoch else None


def shown_state(status: Status, run_ended: bool) -> str:
    """done, parked, blocked; pending for the rest once the run ended (active/checking while it runs)."""
    if status in (Status.DONE, Status.PARKED, Status.BLOCKED) or not run_ended:
        return status.value
    return "pending"


def build(spec: PlanSpec, state: PlanState) -> dict[str, Any]:
    ended = state.status.value == "ended"
    tasks = []
    for task in spec.tasks:
        ts = state.tasks[task.id]
        checks = [{"attempt": c["attempt"], "time": c.get("time"), "passed": c["passed"], "log": c.get("log"),
                   "results": [{"command": r.get("command"), "exit": r.get("exit"), "ok": r.get("ok"),
                                "timed_out": r.get("timed_out", False), "seconds": r.get("seconds"),
                                "tail": str(r.get("tail") or "")[-REPORT_TAIL:]} for r in c["results"]]}
                  for c in ts.checks]
        tasks.append({
            "id": task.id, "unit": task.unit, "ask": task.ask, "state": shown_state(ts.status, ended),
            "attempts": ts.attempts, "max_attempts": task.max_attempts, "seconds": round(ts.seconds, 1),
            "time_budget": task.time, "tokens": ts.tokens, "token_budget": task.tokens, "turns": ts.turns,
            "sessions": ts.sessions, "cycles": ts.cycles, "nudges": ts.nudges, "commit": ts.commit,
            "diffstat": ts.diffstat, "checks": checks, "violations": ts.violations, "freezes": ts.freezes,
            "reason": ts.reason, "kind": ts.kind, "blocked_by": ts.blocked_by, "work": ts.parked_ref,
            "after": list(task.after), "done_when": [c if isinstance(c, str) else " ".join(c) for c in task.done_when],
            "decide": decide_for_person(ts, task), "started": _iso(ts.started_at), "ended": _iso(ts.ended_at)})
    counts = {s: sum(1 for t in tasks if t["state"] == s) for s in ("done", "parked", "blocked", "pending")}
    return {
        "plan": spec.name, "description": spec.model.plan.description, "status": state.status.value,
        "trigger": state.trigger, "started": _iso(state.started_at), "deadline": _iso(state.deadline),
        "ended": _iso(state.ended_at), "end_reason": state.end_reason, "branch": state.branch,
        "base": state.base_commit, "tip": state.tip, "report": state.report,
        "totals": {**counts, "tasks": len(tasks),
                   "open": sum(1 for t in tasks if t["state"] not in ("done", "parked", "blocked")),
                   "commits": sum(1 for t in tasks if t["commit"]),
                   "attempts": sum(t["attempts"] for t in tasks), "tokens": state.tokens,
                   "token_budget": state.tokens_budget, "seconds": round(sum(t["seconds"] for t in tasks), 1),
                   "violations": sum(t["violations"] for t in tasks), "freezes": sum(len(t["freezes"]) for t in tasks)},
        "tasks": tasks,
    }


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def tokens(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def files(stat: dict[str, Any]) -> str:
    n = stat.get("files", 0)
    return f"{n} file" if n == 1 else f"{n} files"


def verdict_cell(task: dict[str, Any]) -> str:
    """One line on the task's outcome: the last check, or why it is parked/blocked/pending."""
    if task["state"] == "done":
        stat = task["diffstat"] or {}
        return f"passed attempt {task['attempts']}; {files(stat)} +{stat.get('insertions', 0)} -{stat.get('deletions', 0)}"
    if task["reason"]:
        return task["reason"]
    if task["checks"]:
        last = task["checks"][-1]
        return f"attempt {last['attempt']} {'passed' if last['passed'] else 'failed'}"
    return "-"


def rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    headers = ["TASK", "UNIT", "STATE", "TRIES", "TIME", "TOKENS", "CYCLES", "COMMIT", "OUTCOME"]
    out = [[t["id"], t["unit"], t["state"], f"{t['attempts']}/{t['max_attempts']}", duration(t["seconds"]),
            tokens(t["tokens"]), str(t["cycles"]), (t["commit"] or "-")[:10], verdict_cell(t)] for t in report["tasks"]]
    return headers, out


def summary_line(report: dict[str, Any]) -> str:
    t = report["totals"]
    return (f"{t['done']} done, {t['parked']} parked, {t['blocked']} blocked, {t['pending']} pending; "
            f"{t['commits']} commits on {report['branch']}; {tokens(t['tokens'])} of {tokens(t['token_budget'])} tokens; "
            f"{duration(t['seconds'])} of work")


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (what goes to ``.agent/reports/``)."""
    t = report["totals"]
    lines = [f"# Plan {report['plan']}: morning report", ""]
    if report["description"]:
        lines += [report["description"], ""]
    lines += [f"- started {report['started']} ({report['trigger']}), deadline {report['deadline']}, "
              f"ended {report['ended'] or '(still running)'}: {report['end_reason'] or ''}",
              f"- branch `{report['branch']}`: {report['base'][:12]} .. {report['tip'][:12]}",
              f"- {summary_line(report)}",
              f"- attempts {t['attempts']}, violations {t['violations']}, freezes {t['freezes']}", "",
              "| task | unit | state | tries | time | tokens | cycles | commit | outcome |",
              "|---|---|---|---|---|---|---|---|---|"]
    headers, table = rows(report)
    for row in table:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    decide = [task for task in report["tasks"] if task["decide"]]
    if decide:
        lines += ["", "## What you need to decide", ""]
        lines += [f"- **{task['id']}** ({task['unit']}): {task['decide']}" for task in decide]
    lines += ["", "## Tasks", ""]
    for task in report["tasks"]:
        lines += [f"### {task['id']} ({task['unit']}): {task['state']}", "", f"> {task['ask'].splitlines()[0]}", ""]
        if task["commit"]:
            stat = task["diffstat"] or {}
            lines.append(f"- commit `{task['commit'][:12]}`: {files(stat)}, +{stat.get('insertions', 0)} "
                         f"-{stat.get('deletions', 0)} ({', '.join(stat.get('paths', [])[:8])})")
        lines.append(f"- {task['attempts']} attempt(s), {duration(task['seconds'])}, {tokens(task['tokens'])} tokens, "
                     f"{task['turns']} turns, {task['sessions']} session(s), {task['cycles']} cycle(s), "
                     f"{task['violations']} violation(s), {len(task['freezes'])} freeze(s)")
        for check in task["checks"]:
            verdict = "passed" if check["passed"] else "FAILED"
            lines.append(f"- check {check['attempt']}: {verdict}")
            for r in check["results"]:
                how = "timed out" if r["timed_out"] else f"exit {r['exit']}"
                lines.append(f"  - `{r['command']}`: {how}, {r['seconds']}s")
                if not r["ok"] and r["tail"].strip():
                    tail = r["tail"].replace("`" * 3, "'" * 3)  # the agent's output cannot close the fence
                    lines += ["", "    ```", *[f"    {ln}" for ln in tail.rstrip().splitlines()[-12:]], "    ```", ""]
        if task["reason"] and task["state"] != "done":
            lines.append(f"- {task['reason']}")
        lines.append("")
    return redact_text("\n".join(lines).rstrip() + "\n")


def path_for(root: Path, plan: str, when: float) -> Path:
    return Path(root) / ".agent" / "reports" / f"{plan}-{time.strftime('%Y-%m-%d', time.localtime(when))}.md"


def write(root: Path, spec: PlanSpec, state: PlanState) -> str:
    """Write the Markdown report under ``.agent/reports/``; its path relative to the project.

    A run keeps its file (``state.report``, written again after a resume); another run of the same plan on the
    same day gets ``<plan>-<date>-2.md`` and so on, never another run's file."""
    report = build(spec, state)
    if state.report:
        path = Path(root) / state.report
    else:
        first = path_for(root, spec.name, state.ended_at or time.time())
        path, n = first, 1
        while path.exists():
            n += 1
            path = first.with_name(f"{first.stem}-{n}.md")
    atomic_write(path, markdown(report))
    return path.relative_to(root).as_posix()
