"""CLI commands over the ``.agent/`` memory store (decide, note, fact, recall, wakeup, init, ...).

Thin on purpose: parse, call :mod:`supervisor.memory` / :mod:`supervisor.continuity.wakeup`,
print.  Library errors become one-line ``click.ClickException`` messages.

Which module a command writes to: ``--module M`` (or ``--global``), else
``$AGENTD_MODULE``, else the module of the unit named by ``$AGENTD_UNIT``,
else the global log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import click


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Turn library errors into one-line CLI errors."""
    from ..memory import LineError, StoreError

    try:
        yield
    except (StoreError, LineError, ValueError, RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


def _settings():  # -> Settings (imported lazily to avoid a cycle with cli.py)
    from .context import AppContext

    app = click.get_current_context().find_object(AppContext)
    if app is None:  # pragma: no cover - only when called outside the agentd group
        raise click.ClickException("internal: no agentd context")
    return app.settings


def _root() -> Path:
    return _settings().project_root


def _unit(name: str):  # -> UnitSpec
    from ..config.units import load_unit

    try:
        return load_unit(_settings().units_path, name)
    except Exception as exc:  # noqa: BLE001 - UnitLoadError names the file and the problem
        raise click.ClickException(f"unit {name!r}: {exc}") from None


def resolve_target(module: str | None, global_: bool, scope: Sequence[str] = ()):  # -> MemoryTarget
    """The module rule (:func:`supervisor.config.units.memory_target`), with CLI errors."""
    from ..config.units import memory_target

    if global_ and module:
        raise click.UsageError("--module and --global exclude each other")
    try:
        return memory_target(_settings().units_path, os.environ, module, global_, scope)
    except Exception as exc:  # noqa: BLE001 - a unit file that cannot be loaded
        raise click.ClickException(f"unit {os.environ.get('AGENTD_UNIT')!r}: {exc}") from None


def register(group: click.Group) -> None:
    """Add the memory commands to the ``agentd`` group."""
    for command in (init, decide, note, fact, promote, recall_cmd, wakeup_cmd, snapshot, doctor, mcp_cmd, task, log_cmd,
                    task_state, sync_cmd):
        group.add_command(command)


# init / decide / note ---------------------------------------------------------------

@click.command(epilog="""\b
Examples:
  agentd init                     # in a new project: .agent/ and units/example.toml
  agentd --project ~/src/app init""")
def init() -> None:
    """Create what is missing: the .agent/ memory store, and units/ with a commented example unit.

    Idempotent; never overwrites a file.  The example (units/example.toml) is
    written only when the project has no units/ folder yet.  Also adds agentd's
    state directory (.agentd/) to .gitignore: it holds transcripts and logs,
    which must never be committed; .agent/ stays tracked.
    """
    from ..config.example_unit import write_example_unit
    from ..memory import AgentPaths, init_store
    from ..memory.scaffold import ignore_state_dir

    settings = _settings()
    root = settings.project_root
    with _errors():
        created = init_store(root)
        ignored = ignore_state_dir(root, settings.state_path)
        example = write_example_unit(settings.units_path)
    paths = AgentPaths(root)
    click.echo(f"project {root}")
    if not created:
        click.echo(f"{paths.rel(paths.dir)}: already complete, nothing created")
    for path in created:
        click.echo(f"created {paths.rel(path)}")
    if ignored is not None:
        click.echo(f"added {ignored} to .gitignore")
    if example is not None:
        click.echo(f"created {paths.rel(example)} (a disabled example: edit it, or try `agentd start example`)")


@click.command(epilog="""\b
Examples:
  agentd decide "cache parsed tokens in memory" --why "because parsing is 80 % of a run, so we keep them" --tag arch
  agentd decide "freeze the wire format" --why "because clients pin it, so changes go behind a flag" --global""")
@click.argument("text")
@click.option("--why", required=True, help='cause and conclusion: "because ..., so ..."')
@click.option("--tag", "tags", multiple=True, help="arch, naming, deps, pitfall, constraint, task, or your own")
@click.option("--files", "files", multiple=True, help="affected files or globs (repeat, or comma-separate)")
@click.option("--alternatives", default="", help="alternatives considered and rejected")
@click.option("--module", help="module log to write (default: $AGENTD_MODULE, $AGENTD_UNIT's module, global)")
@click.option("--global", "global_", is_flag=True, help="write to the global log")
@click.option("--scope", "scope", multiple=True, help="globs the snapshot hashes (default: the unit's scope)")
def decide(text: str, why: str, tags: tuple[str, ...], files: tuple[str, ...], alternatives: str,
           module: str | None, global_: bool, scope: tuple[str, ...]) -> None:
    """Record an irreversible decision (with a snapshot) in the decision log."""
    from ..memory import AgentPaths, record_decision

    target = resolve_target(module, global_, scope)
    root = _root()
    with _errors():
        rec = record_decision(root, text, why, module=target.module, tags=tags, files=files,
                              alternatives=alternatives, scope_paths=target.scope)
    click.echo(f"{AgentPaths(root).rel(rec.path)}: {rec.line}")
    if rec.rolled_to is not None:
        click.echo(f"rolled the log into {AgentPaths(root).rel(rec.rolled_to)}")
    if target.module is None:
        told = _tell_daemon("broadcast", text=text, origin=os.environ.get("AGENTD_UNIT") or None)
        if isinstance(told, dict) and told.get("told"):
            click.echo(f"told the running units: {', '.join(told['told'])}")
    from ..memory.sync import sync_after_decision

    synced = sync_after_decision(root, os.environ)
    if synced:
        click.echo(synced)


def _tell_daemon(cmd: str, **args: object) -> object:
    """Best effort: a running daemon hears about it; without one, nothing happens."""
    from ..control.client import call

    socket_path = os.environ.get("AGENTD_SOCKET")
    path = Path(socket_path) if socket_path else _settings().socket_path
    if not path.exists():
        return None
    try:
        return call(path, cmd, timeout=10.0, **args)
    except Exception as exc:  # noqa: BLE001 - the files are written; the daemon is a bonus
        click.echo(f"(agentd daemon not told: {exc})", err=True)
        return None


@click.command(epilog="""\b
Examples:
  agentd task web "port the parser to the v2 API"
""")
@click.argument("unit")
@click.argument("text")
def task(unit: str, text: str) -> None:
    """Give UNIT a new task: its module's task file, a `task` decision, and the agent is told at its next turn end."""
    from ..memory import AgentPaths, record_decision, update_task_state

    spec = _unit(unit)
    module, scope = spec.module, list(spec.scope.paths)
    root = _root()
    paths = AgentPaths(root)
    with _errors():
        update_task_state(paths, "(new task; not started yet)", task=text, module=module)
        rec = record_decision(root, f"task switch for {unit}: {text}",
                              f"because the operator gave {unit} a new task, so it works on that from now on",
                              module=module, tags=("task",), scope_paths=scope)
    where = paths.rel(paths.task(module))
    click.echo(f"{where}: task replaced")
    click.echo(f"{paths.rel(rec.path)}: {rec.line}")
    told = _tell_daemon("queue", unit=unit, text=f"New task from the operator: {text} (see {where})")
    if isinstance(told, dict) and told.get("queued"):
        click.echo(f"{unit} will be told at its next turn end")


@click.command("task-state")
@click.argument("text")
@click.option("--module", help="whose task (default: $AGENTD_MODULE, $AGENTD_UNIT's module, global)")
@click.option("--global", "global_", is_flag=True, help="the global task (current-task.md)")
def task_state(text: str, module: str | None, global_: bool) -> None:
    """Set the "State at interruption" line of the module's task: where the work stopped, what comes next."""
    from ..memory import AgentPaths, update_task_state

    target = resolve_target(module, global_)
    paths = AgentPaths(_root())
    with _errors():
        info = update_task_state(paths, text, module=target.module)
    click.echo(f"{paths.rel(paths.task(target.module))}: State at interruption: {info.state}")


@click.command("sync")
@click.option("--remote", default="origin", show_default=True, help="the git remote that carries the memory")
@click.option("--branch", default="agentd-memory", show_default=True, help="the memory's own branch on it")
@click.option("--retries", type=click.IntRange(min=1), default=5, show_default=True,
              help="attempts when the push is rejected or the remote does not answer")
def sync_cmd(remote: str, branch: str, retries: int) -> None:
    """Pull and push .agent/ through a git remote, on a branch of its own (never the working branch)."""
    from ..memory.sync import sync_memory

    with _errors():
        result = sync_memory(_root(), remote=remote, branch=branch, retries=retries)
    click.echo(result.describe(remote, branch))


@click.command("log", epilog="""\b
Examples:
  agentd log --all                # every module, merged by time
  agentd log --module api --since 2026-11-01 --tag deps""")
@click.option("--module", "modules", multiple=True, help="a module's log (repeatable); global is always included")
@click.option("--all", "all_", is_flag=True, help="every module's log")
@click.option("--since", help="only decisions at or after this time (YYYY-MM-DD[ HH:MM])")
@click.option("--tag", help="only decisions with this tag")
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
def log_cmd(modules: tuple[str, ...], all_: bool, since: str | None, tag: str | None, as_json: bool) -> None:
    """The decision timeline: the global log merged by time with module logs (all epochs)."""
    from ..memory import AgentPaths
    from ..memory.decisions import Entry, iter_all, log_modules

    paths = AgentPaths(_root())
    wanted: list[str | None] = [None]
    if all_:
        wanted = list(dict.fromkeys([None, *log_modules(paths)]))
    else:
        env_module = os.environ.get("AGENTD_MODULE")
        wanted += [m for m in (modules or ((env_module,) if env_module else ())) if m and m != "global"]
    entries: list[Entry] = []
    with _errors():
        for module in wanted:
            entries.extend(e for e in iter_all(paths, module) if isinstance(e, Entry))
    if since:
        entries = [e for e in entries if e.decision.time >= since]
    if tag:
        entries = [e for e in entries if tag in e.decision.tags]
    entries.sort(key=Entry.sort_key)
    for e in entries:
        d = e.decision
        if as_json:
            click.echo(json.dumps({"time": d.time, "module": e.module or "global", "tags": list(d.tags),
                                   "decision": d.decision, "why": d.why, "files": list(d.files), "snapshot": d.snapshot}))
            continue
        click.echo(f"[{d.time}] [{e.module or 'global'}] [{', '.join(d.tags) or '-'}] {d.decision} | why: {d.why}")
    if not entries and not as_json:
        click.echo("no decisions")


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
    target = resolve_target(module, global_)
    with _errors():
        n = append_note(_root(), text, kind, module=target.module)
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

    target = resolve_target(module, False)
    with _errors():
        f = add_fact(_root(), target.module, text, source)
    click.echo(f"{f.id} ({f.module}): {f.text} [source {f.source}, sha {f.sha}]")


@fact.command("check", epilog="""\b
Examples:
  agentd fact check""")
def fact_check() -> None:
    """Re-read every fact's source; mark changed ones stale (exit 1 if any is stale)."""
    from ..memory import check_facts
    from ..memory import facts as facts_mod
    from ..memory.store import AgentPaths

    root = _root()
    with _errors():
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

    with _errors():
        f = invalidate(_root(), fact_id, why)
    click.echo(f"{f.id} ({f.module}): invalid: {f.invalid_why}")


@fact.command("list", epilog="""\b
Examples:
  agentd fact list --module api""")
@click.option("--module", help="only this module ('global' for global facts)")
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
def fact_list(module: str | None, as_json: bool) -> None:
    """List facts with their status."""
    from ..memory import facts as facts_mod
    from ..memory.store import AgentPaths

    with _errors():
        items = facts_mod.load_all(AgentPaths(_root()))
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

    target = resolve_target(module, False)
    with _errors():
        new = promote_fn(_root(), target.module)
    for f in new:
        click.echo(f"{f.id} ({f.module}): {f.text}")
    click.echo(f"promoted {len(new)} note(s); engram.md now keeps only open hypotheses")


# recall -----------------------------------------------------------------------------

@click.command("recall", epilog="""\b
Examples:
  agentd recall parser cache      # works from any folder of the project
  agentd recall --tag deps --kind decision --limit 5""")
@click.argument("words", nargs=-1)
@click.option("--tag", help="decision tag (arch, deps, ...) or engram kind (confirmed, hypothesis, auto)")
@click.option("--path", "path", help="file glob the decision or fact must touch")
@click.option("--module", "modules", multiple=True, help="only these modules ('global' = global log); repeatable")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["decision", "fact", "engram"]),
              help="only these kinds; repeatable")
@click.option("--limit", type=click.IntRange(min=1), help="at most this many results")
@click.option("--json", "as_json", is_flag=True, help="JSON lines")
def recall_cmd(words: tuple[str, ...], tag: str | None, path: str | None, modules: tuple[str, ...],
               kinds: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """Search all decision epochs, facts and engram; newest first."""
    from ..memory import recall

    with _errors():
        hits = recall(_root(), words, tag=tag, path=path, modules=modules,
                      kinds=kinds or ("decision", "fact", "engram"), limit=limit)
    for hit in hits:
        click.echo(json.dumps({k: v for k, v in dataclasses.asdict(hit).items() if k != "order"}) if as_json else hit.render())
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

    root = _root()
    if unit:
        if module:
            raise click.UsageError("give a UNIT or --module, not both")
        spec = _unit(unit)
        if not scope and budget is None and decision_count == DEFAULT_DECISIONS:
            with _errors():  # exactly what the daemon gives the unit's next session
                click.echo(unit_wakeup(spec, root).text, nl=False)
            return
        module_name, globs, budget = spec.module, list(scope) or list(spec.scope.paths), budget or spec.wakeup.budget
    else:
        target = resolve_target(module, False, scope)
        module_name, globs = target.module, list(target.scope)
    with _errors():
        w = build_wakeup(root, module_name, globs, budget or DEFAULT_BUDGET, decision_count=decision_count)
    click.echo(w.text, nl=False)


# snapshots --------------------------------------------------------------------------

@click.group(epilog="""\b
Examples:
  agentd snapshot list
  agentd snapshot show snapshot-003 --file src/app.py""")
def snapshot() -> None:
    """Decision snapshots (show, list)."""


@snapshot.command("show", epilog="""\b
Examples:
  agentd snapshot show snapshot-003""")
@click.argument("ident")
@click.option("--file", "file", help="print this file's content as the snapshot recorded it")
def snapshot_show(ident: str, file: str | None) -> None:
    """Print a snapshot, or with --file the recorded content of one file."""
    from ..memory import snapshots
    from ..memory.store import AgentPaths

    paths = AgentPaths(_root())
    with _errors():
        if file:
            sys.stdout.buffer.write(snapshots.file_content(paths, ident, file))
            sys.stdout.flush()
            return
        click.echo(snapshots.render(snapshots.load_id(paths, ident)))


@snapshot.command("list", epilog="""\b
Examples:
  agentd snapshot list --limit 5""")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON lines (each snapshot's summary)")
def snapshot_list(limit: int, as_json: bool) -> None:
    """The newest snapshots, newest first."""
    from ..memory import snapshots
    from ..memory.store import AgentPaths

    paths = AgentPaths(_root())
    for ident in reversed(snapshots.list_ids(paths)[-limit:]):
        data = snapshots.load(paths, ident) or {}
        kind = "complete" if data.get("complete", True) else "thinned"
        if as_json:
            click.echo(json.dumps({"id": data.get("id", ident), "time": data.get("time"), "module": data.get("module"),
                                   "complete": data.get("complete", True), "decision": data.get("decision")}))
            continue
        click.echo(f"{data.get('id', ident)}  {data.get('time', '?')}  {data.get('module') or 'global'}  "
                   f"[{kind}]  {data.get('decision', '(unreadable)')}")


# doctor / mcp -----------------------------------------------------------------------

@click.command(epilog="""\b
Examples:
  agentd doctor          # the .agent/ store
  agentd doctor --env    # this machine: agent CLIs, git, inotify, namespaces, Landlock, socket, disk, stop timeout""")
@click.option("--env", "env", is_flag=True,
              help="check the machine instead: agent CLIs and versions, git, inotify, user namespaces, Landlock, "
                   "the socket directory, disk space, the service stop timeout")
def doctor(env: bool) -> None:
    """Check the store (or with --env, this machine). Exit 1 on errors.

    The store: malformed lines (file:line), stale facts, missing files.
    """
    if env:
        from .doctor_env import Status, diagnose_env

        results = diagnose_env(_settings())
        for result in results:
            click.echo(result.render())
        failed = sum(r.status is Status.FAIL for r in results)
        click.echo(f"{failed} failure(s), {sum(r.status is Status.WARN for r in results)} warning(s)")
        if failed:
            sys.exit(1)
        return
    from ..memory.doctor import diagnose

    findings = diagnose(_root())
    for f in findings:
        click.echo(f.render())
    errors = sum(f.severity == "error" for f in findings)
    click.echo(f"{errors} error(s), {len(findings) - errors} warning(s)")
    if errors:
        sys.exit(1)


@click.command("mcp", epilog="""\b
Examples:
  agentd mcp                     # in an agent's MCP config: {"command": "agentd", "args": ["mcp"]}""")
def mcp_cmd() -> None:
    """Serve the memory tools to an agent over MCP on stdio."""
    from ..mcp_server import serve

    settings = _settings()
    serve(settings.project_root, settings.units_path)
