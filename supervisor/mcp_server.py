"""``agentd mcp``: the memory tools for agents, served over MCP on stdio.

Tools (each with a JSON Schema derived from the typed signature, so a client
cannot send a malformed entry): ``log_decision``, ``note``, ``add_fact``,
``recall``, ``update_task_state``, ``search_events`` (the event index,
read only: :mod:`supervisor.eventindex`).  Each calls the same library as the CLI,
so rules (e.g. the "because ..., so ..." why) are enforced the same way; a
rule violation comes back as a tool error whose text says what to fix.

The module defaults like the CLI: the tool's ``module`` argument, else
``$AGENTD_MODULE``, else the module of ``$AGENTD_UNIT``'s unit, else global.
Notes and the task state belong to that module too (``update_task_state``
writes ``.agent/tasks/<module>.md``; ``global_task`` the global task).

Inside a unit (``$AGENTD_INBOX``) the four writing tools go through the
memory channel like the CLI (:mod:`supervisor.memory.channel`): the daemon
writes for the unit whose inbox the request lands in, its own module only,
and a refusal comes back as a tool error.  ``search_events`` reads the event
index, which a fenced agent cannot see (it holds every unit's transcripts):
there it is a tool error that says so; where the server can read it (Codex
starts MCP servers outside its sandbox) a unit's agent gets its own unit's
turns only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from .config.paths import DEFAULT_STATE_DIR
from .memory import LineError, StoreError, add_fact, append_note, recall, record_decision
from .memory import update_task_state as set_task_state
from .memory.store import AgentPaths
from .memory.sync import sync_after_decision

SERVER_NAME = "agentd-memory"


def _default_target(units_dir: Path | None) -> tuple[str | None, list[str]]:
    from .config.target import memory_target

    try:
        target = memory_target(units_dir or Path("units"), os.environ)
    except Exception:  # noqa: BLE001 - a broken unit file must not stop the tools
        return None, []
    return target.module, list(target.scope)


def build_server(root: Path, units_dir: Path | None = None, state_dir: Path | None = None,
                 half_life: float = 14.0):  # -> MCPServer
    """An MCPServer whose tools act on the store under ``root`` (and the event index in ``state_dir``)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from .memory.channel import ChannelError, submit

    root = Path(root)
    state_dir = Path(state_dir) if state_dir is not None else root / DEFAULT_STATE_DIR
    inbox_env = os.environ.get("AGENTD_INBOX", "").strip()
    inbox = Path(inbox_env) if inbox_env else None

    def channel(op: str, args: dict[str, object]) -> str:
        assert inbox is not None
        try:
            outcome = submit(inbox, op, args)
        except (ChannelError, OSError) as exc:
            raise ToolError(str(exc)) from None
        if not outcome.ok:
            raise ToolError(outcome.text)
        return outcome.text
    paths = AgentPaths(root)
    default_module, default_scope = _default_target(units_dir)
    server = MCPServer(
        SERVER_NAME,
        instructions=(
            "Durable project memory. Log every irreversible decision with log_decision (why: "
            "'because <cause>, so <conclusion>'), keep notes with note, record facts with their source "
            "lines with add_fact, search with recall, and keep the task state current with update_task_state. "
            "search_events finds what happened before (earlier sessions' turns, decisions, notes), newest first."
        ),
    )

    def module_of(module: str | None, global_log: bool) -> str | None:
        if global_log:
            return None
        if module:
            return None if module == "global" else module
        return default_module

    @server.tool()
    def log_decision(
        decision: Annotated[str, Field(min_length=1, description="what was decided, one sentence")],
        why: Annotated[str, Field(min_length=1, description="cause and conclusion: 'because <cause>, so <conclusion>'")],
        tags: Annotated[list[str], Field(description="arch, naming, deps, pitfall, constraint, task, or free tags")] = [],  # noqa: B006
        files: Annotated[list[str], Field(description="affected files or globs, relative to the project root")] = [],  # noqa: B006
        alternatives: Annotated[str, Field(description="alternatives considered and rejected")] = "",
        module: Annotated[str | None, Field(description="module log; default: this agent's module")] = None,
        global_log: Annotated[bool, Field(description="write to the global (cross-module) log")] = False,
    ) -> str:
        """Record an irreversible decision in the decision log, with a snapshot of the module's files."""
        if inbox is not None:
            return channel("decide", {"text": decision, "why": why, "tags": tags, "files": files,
                                      "alternatives": alternatives, "module": "global" if global_log else module})
        target = module_of(module, global_log)
        try:
            rec = record_decision(root, decision, why, module=target, tags=tags, files=files,
                                  alternatives=alternatives, scope_paths=default_scope if target == default_module else ())
        except (LineError, StoreError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        synced = sync_after_decision(root, os.environ)
        return f"logged in {paths.rel(rec.path)} with {rec.snapshot}: {rec.line}" + (f"\n{synced}" if synced else "")

    @server.tool()
    def note(
        text: Annotated[str, Field(min_length=1, description="what you learned or suspect")],
        kind: Annotated[Literal["confirmed", "hypothesis"], Field(description="confirmed = verified; hypothesis = to check")],
        module: Annotated[str | None, Field(description="module it is about; default: this agent's module")] = None,
        global_note: Annotated[bool, Field(description="a note for every module")] = False,
    ) -> str:
        """Append a confirmed finding or a hypothesis to the engram (working notes)."""
        if inbox is not None:
            return channel("note", {"text": text, "kind": kind, "module": "global" if global_note else module})
        try:
            n = append_note(root, text, kind, module=module_of(module, global_note))
        except (StoreError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return f"noted: {n.render()}"

    @server.tool(name="add_fact")
    def add_fact_tool(
        text: Annotated[str, Field(min_length=1, description="the stable fact")],
        source: Annotated[str, Field(pattern=r"^[^:]+:\d+(-\d+)?$", description="PATH:LINE or PATH:START-END it comes from")],
        module: Annotated[str | None, Field(description="module; default: this agent's module")] = None,
    ) -> str:
        """Record a stable fact with the hash of its source lines (it goes stale when they change)."""
        if inbox is not None:
            return channel("fact-add", {"text": text, "source": source, "module": module})
        try:
            f = add_fact(root, module_of(module, False), text, source)
        except (StoreError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return f"{f.id} ({f.module}): {f.text} [source {f.source}]"

    @server.tool(name="recall")
    def recall_tool(
        words: Annotated[list[str], Field(description="words that must all appear")] = [],  # noqa: B006
        tag: Annotated[str | None, Field(description="decision tag, or engram kind (confirmed/hypothesis)")] = None,
        path: Annotated[str | None, Field(description="file glob the decision or fact must touch")] = None,
        modules: Annotated[list[str], Field(description="only these modules ('global' = global log)")] = [],  # noqa: B006
        kinds: Annotated[list[Literal["decision", "fact", "engram"]], Field(description="only these kinds")] = [],  # noqa: B006
        limit: Annotated[int, Field(ge=1, le=500, description="at most this many results")] = 20,
    ) -> str:
        """Search all decision epochs, facts and engram notes, newest first (keyword and path matching)."""
        try:
            hits = recall(root, words, tag=tag, path=path, modules=modules,
                          kinds=kinds or ("decision", "fact", "engram"), limit=limit)
        except (StoreError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return "\n".join(h.render() for h in hits) or "no match"

    @server.tool()
    def search_events(
        words: Annotated[list[str], Field(min_length=1, description="words that must all occur (substrings; "
                                                                     "two-character Chinese words work)")],
        limit: Annotated[int, Field(ge=1, le=100, description="at most this many hits")] = 10,
        units: Annotated[list[str], Field(description="only these units' turns and cycles")] = [],  # noqa: B006
        half_life_days: Annotated[float | None, Field(gt=0, description="days after which a hit counts half")] = None,
    ) -> str:
        """Search what happened: every session's turns, all decisions, engram, facts, where each cycle stopped.

        Ranked by relevance and time (newer first among equals). Each hit gives its time, kind, unit, and how
        to open the spot (an `agentd logs UNIT --session S --at OFFSET` command, or path:line).
        """
        import sqlite3

        from .eventindex import EventIndex, IndexUnavailable, default_db

        if inbox is not None and not default_db(state_dir).exists():
            raise ToolError("the event index is not readable inside a unit (it holds every unit's transcripts): "
                            "use recall for decisions, facts and notes")
        own = os.environ.get("AGENTD_UNIT") if inbox is not None else None
        try:
            with EventIndex(default_db(state_dir), root, state_dir, readonly=True) as index:
                hits = index.search(words, limit=min(limit * 5, 500) if own else limit, units=units,
                                    half_life_days=half_life_days or half_life)
        except (IndexUnavailable, sqlite3.Error, ValueError) as exc:
            raise ToolError(str(exc)) from None
        if inbox is not None:  # a unit's agent (Codex runs this server outside its sandbox): its own turns only
            hits = [h for h in hits if h.kind.value not in ("turn", "stopped") or (own and h.unit == own)][:limit]
        return "\n".join(h.render(root) for h in hits) or "no match"

    @server.tool()
    def update_task_state(
        state: Annotated[str, Field(min_length=1, description="where the work stopped and what comes next")],
        task: Annotated[str | None, Field(description="replace the task description too (optional)")] = None,
        global_task: Annotated[bool, Field(description="the global task instead of this agent's module's")] = False,
    ) -> str:
        """Set the 'State at interruption' line of this module's task (and optionally the task)."""
        if inbox is not None:
            return channel("task-state", {"state": state, "task": task, "module": "global" if global_task else None})
        target = module_of(None, global_task)
        try:
            info = set_task_state(paths, state, task, module=target)
        except (StoreError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return f"{paths.rel(paths.task(target))}: State at interruption: {info.state}"

    return server


def serve(root: Path, units_dir: Path | None = None, state_dir: Path | None = None,
          half_life: float = 14.0) -> None:
    """Run the server on stdio until the client closes it."""
    build_server(root, units_dir, state_dir, half_life).run("stdio")
