"""The ``agentd`` command line: parse, call the library or the control client, render.

Daemon commands live here; the memory commands (decide, note, fact, recall,
wakeup, init, ...) live in :mod:`supervisor.cli_memory` and are registered on
the same group.  Nothing here holds policy.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .paths import DEFAULT_STATE_DIR, PlainPaths, file_root, find_config

if TYPE_CHECKING:  # pragma: no cover
    from .settings import Settings

# Importing pydantic-settings and building the model costs ~0.25 s, most of
# a short command such as `agentd status`; such commands only need the
# state directory's paths, which _quick_paths() computes the same way when
# nothing but plain, valid values is configured (else the full settings).
_PLAIN_KEYS = {"project_root": str, "state_dir": str, "units_dir": str, "log_format": ("json", "console"),
               "log_level": ("debug", "info", "warning", "error"), "stop_timeout": float, "start_timeout": float,
               "status_interval": float}


def _plain(key: str, value: Any) -> bool:
    kind = _PLAIN_KEYS.get(key)
    if kind is str:
        return isinstance(value, str) and value != ""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return isinstance(kind, tuple) and value in kind


def _quick_paths(config: Path | None, root: Path | None) -> PlainPaths | None:
    """The paths without pydantic when the configuration is plain (None: load the full settings).

    Mirrors :func:`supervisor.settings.load_settings`: the config file is
    ``config``, else ``$AGENTD_CONFIG``, else ``etc/agentd.toml`` when it
    exists; a relative ``project_root`` in it is relative to the file's
    project.  Anything else (other ``AGENTD_*`` variables, an unreadable
    file, unknown keys, values that need conversion) takes the full path,
    which also reports every error exactly as before.
    """
    if any(k.startswith("AGENTD_") and k != "AGENTD_CONFIG" for k in os.environ):
        return None
    path = find_config(config)
    data: dict[str, Any] = {}
    if path is not None:
        import tomllib

        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except (OSError, ValueError):
            return None
        if not all(_plain(k, v) for k, v in data.items()):
            return None
    if root is not None:
        project_root = root
    elif "project_root" in data and path is not None:
        project_root = file_root(data["project_root"], path)
    else:
        project_root = Path.cwd()
    return PlainPaths(project_root.expanduser().resolve(), Path(data.get("state_dir", DEFAULT_STATE_DIR)),
                      Path(data.get("units_dir", "units")))


class AppContext:
    """Lazily loaded settings shared by every subcommand."""

    def __init__(self, config: Path | None, root: Path | None) -> None:
        self.config_path = config
        self._config = config
        self._root = root
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from .settings import SettingsError, load_settings

            try:
                self._settings = load_settings(self._config, project_root=self._root)
            except SettingsError as exc:
                raise click.ClickException(str(exc)) from None
        return self._settings

    @property
    def paths(self) -> Settings | PlainPaths:
        """pidfile and socket_path, without loading the full settings when they are plain."""
        if self._settings is not None:
            return self._settings
        return _quick_paths(self._config, self._root) or self.settings


pass_app = click.make_pass_decorator(AppContext)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(path_type=Path), help="settings file (default: etc/agentd.toml)")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), help="project root (default: cwd)")
@click.pass_context
def cli(ctx: click.Context, config: Path | None, root: Path | None) -> None:
    """agentd: supervise AI coding agents whose state can be rebuilt."""
    ctx.obj = AppContext(config, root)



# ---------------------------------------------------------------- helpers
def _fmt_duration(seconds: float | None) -> str:
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


def _fmt_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "K", "M", "G"):
        if value < 1024 or unit == "G":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}G"


def _fmt_count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


#: Seconds a command waits for the socket of a daemon that is starting (pidfile held, no socket yet).
STARTING_GRACE = 15.0


def _client_call(settings: Settings | PlainPaths, cmd: str, timeout: float | None = 30.0, **args: object) -> object:
    from .client import ControlError, DaemonNotRunning, call

    import time

    deadline = time.monotonic() + STARTING_GRACE
    while True:
        try:
            return call(settings.socket_path, cmd, timeout=timeout, **args)
        except DaemonNotRunning as exc:
            # A daemon that holds the pidfile but has no socket yet is still starting.
            if time.monotonic() < deadline and _running(settings):
                time.sleep(0.05)
                continue
            raise click.ClickException(str(exc)) from None
        except ControlError as exc:
            raise click.ClickException(str(exc)) from None
        except PermissionError as exc:
            raise click.ClickException(
                f"cannot reach {settings.socket_path}: {exc.strerror} (not the daemon's owner?)"
            ) from None


def _running(settings: Settings | PlainPaths) -> bool:
    from .pidfile import is_locked

    return is_locked(settings.pidfile)


def _units_arg(units: tuple[str, ...]) -> list[str] | None:
    return list(units) or None


def _print_result(result: object) -> None:
    if isinstance(result, dict):
        for key, value in result.items():
            click.echo(f"{key}: {value}")


# ---------------------------------------------------------------- daemon commands
@cli.command()
@click.argument("units", nargs=-1)
@click.option("--foreground", is_flag=True, help="stay in the foreground (for systemd: Type=notify)")
@click.option("--detached", is_flag=True, hidden=True)
@pass_app
def start(app: AppContext, units: tuple[str, ...], foreground: bool, detached: bool) -> None:
    """Start the daemon (if needed) and UNITS (default: every enabled unit)."""
    settings = app.settings
    if foreground:
        from .daemon import run_daemon
        from .pidfile import AlreadyRunning

        try:
            code = run_daemon(settings, console=not detached)
        except AlreadyRunning as exc:
            raise click.ClickException(str(exc)) from None
        sys.exit(code)
    if _running(settings):
        _print_result(_client_call(settings, "start", timeout=None, units=_units_arg(units)))
        return
    from .daemonize import DaemonStartError, spawn_daemon

    try:
        pid = spawn_daemon(settings, app.config_path)
    except DaemonStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"agentd started (pid {pid}, project {settings.project_root})")
    if units:
        _print_result(_client_call(settings, "start", timeout=None, units=list(units)))


@cli.command()
@click.argument("units", nargs=-1)
@click.option("--now", is_flag=True, help="skip the checkpoint (stop at once)")
@pass_app
def stop(app: AppContext, units: tuple[str, ...], now: bool) -> None:
    """Stop UNITS, or every unit and then the daemon."""
    settings = app.settings
    if not _running(settings):
        click.echo("agentd is not running")
        return
    if units:
        _print_result(_client_call(settings, "stop", timeout=None, units=list(units), now=now))
        return
    from .daemonize import wait_stopped
    from .pidfile import read_pidfile

    daemon = read_pidfile(settings.pidfile)
    _client_call(settings, "shutdown", timeout=None, now=now)
    if not wait_stopped(settings, timeout=60.0, daemon=daemon):
        raise click.ClickException("agentd did not exit within 60s after stopping its units")
    click.echo("agentd stopped")


@cli.command()
@click.argument("units", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@pass_app
def status(app: AppContext, units: tuple[str, ...], as_json: bool) -> None:
    """Show units: state, pid, uptime, restarts, last exit, CPU and memory.

    Exit code (LSB): 0 when running (every named unit running), 3 when not.
    """
    import json

    settings = app.paths
    if not _running(settings):
        if as_json:
            click.echo(json.dumps({"daemon": None, "units": []}))
        else:
            click.echo("agentd is not running")
        sys.exit(3)
    result = _client_call(settings, "status", units=_units_arg(units))
    assert isinstance(result, dict)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(render_status(result))
    if units and any(row["state"] != "running" for row in result["units"]):
        sys.exit(3)


def render_status(result: dict) -> str:
    from tabulate import tabulate

    daemon = result["daemon"]
    head = f"agentd {daemon['version']} pid {daemon['pid']} up {_fmt_duration(daemon['uptime'])} — {daemon['project_root']}"
    rows = []
    for row in result["units"]:
        note = row.get("activity") or row.get("reason") or ""
        if row.get("next_restart_in") is not None:
            note = f"restart in {row['next_restart_in']:.0f}s; {note}"
        if row.get("queued_sends"):
            note = f"{row['queued_sends']} queued; {note}"
        if row.get("violations"):
            note = f"{row['violations']} violation(s); {note}"
        sched = row.get("schedule") or {}
        nexts = [f"next {k} {v[:19].replace('T', ' ')}" for k, v in sched.items() if v]
        if nexts:
            note = "; ".join([*nexts, note]) if note else "; ".join(nexts)
        ctx = row.get("context")
        context = "-"
        if ctx:
            approx = "" if ctx["exact"] else "~"
            context = f"{approx}{_fmt_count(ctx['used'])}/{_fmt_count(ctx['window'])} {ctx['ratio'] * 100:.0f}%"
        last = row.get("last_checkpoint")
        if last:
            ratio = f" {last['ratio'] * 100:.1f}%" if last.get("ratio") is not None else ""
            note = f"{note}; last checkpoint {last['trigger']} {last['flush']}{ratio}".lstrip("; ")
        rows.append(
            [
                row["unit"],
                row["state"],
                row["pid"] or "-",
                _fmt_duration(row["uptime"]),
                row["restarts"],
                row["last_exit"] or "-",
                "-" if row["cpu_seconds"] is None else f"{row['cpu_seconds']:.1f}s",
                _fmt_bytes(row["rss_bytes"]),
                context,
                note,
            ]
        )
    table = tabulate(rows, headers=["UNIT", "STATE", "PID", "UPTIME", "RESTARTS", "LAST EXIT", "CPU", "RSS", "CONTEXT", "NOTE"])
    lines = [head, table if rows else "(no units)"]
    for err in result.get("errors", []):
        lines.append(f"error: {err}")
    return "\n".join(lines)


@cli.command()
@click.argument("units", nargs=-1)
@click.option("--now", is_flag=True, help="skip the checkpoint (restart at once)")
@pass_app
def restart(app: AppContext, units: tuple[str, ...], now: bool) -> None:
    """Restart UNITS (default: every active or enabled unit)."""
    settings = app.settings
    if not _running(settings):
        raise click.ClickException("agentd is not running (use `agentd start`)")
    _print_result(_client_call(settings, "restart", timeout=None, units=_units_arg(units), now=now))


@cli.command()
@pass_app
def reload(app: AppContext) -> None:
    """Re-read unit files: start new, stop removed, restart changed, keep the rest."""
    settings = app.settings
    if not _running(settings):
        raise click.ClickException("agentd is not running (use `agentd start`)")
    report = _client_call(settings, "reload", timeout=None)
    assert isinstance(report, dict)
    for key in ("started", "stopped", "restarted", "kept"):
        click.echo(f"{key}: {', '.join(report[key]) or '-'}")
    for err in report.get("errors", []):
        click.echo(f"error: {err}", err=True)


@cli.command("reset-failed")
@click.argument("units", nargs=-1)
@pass_app
def reset_failed(app: AppContext, units: tuple[str, ...]) -> None:
    """Clear the failed state of UNITS (and start them if enabled)."""
    _print_result(_client_call(app.settings, "reset-failed", units=_units_arg(units)))


@cli.command()
@click.argument("unit")
@click.argument("text")
@click.option("--no-enter", is_flag=True, help="do not press Enter after the text")
@pass_app
def send(app: AppContext, unit: str, text: str, no_enter: bool) -> None:
    """Type TEXT (plus Enter) into UNIT's agent."""
    result = _client_call(app.settings, "send", unit=unit, text=text, enter=not no_enter)
    assert isinstance(result, dict)
    if result.get("delivered") == "queued":
        click.echo(f"queued (position {result['position']}): {result['note']}")
    else:
        click.echo(f"typed into {unit} ({result['bytes']} bytes)")


@cli.command()
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


@cli.command()
@click.argument("unit")
@click.option("-n", "lines", default=40, show_default=True, help="lines to show")
@click.option("-f", "follow", is_flag=True, help="keep printing new output")
@click.option("--raw", is_flag=True, help="the raw transcript (with terminal escapes)")
@pass_app
def logs(app: AppContext, unit: str, lines: int, follow: bool, raw: bool) -> None:
    """Show UNIT's transcript (clean text of the newest session)."""
    from .transcript import follow_clean, read_clean_tail
    from .units import valid_name

    if not valid_name(unit):
        raise click.ClickException(f"unit name {unit!r} is not valid")
    directory = app.settings.transcripts_path / unit
    suffix = ".log" if raw else ".txt"
    files = sorted(directory.glob(f"*{suffix}")) if directory.is_dir() else []
    if not files:
        raise click.ClickException(f"no transcript for unit {unit!r} under {directory}")
    path = files[-1]
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
        for chunk in follow_clean(path, should_stop=lambda: False, lines=lines):
            click.echo(chunk, nl=False)
    except KeyboardInterrupt:
        pass


@cli.command()
@click.argument("unit")
@pass_app
def checkpoint(app: AppContext, unit: str) -> None:
    """Run a checkpoint cycle on UNIT now: prompt, verify the flush, fresh session with the wakeup."""
    record = _client_call(app.settings, "checkpoint", timeout=None, unit=unit)
    assert isinstance(record, dict)
    click.echo(render_history([record]))


@cli.command()
@click.argument("unit")
@click.option("-n", "count", default=20, show_default=True, help="cycles to show")
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
@pass_app
def history(app: AppContext, unit: str, count: int, as_json: bool) -> None:
    """Show UNIT's checkpoint cycles: trigger, tokens before, wakeup tokens, ratio, flush, step times."""
    import json

    from .checkpoint import read_history
    from .units import valid_name

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


def render_history(records: list[dict]) -> str:
    from tabulate import tabulate

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
    return tabulate(rows, headers=["STARTED", "TRIGGER", "TOKENS BEFORE", "WAKEUP", "RATIO", "FLUSH", "OUTCOME", "SESSIONS", "STEPS"])


@cli.command()
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

    from .client import call

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


@cli.command()
@click.argument("unit", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
@pass_app
def violations(app: AppContext, unit: str | None, as_json: bool) -> None:
    """Scope violations seen by the scope guard (all units, or UNIT)."""
    import json

    from tabulate import tabulate

    path = app.settings.state_path / "violations.jsonl"
    rows = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if unit is None or rec.get("unit") == unit:
            rows.append(rec)
    if as_json:
        for rec in rows:
            click.echo(json.dumps(rec))
        return
    if not rows:
        click.echo("no violations")
        return
    click.echo(tabulate([[r["time"], r["unit"], r["path"], r["rule"], r["action"], r.get("done") or "-"] for r in rows],
                        headers=["TIME", "UNIT", "PATH", "RULE", "ACTION", "DONE"]))


@cli.command()
@pass_app
def check(app: AppContext) -> None:
    """Validate every unit file without starting anything (exit 1 on errors)."""
    from .units import load_units

    settings = app.settings
    specs, errors = load_units(settings.units_path, settings.project_root)
    for name, spec in specs.items():
        click.echo(f"ok     {name}: {' '.join(spec.agent.command)}")
    for err in errors:
        click.echo(f"error  {err}")
    if errors:
        sys.exit(1)


def _register() -> None:
    from . import cli_memory

    cli_memory.register(cli)


_register()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="agentd")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
