"""``agentd recall --events WORDS`` and ``agentd recall --reindex``: the event layer from the command line.

The options are added to ``agentd recall`` (:func:`event_options`); the
command hands over to :func:`run_events` when ``--events`` or ``--reindex``
is given.  The index is :mod:`supervisor.eventindex`: the daemon's indexer
keeps it current while the daemon runs; without a running daemon (or with
``event_index = false``) this command first reads what changed itself.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import click

#: Transcript bytes a search reads first when no daemon keeps the index current.
CLI_BUDGET = 64 << 20


def event_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The event-layer options of ``agentd recall``."""
    options = [
        click.option("--events", is_flag=True,
                     help="search the event index: transcripts' turns, decisions, engram, facts and where each "
                          "cycle stopped; by relevance and time (each word is a substring; two-character Chinese "
                          "words work)"),
        click.option("--reindex", is_flag=True, help="rebuild the event index from the files, then search if WORDS"),
        click.option("--unit", "units", multiple=True, help="with --events: only these units' events; repeatable"),
        click.option("--half-life", type=click.FloatRange(min=0, min_open=True),
                     help="with --events: days after which a hit counts half (default: the setting event_half_life)"),
        click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per hit"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def run_events(settings: Any, words: Sequence[str], *, tag: str | None, path: str | None, modules: Sequence[str],
               kinds: Sequence[str], limit: int | None, events: bool, reindex: bool, units: Sequence[str],
               half_life: float | None, as_json: bool) -> None:
    """``recall --events`` / ``--reindex`` (``settings``: the loaded Settings)."""
    import sqlite3

    from ..daemon.pidfile import is_locked
    from ..eventindex import EventIndex, EventKind, IndexUnavailable, UnitReadings, default_db

    if tag or path or modules:
        raise click.UsageError("--tag, --path and --module do not apply to --events (use --unit, --kind)")
    if not words and not reindex:
        raise click.UsageError("--events needs WORDS to search for")
    root, state = settings.project_root, settings.state_path
    # while the daemon's indexer keeps the index current, only read it (an agent inside the fence may not write)
    kept = settings.event_index and is_locked(settings.pidfile) and not reindex
    try:
        with EventIndex(default_db(state), root, state, markers=UnitReadings(settings.units_path),
                        readonly=kept) as index:
            if reindex:
                started = time.monotonic()
                result = index.reindex()
                counts = ", ".join(f"{k}: {n}" for k, n in sorted(index.count().items())) or "nothing"
                click.echo(f"indexed {result.added} events from {result.files} files in "
                           f"{time.monotonic() - started:.1f} s ({counts}) into {index.db}", err=bool(words))
            elif not kept and index.update(CLI_BUDGET).more:
                click.echo("the event index is still behind the transcripts: `agentd recall --reindex` reads "
                           "everything now", err=True)
            if not words:
                return
            hits = index.search(words, limit=limit or 10, units=units, kinds=[EventKind(k) for k in kinds],
                                half_life_days=half_life or settings.event_half_life)
    except (sqlite3.Error, OSError, ValueError, IndexUnavailable) as exc:
        raise click.ClickException(f"event index {default_db(state)}: {exc}") from None
    for hit in hits:
        click.echo(json.dumps(hit.as_dict(root), ensure_ascii=False) if as_json else hit.render(root))
    if not hits:
        click.echo("no match", err=True)
        sys.exit(1)
