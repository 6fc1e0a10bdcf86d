"""The ``agentd`` command line (entry point: :func:`main`).

``agentd status`` is answered by :mod:`.fast` and ``agentd notify`` by :mod:`.notify`
(standard library only) when they can; every other command line imports click and the commands (:mod:`.app`).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["notify"]:  # what the agents' hooks run, on every turn: the standard library only
        from .notify import answer as notify

        code = notify(args[1:])
        if code is not None:
            sys.exit(code)
    from .fast import answer

    code = answer(args)
    if code is not None:
        sys.exit(code)
    from .app import main as click_main

    click_main(argv)


def __getattr__(name: str) -> Any:  # ``from supervisor.cli import cli``: the click group, imported when asked for
    if name == "cli":
        from .app import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
