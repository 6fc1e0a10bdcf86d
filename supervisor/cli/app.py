"""The ``agentd`` command group: global options, then the daemon and memory commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .context import AppContext

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(path_type=Path), help="settings file (default: etc/agentd.toml)")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), help="project root (default: cwd)")
@click.pass_context
def cli(ctx: click.Context, config: Path | None, root: Path | None) -> None:
    """agentd: supervise AI coding agents whose state can be rebuilt."""
    ctx.obj = AppContext(config, root)




def _register() -> None:
    from . import commands, memory

    for command in commands.COMMANDS:
        cli.add_command(command)
    memory.register(cli)


_register()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="agentd")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
