"""The ``agentd`` command group: global options, then the daemon and memory commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import __version__
from .context import AppContext

#: Other supervisors' words for our commands (pm2's ls/list and monit, ps's habit): not listed in --help's
#: commands, but named in its epilog, and never suggested over a real command.
ALIASES = {"ls": "status", "list": "status", "ps": "status", "monit": "web"}


class AliasedGroup(click.Group):
    """A group that also answers to :data:`ALIASES` (``agentd ls`` runs ``agentd status``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in ALIASES:
            return super().get_command(ctx, ALIASES[cmd_name])
        return found


@click.group(cls=AliasedGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog="""\b
Examples:
  agentd init && agentd start   # a new project: .agent/, units/example.toml, the daemon
  agentd status                 # from any folder of the project (also: ls, list, ps)
  agentd web                    # the dashboard (also: monit)
  agentd doctor --env           # is this machine ready?
  agentd COMMAND --help         # each command's options and examples""")
@click.version_option(__version__, "--version", "-V", prog_name="agentd",  # not the distribution's metadata: its
                      message="%(prog)s %(version)s")  # name changed (agentd-supervisor), the version did not
@click.option("--config", type=click.Path(path_type=Path), help="settings file (default: etc/agentd.toml)")
@click.option("--project", "--root", "project", type=click.Path(path_type=Path, file_okay=False),
              help="the project (default: $AGENTD_PROJECT, else the nearest folder at or above the working "
                   "directory with units/, .agent/ or .agentd/)")
@click.pass_context
def cli(ctx: click.Context, config: Path | None, project: Path | None) -> None:
    """agentd: supervise AI coding agents whose state can be rebuilt.

    Every command finds its project the way git finds a repository: --project,
    else $AGENTD_PROJECT, else the nearest folder at or above the working
    directory that holds units/, .agent/ or .agentd/.

    --json prints one JSON object for a state (status, report, plan status and report, web) and JSON
    Lines, one object per line, for records (history, logs, log, wip list, violations, recall, fact
    list, snapshot list): docs/json.md.
    """
    ctx.obj = AppContext(config, project)




def _register() -> None:
    from . import agents, commands, export, logs, memory, plan, recall, timeline, web, wip

    for command in (*commands.COMMANDS, *memory.COMMANDS, *recall.COMMANDS):
        cli.add_command(command)
    cli.add_command(export.export)
    cli.add_command(export.run_unit)
    cli.add_command(logs.logs)
    cli.add_command(timeline.history)
    cli.add_command(timeline.violations)
    cli.add_command(wip.wip)
    cli.add_command(agents.trust)
    cli.add_command(plan.plan)  # issue 28: the overnight runs
    cli.add_command(web.web)
    from .report import report

    cli.add_command(report)  # issue 16: did the agent come back whole
    from .names import add_completion

    add_completion(cli)  # shell completion of unit names (docs/cli.md)


_register()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="agentd")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
