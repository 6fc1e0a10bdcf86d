"""CLI commands over the ``.agent/`` memory store (decide, note, fact, recall, wakeup, init, ...)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the memory commands to the ``agentd`` group."""
