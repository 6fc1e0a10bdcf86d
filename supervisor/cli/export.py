"""Let another engine own each agent: ``agentd export systemd UNIT``, ``agentd run-unit UNIT``, ``agentd export k8s``.

``export systemd UNIT`` prints a systemd service for one unit: systemd starts
``agentd run-unit UNIT --foreground``, a daemon of its own that loads only that
unit (the ``only_units`` setting) and keeps its state apart
(``<state_dir>/run-unit/UNIT``: its pidfile, socket, log, transcripts), so that
several such services and the project's own daemon never share a pidfile or
an ``agents.json``.  ``Restart=``, ``RestartSec=``, the start limits and
``TimeoutStopSec=`` come from the unit file; ``TimeoutStopSec=`` follows the
rule of :mod:`supervisor.config.stopbudget`.  ``export k8s`` (Kubernetes, one pod
per module) lives in :mod:`.export_k8s`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .context import AppContext, pass_app
from .export_k8s import export_k8s

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.units import UnitSpec

#: agentd's restart policy -> systemd's Restart=.
RESTART = {"no": "no", "on-failure": "on-failure", "always": "always"}


def agentd_argv() -> list[str]:
    """How to run this agentd: the console script beside the interpreter, else ``python -m supervisor``."""
    script = Path(sys.executable).parent / "agentd"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "supervisor"]


def systemd_quote(arg: str) -> str:
    """One word of an ``Exec*=`` or ``Environment=`` line: specifiers and variables escaped, quoted when needed."""
    if "\n" in arg:
        raise ValueError(f"{arg!r}: a newline cannot be written into a unit file")
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and not re.search(r"[\s\"'\\;]", arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path_value(path: Path) -> str:
    """A path setting (``WorkingDirectory=``): specifiers escaped, no quoting."""
    text = str(path)
    if "\n" in text:
        raise ValueError(f"{text!r}: a newline cannot be written into a unit file")
    return text.replace("%", "%%")


def service_name(unit: str) -> str:
    return f"agentd-{unit}.service"


def man_page_installed(environ: Mapping[str, str]) -> bool:
    """agentd(1) is where ``man`` looks ($MANPATH, else the usual places and this Python's prefix): pip does
    not install it, and ``systemd-analyze verify`` fails on a ``Documentation=man:`` it cannot find."""
    dirs = [d for d in environ.get("MANPATH", "").split(":") if d]
    if not dirs or environ.get("MANPATH", "").endswith(":") or "::" in environ.get("MANPATH", ""):
        dirs += ["/usr/local/share/man", "/usr/share/man", "/usr/local/man", f"{sys.prefix}/share/man"]
    return any((Path(d) / "man1" / name).is_file() for d in dirs for name in ("agentd.1", "agentd.1.gz"))


def render_service(spec: UnitSpec, settings: Settings, argv: list[str], config: Path | None = None,
                   user: bool = False, environ: Mapping[str, str] | None = None) -> str:
    """The systemd service that runs ``spec`` alone under ``agentd run-unit`` (``environ``: where to look
    for the man page, default this process's)."""
    import os

    from ..config.stopbudget import STOP_ENV, stop_budget, timeout_stop_sec

    root = settings.project_root
    timeout = timeout_stop_sec(stop_budget({spec.name: spec}, settings.stop_timeout))
    command = [*argv, "--project", str(root), *(["--config", str(config)] if config else []),
               "run-unit", spec.name, "--foreground"]
    state = settings.run_unit_state(spec.name)
    manager = "--user " if user else ""
    target = (Path("~/.config/systemd/user") if user else Path("/etc/systemd/system")) / service_name(spec.name)
    after = [service_name(u) for u in (*spec.unit.after, *spec.unit.requires)]
    unit_lines = [f"Description=agentd unit {spec.name}" + (f": {spec.unit.description}" if spec.unit.description else "")]
    if man_page_installed(os.environ if environ is None else environ):
        unit_lines.append("Documentation=man:agentd(1)")
    if not user:
        unit_lines += ["After=network-online.target", "Wants=network-online.target"]
    if after:
        unit_lines.append("After=" + " ".join(dict.fromkeys(after)))
    if spec.unit.requires:
        unit_lines.append("Requires=" + " ".join(service_name(u) for u in spec.unit.requires))
    unit_lines += [f"StartLimitIntervalSec={spec.restart.interval:g}", f"StartLimitBurst={spec.restart.burst}"]
    service_lines = [
        "Type=notify",
        "NotifyAccess=main",
        f"WorkingDirectory={_path_value(root)}",
        f"Environment={systemd_quote(f'{STOP_ENV}={timeout * 1_000_000}')}",
        "ExecStart=" + " ".join(systemd_quote(a) for a in command),
        "ExecReload=/bin/kill -HUP $MAINPID",
        "# SIGTERM to agentd alone: it checkpoints and stops the agent itself; systemd's SIGKILL",
        "# after TimeoutStopSec= reaches everything left in the cgroup, the agent's own cgroup included.",
        "KillMode=mixed",
        "Delegate=yes",
        f"TimeoutStopSec={timeout}",
        f"Restart={RESTART[spec.restart.policy]}",
        f"RestartSec={spec.restart.initial_delay:g}",
        f"# systemd >= 254 backs off like the unit file: RestartSteps=8 RestartMaxDelaySec={spec.restart.max_delay:g}",
    ]
    deps = ""
    if after:
        deps = f"# It is ordered after {', '.join(dict.fromkeys(after))}: export those units too.\n"
    return (
        f"# agentd unit {spec.name!r} as its own systemd service (`agentd export systemd {'--user ' if user else ''}"
        f"{spec.name}`).\n"
        f"# Install:  agentd export systemd {'--user ' if user else ''}{spec.name} > {target}\n"
        f"#           systemctl {manager}daemon-reload && systemctl {manager}enable --now {service_name(spec.name)}\n"
        f"# Its daemon keeps its own state (socket, log, transcripts) in {state};\n"
        f"#   AGENTD_STATE_DIR={state} agentd status    (or: journalctl {manager}-u {service_name(spec.name)})\n"
        f"{deps}"
        "[Unit]\n" + "\n".join(unit_lines) + "\n\n"
        "[Service]\n" + "\n".join(service_lines) + "\n\n"
        "[Install]\n" + f"WantedBy={'default.target' if user else 'multi-user.target'}\n"
    )


def _load(app: AppContext, unit: str) -> UnitSpec:
    from ..config.units import UnitLoadError, load_unit

    try:
        return load_unit(app.settings.units_path, unit, app.settings.project_root)
    except (UnitLoadError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@click.group(epilog="""\b
Examples:
  agentd export systemd web > /etc/systemd/system/agentd-web.service
  agentd export systemd --user web > ~/.config/systemd/user/agentd-web.service
  agentd export k8s --image registry.example/agentd:1 > agentd.yaml""")
def export() -> None:
    """Print units as another engine's definitions (systemd services, Kubernetes manifests)."""


@export.command("systemd", epilog="""\b
Examples:
  agentd export systemd web > /etc/systemd/system/agentd-web.service
  systemctl daemon-reload && systemctl enable --now agentd-web""")
@click.argument("unit")
@click.option("--user", is_flag=True, help="for `systemctl --user` (WantedBy=default.target)")
@pass_app
def export_systemd(app: AppContext, unit: str, user: bool) -> None:
    """Print a systemd service that runs UNIT alone: `agentd run-unit UNIT --foreground`.

    Restart=, RestartSec=, the start limits and TimeoutStopSec= (checkpoint
    deadline + grace + stop_timeout + 15 s) come from the unit file.
    """
    spec = _load(app, unit)
    try:
        click.echo(render_service(spec, app.settings, agentd_argv(), app.config_path, user), nl=False)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


export.add_command(export_k8s)


@click.command("run-unit", epilog="""\b
Examples (what `agentd export systemd UNIT` has systemd run):
  agentd run-unit web --foreground
  AGENTD_STATE_DIR=.agentd/run-unit/web agentd status   # from another terminal""")
@click.argument("unit")
@click.option("--foreground", is_flag=True, help="required: the service manager owns this process")
@pass_app
def run_unit(app: AppContext, unit: str, foreground: bool) -> None:
    """Run UNIT alone under a daemon of its own, in the foreground (Type=notify).

    That daemon loads only UNIT and keeps its state in <state_dir>/run-unit/UNIT,
    apart from the project's daemon.  Use `agentd start UNIT` for the shared one.
    """
    if not foreground:
        raise click.UsageError("run-unit is for a service manager and runs in the foreground: add --foreground "
                               "(or use `agentd start UNIT` for the project's daemon)")
    _load(app, unit)
    settings = app.settings.model_copy(update={"only_units": (unit,), "state_dir": app.settings.run_unit_state(unit)})
    from ..daemon.daemonize import run_daemon
    from ..daemon.pidfile import AlreadyRunning
    from ..web.host import dashboard

    try:
        code = run_daemon(settings, console=True, dashboard=dashboard)
    except AlreadyRunning as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)
