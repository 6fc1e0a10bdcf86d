"""``agentd plan start|stop|status|report NAME``: the overnight runs (supervisor/plan/, docs/plan.md).

Thin, as every command: ``start`` and ``stop`` ask the daemon (the run lives
there); ``status`` and ``report`` ask it when it runs, else read the run's
files (a morning report needs no daemon).  ``agentd check`` validates the plan
files with the units (:func:`check_plans`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .context import AppContext, client_call, daemon_running, pass_app


@click.group(epilog="""\b
Examples:
  agentd plan start night       # plans/night.toml: drive its tasks to verified commits on its branch
  agentd plan status            # every plan's run
  agentd plan report night      # the morning report (--json: all of it)
  agentd plan stop night        # wind down now: units checkpoint and stop, the report is written""")
def plan() -> None:
    """Plans: tasks with checks and budgets, carried to a verified result overnight."""


@plan.command(epilog="""\b
Examples:
  agentd plan start night""")
@click.argument("name")
@pass_app
def start(app: AppContext, name: str) -> None:
    """Start the plan NAME (plans/NAME.toml): its tasks go to their units' agents, one after another."""
    result = client_call(app.paths, "plan-start", timeout=120, plan=name)
    assert isinstance(result, dict)
    click.echo(f"plan {result['plan']} started: {result['tasks']} tasks on {', '.join(result['units'])}")
    click.echo(f"  branch   {result['branch']} ({result['branch_note']})")
    click.echo(f"  deadline {result['deadline']} (units begin to stop at {result['wind_down_at']})")
    for warning in result.get("warnings") or []:
        click.echo(f"warn   {warning}")
    click.echo(f"`agentd plan status` follows it; `agentd plan report {name}` in the morning.")


@plan.command(epilog="""\b
Examples:
  agentd plan stop night""")
@click.argument("name")
@pass_app
def stop(app: AppContext, name: str) -> None:
    """Wind the run of NAME down now: every unit checkpoints and stops, the report is written."""
    click.echo(f"plan {name}: winding down (units checkpoint and stop) ...")
    report = client_call(app.paths, "plan-stop", timeout=None, plan=name)
    assert isinstance(report, dict)
    _print(report)


@plan.command(epilog="""\b
Examples:
  agentd plan status
  agentd plan status --json""")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: {\"plans\": [...]}")
@pass_app
def status(app: AppContext, as_json: bool) -> None:
    """Every plan's latest run: running or ended, and its totals."""
    if daemon_running(app.paths):
        result = client_call(app.paths, "plan-status")
        plans = result.get("plans", []) if isinstance(result, dict) else []
    else:
        from ..plan.service import stored_report
        from ..plan.state import PlanStore

        settings = app.settings
        plans = [stored_report(settings.project_root, settings.state_path, n)
                 for n in PlanStore.names(settings.state_path)]
    if as_json:
        click.echo(json.dumps({"plans": plans}, indent=1))
        return
    if not plans:
        click.echo("no plan has run here (plans are plans/NAME.toml; `agentd plan start NAME`)")
        return
    from .style import tabulate

    rows = [[p["plan"], p["status"], p["started"] or "-", p["deadline"] or "-", p["totals"]["done"],
             p["totals"]["parked"], p["totals"]["blocked"], p["totals"]["open"],
             p["totals"]["commits"], p["end_reason"] or ""] for p in plans]
    click.echo(tabulate(rows, ["PLAN", "STATUS", "STARTED", "DEADLINE", "DONE", "PARKED", "BLOCKED", "OPEN",
                               "COMMITS", "WHY IT ENDED"]))


@plan.command(epilog="""\b
Examples:
  agentd plan report night
  agentd plan report night --json | jq '.tasks[] | {id, state, commit}'""")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: the whole report")
@pass_app
def report(app: AppContext, name: str, as_json: bool) -> None:
    """The report of NAME's latest run: per task its state, attempts, time, tokens, cycles, commit and checks;
    what you need to decide; the totals."""
    if daemon_running(app.paths):
        result = client_call(app.paths, "plan-report", plan=name)
    else:
        from ..control.framing import ControlError
        from ..plan.service import stored_report

        settings = app.settings
        try:
            result = stored_report(settings.project_root, settings.state_path, name)
        except ControlError as exc:
            raise click.ClickException(str(exc)) from None
    assert isinstance(result, dict)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    _print(result)


def _print(report: dict[str, Any]) -> None:
    from ..plan.report import rows, summary_line
    from .style import tabulate

    click.echo(f"plan {report['plan']}: {report['status']}"
               + (f" ({report['end_reason']})" if report.get("end_reason") else ""))
    click.echo(f"  started {report['started']}, deadline {report['deadline']}, ended {report['ended'] or '-'}")
    headers, table = rows(report)
    click.echo(tabulate(table, headers))
    click.echo(summary_line(report))
    for task in report["tasks"]:
        if task["decide"]:
            click.echo(f"decide {task['id']}: {task['decide']}")
    if report.get("report"):
        click.echo(f"report: {report['report']}")


def check_plans(settings: Any, specs: dict[str, Any], errors: list[Any]) -> int:
    """``agentd check``'s part for plans: each plan file checked with the units; the number of errors."""
    from ..plan.planfile import PlanError, check_plan, parse_plan, plan_names

    refused = {str(getattr(e, "path", "")).rsplit("/", 1)[-1].removesuffix(".toml"): getattr(e, "message", str(e))
               for e in errors}
    count = 0
    notify = getattr(settings, "notify", None)
    if notify is not None:  # the settings' [notify] runs outside every fence: never what an agent may write
        from ..config.runnable import command_problem

        problem = command_problem("[notify] command", notify.command, settings.project_root, specs,
                                  settings.project_root)
        if problem:
            click.echo(f"error  settings: {problem}")
            count += 1
    for name in plan_names(settings.project_root):
        try:
            spec = parse_plan(settings.project_root / "plans" / f"{name}.toml")
        except PlanError as exc:
            for line in str(exc).splitlines():
                click.echo(f"error  {line}")
                count += 1
            continue
        problems, warnings = check_plan(spec, specs, refused, settings.project_root, settings.state_path)
        if not problems:
            click.echo(f"ok     plan {name}: {len(spec.tasks)} tasks on {', '.join(spec.units)}, branch {spec.branch}")
        for warning in warnings:
            click.echo(f"warn   plan {name}: {warning}")
        for problem in problems:
            click.echo(f"error  {problem}")
        count += len(problems)
    sys.stdout.flush()
    return count
