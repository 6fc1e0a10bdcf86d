"""CLI commands over the ``.agent/`` memory store (decide, note, fact, recall, wakeup, init, ...).

Thin on purpose: parse, call :mod:`supervisor.memory` / :mod:`supervisor.continuity.wakeup`,
print.  Library errors become one-line ``click.ClickException`` messages.

Which module a command writes to: ``--module M`` (or ``--global``), else
``$AGENTD_MODULE``, else the module of the unit named by ``$AGENTD_UNIT``,
else the global log.

Inside a unit (``$AGENTD_INBOX`` set: the daemon gives it to every agent)
the writing commands go through the memory channel instead
(:mod:`supervisor.memory.channel`): ``.agent/`` is read-only there, and the
daemon writes for the unit whose inbox the request lands in, its own module
only.  The commands that rewrite what a person owns (``task``, ``sync``,
``promote``, ``fact check``) are refused there with a clear error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .context import current_paths as _paths
from .context import current_settings, memory_errors, project_root, resolve_target, unit_spec




# the memory channel (inside a unit) ---------------------------------------------------

def channel_inbox() -> Path | None:
    """The unit's inbox when the command runs inside a unit, else None (a person's shell: direct writes)."""
    value = os.environ.get("AGENTD_INBOX", "").strip()
    return Path(value) if value else None


def through_channel(inbox: Path, op: str, args: dict[str, object]) -> None:
    """Send one request and print the daemon's answer (or that it is queued); a refusal is an error."""
    from ..memory.channel import ChannelError, submit

    try:
        outcome = submit(inbox, op, args)
    except ChannelError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot leave the request in {inbox}: {exc.strerror or exc}") from None
    if not outcome.ok:
        raise click.ClickException(outcome.text)
    click.echo(outcome.text)


def person_only(command: str) -> None:
    """Refuse, inside a unit, a command that rewrites what the person owns in .agent/."""
    if channel_inbox() is not None:
        raise click.ClickException(
            f"`agentd {command}` rewrites .agent/, which is read-only inside a unit: an agent writes its own "
            "module's memory with agentd note, decide, task-state and fact add; ask the person for the rest")


def asked_module(module: str | None, global_: bool) -> str | None:
    return "global" if global_ else module


def bounded_git() -> None:
    """From here on this command's libgit2 work runs in a helper it kills after a while: a FIFO an agent put in
    .git/ (or named .gitignore) would block libgit2 for ever, and a cron job's `agentd sync` with it."""
    from ..memory.gitworker import isolate

    isolate()


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

    settings = _paths()
    root = settings.project_root
    with memory_errors():
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
    """Record an irreversible decision (with a snapshot) in the decision log.

    A decision tagged `constraint` is still a decision (the wakeup carries the last few); hard
    constraints, carried whole by every wakeup and never cut, live in .agent/constraints.md.
    """
    from ..memory import AgentPaths, record_decision

    if any(tag.strip().lower() in ("constraint", "constraints") for tag in tags):
        click.echo("note: a decision tagged `constraint` is not a hard constraint: hard constraints live in "
                   ".agent/constraints.md, one per line (every wakeup carries them whole; `forbid:` lines fence "
                   "paths); add it there too if it must never be broken", err=True)
    inbox = channel_inbox()
    if inbox is not None:
        through_channel(inbox, "decide", {"text": text, "why": why, "tags": list(tags), "files": list(files),
                                          "alternatives": alternatives, "scope": list(scope),
                                          "module": asked_module(module, global_)})
        return
    target = resolve_target(module, global_, scope)
    root = project_root()
    bounded_git()
    with memory_errors():
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
    path = Path(socket_path) if socket_path else _paths().socket_path
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

    person_only("task")
    spec = unit_spec(unit)
    module, scope = spec.module, list(spec.scope.paths)
    root = project_root()
    paths = AgentPaths(root)
    with memory_errors():
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


@click.command("task-state", epilog="""\b
Examples:
  agentd task-state "parser ported; next: the error messages"     # from an agent's shell: its module
  agentd task-state --done "models ported, tests pass"             # an agent claims its plan task done
  agentd task-state "release frozen until the audit ends" --global""")
@click.argument("text", required=False)
@click.option("--module", help="whose task (default: $AGENTD_MODULE, $AGENTD_UNIT's module, global)")
@click.option("--global", "global_", is_flag=True, help="the global task (current-task.md)")
@click.option("--done", is_flag=True,
              help="inside a unit: claim that its plan task is done (agentd then runs the task's checks)")
def task_state(text: str | None, module: str | None, global_: bool, done: bool) -> None:
    """Set the "State at interruption" line of the module's task: where the work stopped, what comes next.

    With --done (inside a unit), claim the unit's current plan task done: agentd
    runs the task's checks itself, and the verdict comes as the agent's next message.
    """
    from ..memory import AgentPaths, update_task_state

    inbox = channel_inbox()
    if done:
        if inbox is None:
            raise click.ClickException("--done is an agent's claim that its plan task is done: it works inside a "
                                       "unit (agentd gives its agents $AGENTD_INBOX); outside one there is no task "
                                       "to claim (`agentd plan status` shows the runs)")
        through_channel(inbox, "task-done", {"state": text, "session": os.environ.get("AGENTD_SESSION") or None})
        return
    if text is None:
        raise click.UsageError("TEXT is required (where the work stopped, what comes next), unless --done")
    if inbox is not None:
        through_channel(inbox, "task-state", {"state": text, "module": asked_module(module, global_)})
        return
    target = resolve_target(module, global_)
    paths = AgentPaths(project_root())
    with memory_errors():
        info = update_task_state(paths, text, module=target.module)
    click.echo(f"{paths.rel(paths.task(target.module))}: State at interruption: {info.state}")


@click.command("sync", epilog="""\b
Examples:
  agentd sync                       # pull and push .agent/ through origin's agentd-memory branch
  agentd sync --remote backup --retries 10""")
@click.option("--remote", default="origin", show_default=True, help="the git remote that carries the memory")
@click.option("--branch", default="agentd-memory", show_default=True, help="the memory's own branch on it")
@click.option("--retries", type=click.IntRange(min=1), default=5, show_default=True,
              help="attempts when the push is rejected or the remote does not answer")
def sync_cmd(remote: str, branch: str, retries: int) -> None:
    """Pull and push .agent/ through a git remote, on a branch of its own (never the working branch)."""
    from ..memory.sync import sync_memory

    person_only("sync")
    bounded_git()
    with memory_errors():
        result = sync_memory(project_root(), remote=remote, branch=branch, retries=retries)
    click.echo(result.describe(remote, branch))


@click.command("log", epilog="""\b
Examples:
  agentd log --all                # every module, merged by time
  agentd log --module api --since 2026-11-01 --tag deps""")
@click.option("--module", "modules", multiple=True, help="a module's log (repeatable); global is always included")
@click.option("--all", "all_", is_flag=True, help="every module's log")
@click.option("--since", help="only decisions at or after this time (YYYY-MM-DD[ HH:MM])")
@click.option("--tag", help="only decisions with this tag")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one decision per line")
def log_cmd(modules: tuple[str, ...], all_: bool, since: str | None, tag: str | None, as_json: bool) -> None:
    """The decision timeline: the global log merged by time with module logs (all epochs)."""
    from ..memory import AgentPaths
    from ..memory.decisions import Entry, iter_all, log_modules

    paths = AgentPaths(project_root())
    wanted: list[str | None] = [None]
    if all_:
        wanted = list(dict.fromkeys([None, *log_modules(paths)]))
    else:
        env_module = os.environ.get("AGENTD_MODULE")
        wanted += [m for m in (modules or ((env_module,) if env_module else ())) if m and m != "global"]
    entries: list[Entry] = []
    with memory_errors():
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

    paths = AgentPaths(project_root())
    with memory_errors():
        if file:
            sys.stdout.buffer.write(snapshots.file_content(paths, ident, file))
            sys.stdout.flush()
            return
        click.echo(snapshots.render(snapshots.load_id(paths, ident)))


@snapshot.command("list", epilog="""\b
Examples:
  agentd snapshot list --limit 5""")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one snapshot's summary per line")
def snapshot_list(limit: int, as_json: bool) -> None:
    """The newest snapshots, newest first."""
    from ..memory import snapshots
    from ..memory.store import AgentPaths

    paths = AgentPaths(project_root())
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

        results = diagnose_env(current_settings())
        for result in results:
            click.echo(result.render())
        failed = sum(r.status is Status.FAIL for r in results)
        click.echo(f"{failed} failure(s), {sum(r.status is Status.WARN for r in results)} warning(s)")
        if failed:
            sys.exit(1)
        return
    from ..memory.doctor import diagnose

    findings = diagnose(project_root())
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

    settings = current_settings()
    serve(settings.project_root, settings.units_path, settings.state_path, settings.event_half_life)


COMMANDS = (init, decide, snapshot, doctor, mcp_cmd, task, log_cmd, task_state, sync_cmd)
