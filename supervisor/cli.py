"""The ``agentd`` command line: parse, call the library or the control client, render.

Daemon commands live here; the memory commands (decide, note, fact, recall,
wakeup, init, ...) live in :mod:`supervisor.cli_memory` and are registered on
the same group.  Nothing here holds policy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .settings import Settings, SettingsError, load_settings


class AppContext:
    """Lazily loaded settings shared by every subcommand."""

    def __init__(self, config: Path | None, root: Path | None) -> None:
        self._config = config
        self._root = root
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(self._config, project_root=self._root)
            except SettingsError as exc:
                raise click.ClickException(str(exc)) from None
        return self._settings


pass_app = click.make_pass_decorator(AppContext)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(path_type=Path), help="settings file (default: etc/agentd.toml)")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), help="project root (default: cwd)")
@click.pass_context
def cli(ctx: click.Context, config: Path | None, root: Path | None) -> None:
    """agentd: supervise AI coding agents whose state can be rebuilt."""
    ctx.obj = AppContext(config, root)


def _register() -> None:
    from . import cli_memory

    cli_memory.register(cli)


_register()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="agentd")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
