"""``agentd status`` and ``agentd status --json`` with the standard library only.

Most of a plain ``agentd status`` used to be start-up: click (~50 ms),
tabulate (~100 ms, through ``importlib.metadata``), every command module.
:func:`answer` handles the common forms itself::

    agentd [--project P | --root P] [--config F] status [--json] [--full | -l] [UNIT...]

It finds the paths as :class:`.context.AppContext` does (:func:`.quickpaths.quick_paths`),
asks the running daemon through the blocking socket client, and prints what
:func:`.render.render_status` renders (the one implementation of the table,
which imports neither click nor tabulate for the cells it holds).  Anything
else (another command or option, help, completion, a configuration that needs
the full settings, no daemon or one still starting, any error) returns False
before anything is printed, and the click command runs: its messages and exit
codes stay the only ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Global options the fast path understands (all take one value).
_GLOBAL = {"--project": "project", "--root": "project", "--config": "config"}


def parse(argv: list[str]) -> tuple[Path | None, Path | None, list[str], bool, bool] | None:
    """``(config, project, units, as_json, full)`` for a plain status command line, else None (the click path)."""
    values: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] not in ("status", "ls", "list"):  # ls, list: aliases (app.ALIASES)
        arg = argv[i]
        name, eq, value = arg.partition("=")
        key = _GLOBAL.get(name)
        if key is None or key in values:
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None
            i += 1
            value = argv[i]
        if not value:
            return None
        values[key] = value
        i += 1
    if i >= len(argv):
        return None
    units, as_json, full = [], False, False
    for arg in argv[i + 1:]:
        if arg == "--json":
            as_json = True
        elif arg in ("--full", "-l"):
            full = True
        elif arg.startswith("-") or not arg:
            return None  # --help, --, an unknown option: click says what it means
        else:
            units.append(arg)
    project = Path(values["project"]) if "project" in values else None
    if project is not None and project.exists() and not project.is_dir():
        return None  # click refuses it (file_okay=False)
    config = Path(values["config"]) if "config" in values else None
    return config, project, units, as_json, full


def answer(argv: list[str]) -> int | None:
    """Run ``agentd status`` here and return its exit code, or None to let the click command run it."""
    if any(k.startswith("_AGENTD") and k.endswith("_COMPLETE") for k in os.environ):
        return None  # shell completion
    parsed = parse(argv)
    if parsed is None:
        return None
    config, project, units, as_json, full = parsed
    try:
        from ..control.client import call
        from ..daemon.pidfile import daemon_alive
        from .quickpaths import quick_paths

        paths = quick_paths(config, project)
        if paths is None or not daemon_alive(paths.pidfile, paths.socket_path):
            return None
        result = call(paths.socket_path, "status", timeout=30.0, units=units or None)
        if not isinstance(result, dict):
            return None
        if as_json:
            import json

            text = json.dumps(result, indent=2)
        else:
            from .render import render_status
            from .style import colour_on, width

            text = render_status(result, colour=colour_on(), limit=width(), full=full)
        code = 3 if units and any(row["state"] != "running" for row in result["units"]) else 0
    except Exception:  # noqa: BLE001 - whatever went wrong, the click command says it the usual way
        return None
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return code
