"""``agentd trust UNIT``: trust a Codex unit's workdir in its CODEX_HOME, with the person's consent.

Codex 0.169.0 asks "Trust this folder?" for a workdir inside a git
repository unless its ``config.toml`` has ``[projects."<workdir>"]
trust_level = "trusted"``; the ``-c`` override agentd passes is ignored there.
agentd never writes the person's config behind their back: this command shows
what it will add and asks (``--yes`` to skip the question).
"""

from __future__ import annotations

import os
import sys

import click

from .context import AppContext, pass_app


@click.command(epilog="""\b
Examples:
  agentd trust api              # shows the entry, asks, then adds it
  agentd trust api --yes        # for scripts""")
@click.argument("unit")
@click.option("--yes", is_flag=True, help="add the entry without asking")
@pass_app
def trust(app: AppContext, unit: str, yes: bool) -> None:
    """Trust UNIT's workdir in its CODEX_HOME (a Codex unit), so Codex starts without its trust screen."""
    from ..adapters import make_adapter
    from ..adapters.codex import CodexAdapter, trust_workdir
    from ..config.units import UnitLoadError, load_unit

    settings = app.settings
    try:
        spec = load_unit(settings.units_path, unit)
    except (UnitLoadError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    adapter = make_adapter(spec, settings)
    if not isinstance(adapter, CodexAdapter):
        raise click.ClickException(f"unit {unit!r} is kind {spec.agent.kind!r}: only Codex units need this")
    home = adapter.codex_home({**os.environ, **spec.agent.env})
    config, workdir = home / "config.toml", adapter.workdir()
    if not yes:
        click.echo(f"agentd will add to {config}:\n\n  [projects.\"{workdir}\"]\n  trust_level = \"trusted\"\n")
        if not click.confirm("Trust this folder for Codex?", default=False):
            click.echo("nothing written")
            sys.exit(1)
    try:
        added = trust_workdir(config, workdir)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{'trusted' if added else 'already trusted'}: {workdir} in {config}")
