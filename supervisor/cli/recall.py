"""Memory commands that add to and read the store: note, fact, promote, recall, wakeup.

The store's writing commands (init, decide, task, task-state, log, sync, snapshot,
doctor, mcp) are in :mod:`supervisor.cli.memory`; the helpers both use are in :mod:`supervisor.cli.context`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click

from .context import current_settings, memory_errors, project_root, resolve_target, unit_spec
from .memory import asked_module, channel_inbox, person_only, through_channel
from .recall_events import event_options, run_events


@click.command(epilog="""\b
Examples:
  agentd note "the flaky test needs a warm cache" --confirmed
  agentd note "the leak may come from the pool" --hypothesis""")
@click.argument("text")
@click.option("--confirmed", "kind", flag_value="confirmed", help="a verified finding")
@click.option("--hypothesis", "kind", flag_value="hypothesis", help="a guess still to check")
@click.option("--module", help="the module it is about (default: $AGENTD_MODULE, $AGENTD_UNIT's module, global)")
@click.option("--global", "global_", is_flag=True, help="a note for every module")
def note(text: str, kind: str | None, module: str | None, global_: bool) -> None:
    """Append a note to engram.md (say --confirmed or --hypothesis)."""
    from ..memory import append_note

    if kind is None:
        raise click.UsageError("say whether the note is --confirmed or a --hypothesis")
    if (inbox := channel_inbox()) is not None:
        return through_channel(inbox, "note", {"text": text, "kind": kind, "module": asked_module(module, global_)})
    target = resolve_target(module, global_)
    with memory_errors():
        n = append_note(project_root(), text, kind, module=target.module)
    click.echo(n.render())


# facts / promote ------------------------------------------------------------------

@click.group(epilog="""\b
Examples:
  agentd fact add "retries are capped at 3" --source src/net/retry.py:12
  agentd fact check              # exit 1 when a source changed""")
def fact() -> None:
    """Stable facts with their source lines (add, check, invalidate, list)."""


@fact.command("add", epilog="""\b
Examples:
  agentd fact add "retries are capped at 3" --source src/net/retry.py:10-14""")
@click.argument("text")
@click.option("--module", help="module (default: $AGENTD_MODULE, $AGENTD_UNIT's module, global)")
@click.option("--source", required=True, help="PATH:LINE or PATH:START-END the fact comes from")
def fact_add(text: str, module: str | None, source: str) -> None:
    """Record a fact and the hash of the cited lines."""
    from ..memory import add_fact

    if (inbox := channel_inbox()) is not None:
        return through_channel(inbox, "fact-add", {"text": text, "source": source, "module": module})
    target = resolve_target(module, False)
    with memory_errors():
        f = add_fact(project_root(), target.module, text, source)
    click.echo(f"{f.id} ({f.module}): {f.text} [source {f.source}, sha {f.sha}]")


@fact.command("check", epilog="""\b
Examples:
  agentd fact check""")
def fact_check() -> None:
    """Re-read every fact's source; mark changed ones stale (exit 1 if any is stale)."""
    from ..memory import check_facts
    from ..memory import facts as facts_mod
    from ..memory.store import AgentPaths

    person_only("fact check")
    root = project_root()
    with memory_errors():
        changes = check_facts(root)
        current = facts_mod.load_all(AgentPaths(root))
    for f, status in changes:
        click.echo(f"{f.id} ({f.module}): {f.status} -> {status}: {f.text} [{f.source}]")
    stale = [f for f in current if f.status == "stale"]
    click.echo(f"{len(current)} fact(s), {len(stale)} stale, {sum(f.status == 'invalid' for f in current)} invalid")
    if stale:
        sys.exit(1)


@fact.command("invalidate", epilog="""\b
Examples:
  agentd fact invalidate F3 --why "the cap moved to config"
""")
@click.argument("fact_id")
@click.option("--why", required=True, help="why the fact no longer holds")
def fact_invalidate(fact_id: str, why: str) -> None:
    """Mark a fact invalid; it stays in the file with the reason."""
    from ..memory import invalidate

    if (inbox := channel_inbox()) is not None:
        return through_channel(inbox, "fact-invalidate", {"id": fact_id, "why": why})
    with memory_errors():
        f = invalidate(project_root(), fact_id, why)
    click.echo(f"{f.id} ({f.module}): invalid: {f.invalid_why}")


@fact.command("list", epilog="""\b
Examples:
  agentd fact list --module api""")
@click.option("--module", help="only this module ('global' for global facts)")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one fact per line")
def fact_list(module: str | None, as_json: bool) -> None:
    """List facts with their status."""
    from ..memory import facts as facts_mod
    from ..memory.store import AgentPaths

    with memory_errors():
        items = facts_mod.load_all(AgentPaths(project_root()))
    for f in items:
        if module and f.module != module:
            continue
        if as_json:
            click.echo(json.dumps(dataclasses.asdict(f)))
            continue
        extra = f" — invalid: {f.invalid_why}" if f.invalid_why else ""
        click.echo(f"{f.id} [{f.status}] ({f.module}) {f.text} [source {f.source or 'engram'}]{extra}")


@click.command(epilog="""\b
Examples:
  agentd promote                 # into the global facts
  agentd promote --module api""")
@click.option("--module", help="module that receives the facts (default: $AGENTD_MODULE, unit's module, global)")
def promote(module: str | None) -> None:
    """Move confirmed engram notes into facts and archive the engram."""
    from ..memory import promote as promote_fn

    person_only("promote")
    target = resolve_target(module, False)
    with memory_errors():
        new = promote_fn(project_root(), target.module)
    for f in new:
        click.echo(f"{f.id} ({f.module}): {f.text}")
    click.echo(f"promoted {len(new)} note(s); engram.md now keeps only open hypotheses")


# recall -----------------------------------------------------------------------------

@click.command("recall", epilog="""\b
Examples:
  agentd recall parser cache      # works from any folder of the project
  agentd recall --tag deps --kind decision --limit 5
  agentd recall --events 适配 parse_config   # turns, decisions, notes: ranked
  agentd recall --reindex                   # rebuild the event index from the files""")
@click.argument("words", nargs=-1)
@click.option("--tag", help="decision tag (arch, deps, ...) or engram kind (confirmed, hypothesis, auto)")
@click.option("--path", "path", help="file glob the decision or fact must touch")
@click.option("--module", "modules", multiple=True, help="only these modules ('global' = global log); repeatable")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["decision", "fact", "engram"]),
              help="only these kinds; repeatable")
@click.option("--limit", type=click.IntRange(min=1), help="at most this many results")
@event_options
def recall_cmd(words: tuple[str, ...], tag: str | None, path: str | None, modules: tuple[str, ...],
               kinds: tuple[str, ...], limit: int | None, **event_args: Any) -> None:
    """Search all decision epochs, facts and engram; newest first (--events: the event index, ranked)."""
    from ..memory import recall

    if event_args["events"] or event_args["reindex"]:
        return run_events(current_settings(), words, tag=tag, path=path, modules=modules, kinds=kinds, limit=limit,
                          **event_args)
    with memory_errors():
        hits = recall(project_root(), words, tag=tag, path=path, modules=modules,
                      kinds=kinds or ("decision", "fact", "engram"), limit=limit)
    for hit in hits:
        click.echo(json.dumps({k: v for k, v in dataclasses.asdict(hit).items() if k != "order"})
                   if event_args["as_json"] else hit.render())
    if not hits:
        click.echo("no match", err=True)
        sys.exit(1)


# wakeup -----------------------------------------------------------------------------

@click.command("wakeup", epilog="""\b
Examples:
  agentd wakeup web              # exactly what web's next session gets
  agentd wakeup --module api --budget 1500""")
@click.argument("unit", required=False)
@click.option("--module", help="module to brief (default: $AGENTD_MODULE, $AGENTD_UNIT's module, global)")
@click.option("--scope", "scope", multiple=True, help="file globs of the module (default: the unit's scope)")
@click.option("--budget", type=click.IntRange(min=1), help="token budget (default: the unit's, else 2500)")
@click.option("--decisions", "decision_count", type=click.IntRange(min=0), default=5, show_default=True,
              help="how many latest decisions to show")
def wakeup_cmd(unit: str | None, module: str | None, scope: tuple[str, ...], budget: int | None,
               decision_count: int) -> None:
    """Print the wakeup briefing for a unit or module."""
    from ..continuity.wakeup import DEFAULT_BUDGET, DEFAULT_DECISIONS, build_wakeup, unit_wakeup

    root = project_root()
    if unit:
        if module:
            raise click.UsageError("give a UNIT or --module, not both")
        spec = unit_spec(unit)
        if not scope and budget is None and decision_count == DEFAULT_DECISIONS:
            if spec.wakeup.command:  # never run a script an agent may write (config/runnable.py), as start refuses it
                from ..config.runnable import command_problem
                from ..config.units import load_units

                problem = command_problem("[wakeup] command", spec.wakeup.command, root,
                                          load_units(spec.path.parent, None)[0], root)
                if problem:
                    raise click.ClickException(f"{spec.path.name}: {problem}")
            with memory_errors():  # exactly what the daemon gives the unit's next session
                click.echo(unit_wakeup(spec, root).text, nl=False)
            return
        module_name, globs, budget = spec.module, list(scope) or list(spec.scope.paths), budget or spec.wakeup.budget
    else:
        target = resolve_target(module, False, scope)
        module_name, globs = target.module, list(target.scope)
    with memory_errors():
        w = build_wakeup(root, module_name, globs, budget or DEFAULT_BUDGET, decision_count=decision_count)
    click.echo(w.text, nl=False)


# snapshots --------------------------------------------------------------------------


COMMANDS = (note, fact, promote, recall_cmd, wakeup_cmd)
