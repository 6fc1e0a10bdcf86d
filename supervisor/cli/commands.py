"""The daemon's commands: start, stop, status, restart, reload, send, attach, history, ... (`logs`: :mod:`.logs`)

Each parses its arguments, asks the daemon through the control client (or
reads the state directory), and renders.  Policy lives in the daemon.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .context import AppContext, client_call, daemon_running, pass_app, print_result, units_arg
from .progress import (INTERRUPTED, announce, checkpointing, interrupted, narrated_checkpoint, progress_of,
                       said_at_the_end)
from .render import render_reload, render_status

def _refuse_without_units(app: AppContext) -> None:
    """``start`` in a place with nothing to supervise refuses, and says how to make a unit."""
    from .project import units_problem

    problem = units_problem(app.paths, app.where)
    if problem:
        raise click.ClickException(f"not starting: {problem}")


@click.command(epilog="""\b
Examples:
  agentd start                  # the daemon and every enabled unit
  agentd start api web          # these units (and the daemon if it is not running)
  agentd start --foreground     # under systemd (Type=notify), see the README""")
@click.argument("units", nargs=-1)
@click.option("--foreground", is_flag=True, help="stay in the foreground (for systemd: Type=notify)")
@click.option("--detached", is_flag=True, hidden=True)
@pass_app
def start(app: AppContext, units: tuple[str, ...], foreground: bool, detached: bool) -> None:
    """Start the daemon (if needed) and UNITS (default: every enabled unit).

    Refuses when the project has no unit file (`agentd init` writes an example).
    """
    settings = app.settings if foreground else app.paths  # a daemon in this process needs them all
    if foreground or not daemon_running(settings):
        _refuse_without_units(app)
    if foreground:
        from ..daemon.daemonize import run_daemon
        from ..daemon.pidfile import AlreadyRunning
        from ..web.host import dashboard

        try:
            code = run_daemon(settings, console=not detached, dashboard=dashboard)
        except AlreadyRunning as exc:
            raise click.ClickException(str(exc)) from None
        sys.exit(code)
    if daemon_running(settings):
        print_result(warned(client_call(settings, "start", timeout=None, units=units_arg(units))))
        return
    from ..daemon.daemonize import DaemonStartError, spawn_daemon

    try:
        pid = spawn_daemon(settings, app.config_path)
    except DaemonStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"agentd started (pid {pid}, project {settings.project_root})")
    if units:
        print_result(warned(client_call(settings, "start", timeout=None, units=list(units))))
    _exit_on_refusals(client_call(settings, "status"))


def warned(result: object) -> object:
    """Say the daemon's warnings (a unit file that changed or no longer loads) on stderr; the rest."""
    if isinstance(result, dict) and "warnings" in result:
        result = dict(result)
        for line in result.pop("warnings") or ():
            click.echo(f"warning: {line}", err=True)
    return result


def _exit_on_refusals(report: object) -> None:
    """Each refused unit file with its reason, and exit 1 when there is one (start, reload)."""
    errors = report.get("errors", []) if isinstance(report, dict) else []
    for err in errors:
        click.echo(f"refused: {err}", err=True)
    if errors:
        sys.exit(1)


@click.command(epilog="""\b
Examples:
  agentd stop                   # checkpoint every running unit, stop it, then the daemon
  agentd stop web --now         # stop one unit at once, without the checkpoint""")
@click.argument("units", nargs=-1)
@click.option("--now", is_flag=True, help="skip the checkpoint (stop at once)")
@pass_app
def stop(app: AppContext, units: tuple[str, ...], now: bool) -> None:
    """Stop UNITS, or every unit and then the daemon.

    A graceful stop checkpoints each running agent first.  Ctrl-C stops
    waiting, not the daemon: it goes on stopping (exit code 130).
    """
    settings = app.paths
    if not daemon_running(settings):
        click.echo("agentd is not running")
        return
    progress = progress_of(app, units, now)
    try:
        if not now:
            announce("stop", *checkpointing(app, units, daemon=not units))
        if units:
            with progress:
                result = client_call(settings, "stop", timeout=None, units=list(units), now=now)
            print_result(result)
            return
        from ..daemon.daemonize import wait_stopped
        from ..daemon.pidfile import read_pidfile

        daemon = read_pidfile(settings.pidfile)
        try:
            with progress:
                result = client_call(settings, "shutdown", timeout=None, now=now)
            said_at_the_end(progress, result)
        except click.ClickException:
            if daemon_running(settings):  # a daemon that went away while answering has stopped
                raise
        if not wait_stopped(settings, timeout=60.0, daemon=daemon):
            raise click.ClickException("agentd did not exit within 60s after stopping its units")
    except KeyboardInterrupt:
        interrupted("stop", units, now, progress.doing())
    click.echo("agentd stopped")


@click.command(epilog="""\b
Examples:
  agentd status                 # every unit
  agentd status web --json      # one unit, machine-readable (exit 3 unless it runs)
  agentd status --full          # every note whole, wrapped below the table
  agentd status --fleet         # this daemon's units and its [fleet] peers' (docs/fleet.md)""")
@click.argument("units", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="one JSON object: the daemon, its units, refused unit files")
@click.option("--full", "-l", is_flag=True, help="no NOTE column: each unit's notes below the table, whole and wrapped")
@click.option("--fleet", is_flag=True, help="also the units of the [fleet] peers, with their host (exit 3 if one does not answer)")
@pass_app
def status(app: AppContext, units: tuple[str, ...], as_json: bool, full: bool, fleet: bool) -> None:
    """Show units: state, pid, uptime, crashes and cycles, last exit, CPU, memory, context, and a NOTE.
    CRASHES counts sessions that ended on their own; CYCLES the planned continuity cycles (not restarts);
    a LAST EXIT agentd caused says `planned`.  NOTE puts what to do first (a blocking screen, a freeze,
    why it failed); on a narrow terminal it is cut, and what to do is repeated whole below.

    Exit code (LSB): 0 when running (every named unit running), 3 when not.
    """
    import json

    if fleet:
        from .fleet import status_fleet

        if units:
            raise click.UsageError("--fleet shows every unit of every host: name no unit")
        sys.exit(status_fleet(app.settings, as_json))
    settings = app.paths
    if not daemon_running(settings):
        click.echo(json.dumps({"daemon": None, "units": []}) if as_json else "agentd is not running")
        sys.exit(3)
    result = client_call(settings, "status", units=units_arg(units))
    assert isinstance(result, dict)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        from .style import colour_on, width

        click.echo(render_status(result, colour=colour_on(), limit=width(), full=full))
    if units and any(row["state"] != "running" for row in result["units"]):
        sys.exit(3)


@click.command(epilog="""\b
Examples:
  agentd restart web            # a fresh session through a checkpoint
  agentd restart --now          # every unit at once, no checkpoint""")
@click.argument("units", nargs=-1)
@click.option("--now", is_flag=True, help="skip the checkpoint (restart at once)")
@pass_app
def restart(app: AppContext, units: tuple[str, ...], now: bool) -> None:
    """Restart UNITS (default: every active or enabled unit).

    Ctrl-C stops waiting, not the daemon: it goes on restarting (exit code 130).
    """
    settings = app.paths
    if not daemon_running(settings):
        raise click.ClickException("agentd is not running (use `agentd start`)")
    progress = progress_of(app, units, now)
    try:
        if not now:
            announce("restart", *checkpointing(app, units))
        with progress:
            result = client_call(settings, "restart", timeout=None, units=units_arg(units), now=now)
        print_result(warned(result))
    except KeyboardInterrupt:
        interrupted("restart", units, now, progress.doing())


@click.command(epilog="""\b
Examples:
  agentd reload                 # after editing units/*.toml
  systemctl reload agentd       # the same under systemd (ExecReload)""")
@pass_app
def reload(app: AppContext) -> None:
    """Re-read unit files: start new, stop removed, restart changed, keep the rest."""
    settings = app.paths
    if not daemon_running(settings):
        raise click.ClickException("agentd is not running (use `agentd start`)")
    progress = progress_of(app, ())
    try:
        with progress:
            report = client_call(settings, "reload", timeout=None)
    except KeyboardInterrupt:
        click.echo("\nagentd reload: interrupted. The daemon goes on with the reload (units changed or removed "
                   "are checkpointed first); `agentd status` shows where it is.", err=True)
        for line in progress.doing():
            click.echo(f"  now: {line}", err=True)
        sys.exit(INTERRUPTED)
    assert isinstance(report, dict)
    click.echo(render_reload(report))
    _exit_on_refusals(report)


@click.command("reset-failed", epilog="""\b
Examples:
  agentd reset-failed web       # after fixing why web crash-looped""")
@click.argument("units", nargs=-1)
@pass_app
def reset_failed(app: AppContext, units: tuple[str, ...]) -> None:
    """Clear the failed state of UNITS (and start them if enabled)."""
    print_result(client_call(app.paths, "reset-failed", units=units_arg(units)))


@click.command(epilog="""\b
Examples:
  agentd send web "run the tests and fix what fails"
  agentd send web --no-enter "draft"   # typed, not submitted
  agentd send web --raw $'\\x03'        # control keys, exactly as given (here Ctrl-C)
  agentd send web - < plan.md          # TEXT from stdin (beyond the command line's ~128 KiB)""")
@click.argument("unit")
@click.argument("text")
@click.option("--no-enter", is_flag=True, help="do not press Enter after the text")
@click.option("--raw", is_flag=True, help="type TEXT exactly, control characters included, and no Enter")
@pass_app
def send(app: AppContext, unit: str, text: str, no_enter: bool, raw: bool) -> None:
    """Type TEXT (plus Enter) into UNIT's agent; TEXT `-` reads it from stdin (UTF-8).

    Control characters, escape sequences and paste delimiters in TEXT are
    removed, and several lines go in as one bracketed paste, so what is typed
    is one message and never a key press; --raw is the one way to type keys.
    """
    if text == "-":
        text = _stdin_text()
    result = client_call(app.paths, "send", unit=unit, text=text, enter=not (no_enter or raw), raw=raw)
    assert isinstance(result, dict)
    if result.get("delivered") == "queued":
        click.echo(f"queued (position {result['position']}): {result['note']}")
    else:
        click.echo(f"typed into {unit} ({result['bytes']} bytes)")


#: The most ``send -`` reads from stdin: what fits in one control message with room for the rest of it.
STDIN_MAX = 900_000


def _stdin_text() -> str:
    """TEXT for ``send -``: all of stdin, as UTF-8; a clear error when it is too long or not text."""
    data = sys.stdin.buffer.read(STDIN_MAX + 1)
    if len(data) > STDIN_MAX:
        raise click.ClickException(f"send -: stdin holds more than {STDIN_MAX} bytes, the most one message carries; "
                                   "send it in parts, or point the agent at a file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"send -: stdin is not UTF-8 text (byte {exc.start}): {exc.reason}") from None
    if not text.strip():
        raise click.ClickException("send -: stdin is empty: nothing to type")
    return text


@click.command(epilog="""\b
Examples:
  agentd attach web             # the live terminal; Ctrl-] detaches
  agentd attach web --read-only # watch without typing""")
@click.argument("unit")
@click.option("--read-only", is_flag=True, help="watch only: typed keys are not sent (Ctrl-] still detaches)")
@click.option("--raw", is_flag=True, help="the unredacted stream: secrets the agent prints are shown (warns)")
@pass_app
def attach(app: AppContext, unit: str, read_only: bool, raw: bool) -> None:
    """Relay UNIT's live session to this terminal; detach with Ctrl-] (0x1d).

    The stream is redacted like the transcript: secrets the agent prints show
    as [REDACTED], and a possible secret appears once its token has ended.
    --raw shows the bytes as the agent wrote them, after a warning.  The
    daemon keeps recording the transcript.  When the session ends or is
    replaced, the next one is followed if it starts within a few seconds.
    Exit code: 0 after detaching, 3 when the session ended with no successor,
    1 on errors.
    """
    from .attach import RAW_WARNING, AttachError, run_attach

    if raw:
        click.echo(RAW_WARNING, err=True)
    try:
        code = run_attach(app.paths.socket_path, unit, read_only, raw=raw)
    except AttachError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


@click.command(epilog="""\b
Examples:
  agentd checkpoint web         # notes written, then a fresh session with the wakeup""")
@click.argument("unit")
@pass_app
def checkpoint(app: AppContext, unit: str) -> None:
    """Run a checkpoint cycle on UNIT now: prompt, verify the flush, fresh session with the wakeup.

    Exit code 1 when the cycle failed: its notes could not be written (the session is kept), or it did
    not run, or no fresh session started.
    """
    record = narrated_checkpoint(app, unit)  # what it waits for, as it happens (on stderr)
    from .timeline import render_timeline

    assert isinstance(record, dict)
    click.echo(render_timeline([record]))
    outcome = str(record.get("outcome") or "")
    if record.get("flush") == "failed" or outcome.startswith(("failed", "not run", "kept the session")):
        click.echo(f"agentd checkpoint: the cycle failed: {outcome or record.get('flush')}", err=True)
        sys.exit(1)


@click.command(epilog="""\b
Examples (what the agents' hooks run, not people):
  agentd notify --unit web '{"type": "agent-turn-complete"}'
  echo '{"hook_event_name": "Stop"}' | agentd notify""")
@click.option("--unit", "unit_name", envvar="AGENTD_UNIT", required=True, help="the unit (default: $AGENTD_UNIT)")
@click.argument("payload", required=False)
def notify(unit_name: str, payload: str | None) -> None:
    """Forward an event from the agent (Codex notify, Claude Code hooks) to the daemon.

    PAYLOAD is the event as JSON (Codex passes it as the last argument); without
    it the JSON is read from stdin (hooks).  Anything the daemon answers for the
    agent (a hook's output) is printed.  Never fails the agent: problems go to
    stderr and the exit code stays 0.
    """
    import os

    from .notify import forward

    socket_path = os.environ.get("AGENTD_SOCKET")
    try:
        path = Path(socket_path) if socket_path else click.get_current_context().find_object(AppContext).paths.socket_path
    except Exception as exc:  # noqa: BLE001 - an agent's hook must never break on agentd
        click.echo(f"agentd notify: {exc}", err=True)
        return
    output, problem = forward(unit_name, payload if payload is not None else sys.stdin.read(), path)
    if problem:
        click.echo(problem, err=True)
    if output:
        click.echo(output)


@click.command(epilog="""\b
Examples:
  agentd check                  # before `agentd start` or `agentd reload`
  agentd --project ~/src/app check""")
@pass_app
def check(app: AppContext) -> None:
    """Validate every unit file and the rules between units, without starting anything.

    It refuses exactly what `agentd start` and `agentd reload` refuse (exit 1 on errors, or when there is
    no unit).  It also warns about units that load but will misbehave: an interactive shell or REPL as the
    agent, checkpoint deadlines longer than the stop timeout agentd runs under (systemd's TimeoutStopSec,
    via $TIMEOUT_STOP_USEC or the service_stop_timeout setting), an agent's own sandbox bypassed without
    agentd's fence, a Codex workdir its CODEX_HOME does not trust, a Codex or Claude agent with no login
    or key (or the example's placeholder key; read from files, no network), and (with the daemon
    running) a [context] window that disagrees with the agent's own.
    """
    from ..adapters.checks import agent_warnings
    from ..config.check import load_project_units
    from ..config.runnable import own_launcher
    from ..config.stopbudget import stop_budget, stop_problem
    from ..config.unit_warnings import unit_warnings
    from .doctor_env import service_stop_limit
    from .project import units_problem

    settings = app.settings
    problem = units_problem(settings, app.where)
    if problem:
        click.echo(f"error  {problem}")
        sys.exit(1)
    specs, errors = load_project_units(settings.units_path, settings.project_root)
    for name, spec in specs.items():
        click.echo(f"ok     {name}: {' '.join(spec.agent.command)}")
        for warning in [*unit_warnings(spec, settings.stop_timeout), *agent_warnings(spec, settings),
                        *filter(None, [own_launcher(spec, settings.project_root)])]:
            click.echo(f"warn   {name}: {warning}")
    if daemon_running(settings):  # a window the agent reported that disagrees with the unit's
        rows = (client_call(settings, "status") or {}).get("units", [])  # type: ignore[union-attr]
        for row in rows:
            warning = (row.get("context") or {}).get("window_warning")
            if warning:
                click.echo(f"warn   {row['unit']}: {warning}")
    try:
        limit = service_stop_limit(settings, os.environ)
    except ValueError as exc:
        click.echo(f"warn   {exc}")
        limit = None
    too_long = stop_problem(stop_budget(specs, settings.stop_timeout), limit) if limit is not None else None
    if too_long:
        click.echo(f"warn   {too_long}")
    for err in errors:
        click.echo(f"error  {err}")
    from .plan import check_plans

    if check_plans(settings, specs, errors) or errors:  # plans/*.toml, checked with the units
        sys.exit(1)


COMMANDS = (start, stop, status, restart, reload, reset_failed, send, attach, checkpoint, notify, check)
