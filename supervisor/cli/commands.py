"""The daemon's commands: start, stop, status, restart, reload, send, attach, logs, history, ...

Each parses its arguments, asks the daemon through the control client (or
reads the state directory), and renders.  Policy lives in the daemon.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .context import AppContext, client_call, daemon_running, pass_app, print_result, units_arg
from .render import render_history, render_status

@click.command()
@click.argument("units", nargs=-1)
@click.option("--foreground", is_flag=True, help="stay in the foreground (for systemd: Type=notify)")
@click.option("--detached", is_flag=True, hidden=True)
@pass_app
def start(app: AppContext, units: tuple[str, ...], foreground: bool, detached: bool) -> None:
    """Start the daemon (if needed) and UNITS (default: every enabled unit)."""
    settings = app.settings
    if foreground:
        from ..daemon.arbiter import run_daemon
        from ..daemon.pidfile import AlreadyRunning

        try:
            code = run_daemon(settings, console=not detached)
        except AlreadyRunning as exc:
            raise click.ClickException(str(exc)) from None
        sys.exit(code)
    if daemon_running(settings):
        print_result(client_call(settings, "start", timeout=None, units=units_arg(units)))
        return
    from ..daemon.daemonize import DaemonStartError, spawn_daemon

    try:
        pid = spawn_daemon(settings, app.config_path)
    except DaemonStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"agentd started (pid {pid}, project {settings.project_root})")
    if units:
        print_result(client_call(settings, "start", timeout=None, units=list(units)))


@click.command()
@click.argument("units", nargs=-1)
@click.option("--now", is_flag=True, help="skip the checkpoint (stop at once)")
@pass_app
def stop(app: AppContext, units: tuple[str, ...], now: bool) -> None:
    """Stop UNITS, or every unit and then the daemon."""
    settings = app.settings
    if not daemon_running(settings):
        click.echo("agentd is not running")
        return
    if units:
        print_result(client_call(settings, "stop", timeout=None, units=list(units), now=now))
        return
    from ..daemon.daemonize import wait_stopped
    from ..daemon.pidfile import read_pidfile

    daemon = read_pidfile(settings.pidfile)
    client_call(settings, "shutdown", timeout=None, now=now)
    if not wait_stopped(settings, timeout=60.0, daemon=daemon):
        raise click.ClickException("agentd did not exit within 60s after stopping its units")
    click.echo("agentd stopped")


@click.command()
@click.argument("units", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@pass_app
def status(app: AppContext, units: tuple[str, ...], as_json: bool) -> None:
    """Show units: state, pid, uptime, restarts, last exit, CPU and memory.

    Exit code (LSB): 0 when running (every named unit running), 3 when not.
    """
    import json

    settings = app.paths
    if not daemon_running(settings):
        if as_json:
            click.echo(json.dumps({"daemon": None, "units": []}))
        else:
            click.echo("agentd is not running")
        sys.exit(3)
    result = client_call(settings, "status", units=units_arg(units))
    assert isinstance(result, dict)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(render_status(result))
    if units and any(row["state"] != "running" for row in result["units"]):
        sys.exit(3)


@click.command()
@click.argument("units", nargs=-1)
@click.option("--now", is_flag=True, help="skip the checkpoint (restart at once)")
@pass_app
def restart(app: AppContext, units: tuple[str, ...], now: bool) -> None:
    """Restart UNITS (default: every active or enabled unit)."""
    settings = app.settings
    if not daemon_running(settings):
        raise click.ClickException("agentd is not running (use `agentd start`)")
    print_result(client_call(settings, "restart", timeout=None, units=units_arg(units), now=now))


@click.command()
@pass_app
def reload(app: AppContext) -> None:
    """Re-read unit files: start new, stop removed, restart changed, keep the rest."""
    settings = app.settings
    if not daemon_running(settings):
        raise click.ClickException("agentd is not running (use `agentd start`)")
    report = client_call(settings, "reload", timeout=None)
    assert isinstance(report, dict)
    for key in ("started", "stopped", "restarted", "kept"):
        click.echo(f"{key}: {', '.join(report[key]) or '-'}")
    for err in report.get("errors", []):
        click.echo(f"error: {err}", err=True)


@click.command("reset-failed")
@click.argument("units", nargs=-1)
@pass_app
def reset_failed(app: AppContext, units: tuple[str, ...]) -> None:
    """Clear the failed state of UNITS (and start them if enabled)."""
    print_result(client_call(app.settings, "reset-failed", units=units_arg(units)))


@click.command()
@click.argument("unit")
@click.argument("text")
@click.option("--no-enter", is_flag=True, help="do not press Enter after the text")
@pass_app
def send(app: AppContext, unit: str, text: str, no_enter: bool) -> None:
    """Type TEXT (plus Enter) into UNIT's agent."""
    result = client_call(app.settings, "send", unit=unit, text=text, enter=not no_enter)
    assert isinstance(result, dict)
    if result.get("delivered") == "queued":
        click.echo(f"queued (position {result['position']}): {result['note']}")
    else:
        click.echo(f"typed into {unit} ({result['bytes']} bytes)")


@click.command()
@click.argument("unit")
@click.option("--read-only", is_flag=True, help="watch only: typed keys are not sent (Ctrl-] still detaches)")
@pass_app
def attach(app: AppContext, unit: str, read_only: bool) -> None:
    """Relay UNIT's live session to this terminal; detach with Ctrl-] (0x1d).

    The daemon keeps recording the transcript.  When the session ends or is
    replaced, the next one is followed if it starts within a few seconds.
    Exit code: 0 after detaching, 3 when the session ended with no successor,
    1 on errors.
    """
    from .attach import AttachError, run_attach

    try:
        code = run_attach(app.settings.socket_path, unit, read_only)
    except AttachError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


def _newest_transcript(directory: Path, suffix: str) -> Path | None:
    """The transcript of the session that started last, or None.

    A session id begins with its UTC start to the microsecond, fixed width
    (:func:`supervisor.session.pty.new_session_id`), so the greatest start
    is the newest session, however close two restarts were.  Ids written by
    older versions carry whole seconds only; among those, the file written
    last wins (the dead session stopped writing before the live one began).
    """
    best: tuple[str, int] | None = None
    newest = None
    for path in directory.glob(f"*{suffix}") if directory.is_dir() else ():
        try:
            written = path.stat().st_mtime_ns
        except OSError:
            continue
        key = (path.stem.rsplit("-", 1)[0], written)
        if best is None or key > best:
            best, newest = key, path
    return newest


@click.command()
@click.argument("unit")
@click.option("-n", "lines", default=40, show_default=True, help="lines to show")
@click.option("-f", "follow", is_flag=True, help="keep printing new output (and the next sessions')")
@click.option("--raw", is_flag=True, help="the raw transcript (with terminal escapes)")
@pass_app
def logs(app: AppContext, unit: str, lines: int, follow: bool, raw: bool) -> None:
    """Show UNIT's transcript (clean text of the newest session).

    With -f, a restart moves on to the new session's transcript (from its
    beginning; a line on stderr names the session).
    """
    from ..session.transcript import follow_clean, read_clean_tail
    from ..config.units import valid_name

    if not valid_name(unit):
        raise click.ClickException(f"unit name {unit!r} is not valid")
    directory = app.settings.transcripts_path / unit
    suffix = ".log" if raw else ".txt"
    path = _newest_transcript(directory, suffix)
    if path is None:
        raise click.ClickException(f"no transcript for unit {unit!r} under {directory}")
    if raw:
        if follow:
            raise click.UsageError("--raw and -f do not go together (follow the clean view, or tail -f the .log)")
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 256 * 1024))
            data = fh.read()
        sys.stdout.buffer.write(b"\n".join(data.split(b"\n")[-lines:]))
        sys.stdout.buffer.flush()
        return
    if not follow:
        for line in read_clean_tail(path, lines):
            click.echo(line)
        return
    try:
        while True:
            current = path

            def superseded() -> bool:
                return _newest_transcript(directory, ".txt") not in (current, None)

            for chunk in follow_clean(current, should_stop=superseded, lines=lines):
                click.echo(chunk, nl=False)
            path = _newest_transcript(directory, ".txt") or current
            lines = sys.maxsize  # a new session is shown from its beginning
            click.echo(f"\n[agentd] session {path.stem} of {unit}", err=True)
    except KeyboardInterrupt:
        pass


@click.command()
@click.argument("unit")
@pass_app
def checkpoint(app: AppContext, unit: str) -> None:
    """Run a checkpoint cycle on UNIT now: prompt, verify the flush, fresh session with the wakeup."""
    record = client_call(app.settings, "checkpoint", timeout=None, unit=unit)
    assert isinstance(record, dict)
    click.echo(render_history([record]))


@click.command()
@click.argument("unit")
@click.option("-n", "count", default=20, show_default=True, help="cycles to show")
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
@pass_app
def history(app: AppContext, unit: str, count: int, as_json: bool) -> None:
    """Show UNIT's checkpoint cycles: trigger, tokens before, wakeup tokens, ratio, flush, step times."""
    import json

    from ..continuity.records import read_history
    from ..config.units import valid_name

    if not valid_name(unit):
        raise click.ClickException(f"unit name {unit!r} is not valid")
    records = list(read_history(app.settings.state_path, unit))[-count:]
    if as_json:
        for rec in records:
            click.echo(json.dumps(rec))
        return
    if not records:
        click.echo(f"no checkpoint cycles recorded for {unit}")
        return
    click.echo(render_history(records))


@click.command()
@click.option("--unit", "unit_name", envvar="AGENTD_UNIT", required=True, help="the unit (default: $AGENTD_UNIT)")
@click.argument("payload", required=False)
def notify(unit_name: str, payload: str | None) -> None:
    """Forward an event from the agent (Codex notify, Claude Code hooks) to the daemon.

    PAYLOAD is the event as JSON (Codex passes it as the last argument); without
    it the JSON is read from stdin (hooks).  Anything the daemon answers for the
    agent (a hook's output) is printed.  Never fails the agent: problems go to
    stderr and the exit code stays 0.
    """
    import json
    import os

    from ..control.client import call

    raw = payload if payload is not None else sys.stdin.read()
    try:
        event = json.loads(raw) if raw.strip() else {}
        if not isinstance(event, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        click.echo(f"agentd notify: payload is not a JSON object: {exc}", err=True)
        return
    socket_path = os.environ.get("AGENTD_SOCKET")
    try:
        path = Path(socket_path) if socket_path else click.get_current_context().find_object(AppContext).settings.socket_path
        reply = call(path, "agent-event", timeout=20.0, unit=unit_name, session=os.environ.get("AGENTD_SESSION"), event=event)
    except Exception as exc:  # noqa: BLE001 - an agent's hook must never break on agentd
        click.echo(f"agentd notify: {exc}", err=True)
        return
    if isinstance(reply, dict) and reply.get("output"):
        click.echo(reply["output"])


@click.command()
@click.argument("unit", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
@pass_app
def violations(app: AppContext, unit: str | None, as_json: bool) -> None:
    """Scope violations seen by the scope guard (all units, or UNIT)."""
    import json

    from tabulate import tabulate

    from ..durable import read_jsonl

    rows = [r for r in read_jsonl(app.settings.state_path / "violations.jsonl") if unit is None or r.get("unit") == unit]
    if as_json:
        for rec in rows:
            click.echo(json.dumps(rec))
        return
    if not rows:
        click.echo("no violations")
        return
    click.echo(tabulate([[r["time"], r["unit"], r["path"], r["rule"], r["action"], r.get("done") or "-"] for r in rows],
                        headers=["TIME", "UNIT", "PATH", "RULE", "ACTION", "DONE"]))


@click.command()
@pass_app
def check(app: AppContext) -> None:
    """Validate every unit file without starting anything (exit 1 on errors)."""
    from ..config.units import load_units

    settings = app.settings
    specs, errors = load_units(settings.units_path, settings.project_root)
    for name, spec in specs.items():
        click.echo(f"ok     {name}: {' '.join(spec.agent.command)}")
    for err in errors:
        click.echo(f"error  {err}")
    if errors:
        sys.exit(1)


COMMANDS = (start, stop, status, restart, reload, reset_failed, send, attach, logs, checkpoint, history, notify, violations, check)
