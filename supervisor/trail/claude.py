"""Claude Code's trail, from its session transcript (``$CLAUDE_CONFIG_DIR/projects/<cwd>/<session>.jsonl``).

What Claude Code 2.1.328 writes there (verified against the fake Messages API):

* ``user`` entries: a typed message (``message.content`` a string, or text
  blocks), or the results of tool calls (``tool_result`` blocks with
  ``tool_use_id``, ``is_error``, and for a failed ``Bash`` the text
  ``Exit code N`` first); ``toolUseResult`` has ``stdout``/``stderr`` for a
  command that succeeded;
* ``assistant`` entries: the model's ``tool_use`` blocks (``Read``
  ``{file_path}``, ``Edit``/``MultiEdit``/``Write`` ``{file_path}``,
  ``NotebookEdit`` ``{notebook_path}``, ``Bash`` ``{command}``, ``TodoWrite``
  ``{todos: [{content, status, activeForm}]}``, or its task tools:
  ``TaskCreate`` ``{subject}`` answered ``Task #N created successfully``, then
  ``TaskUpdate`` ``{taskId, status}``);
* ``message.usage`` on ``assistant`` entries (``input_tokens``,
  ``cache_creation_input_tokens``, ``cache_read_input_tokens``,
  ``output_tokens``), repeated on every entry of one response (one per
  content block, the same ``message.id``): each tool call gets the session's
  tokens up to its response, that response's newest figure included
  (:attr:`~.model.Action.tokens`; a sub-agent's requests are not counted);
* entries of sub-agents (``isSidechain``), meta messages (``isMeta``), the
  compaction summary (``isCompactSummary``) and slash-command echoes, which are
  not the session's own asks or actions and are skipped.

The plan is the newest ``TodoWrite`` list the model sent, or the task list
its ``TaskCreate``/``TaskUpdate`` calls built, whichever came last (a
``TodoWrite`` is kept even when the CLI refused the tool: it is what the agent
said its plan was).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .common import change_digest, norm_path, output_tail, reads_of_command
from .model import Action, Kind, PlanStep, StepStatus, Trail

READ_TOOLS = frozenset({"Read"})
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
SHELL_TOOLS = frozenset({"Bash"})
PLAN_TOOLS = frozenset({"TodoWrite"})
TASK_CREATE, TASK_UPDATE = "TaskCreate", "TaskUpdate"
#: User-role texts that Claude Code itself adds (not asks).
SYNTHETIC_USER = ("<system-reminder>", "<command-name>", "<command-message>", "<local-command-stdout>",
                  "<local-command-stderr>", "<bash-input>", "<bash-stdout>", "Caveat: The messages below")
_EXIT = re.compile(r"^(?:Error: )?Exit code (-?\d+)")
_CREATED = re.compile(r"^Task #(\S+) created successfully")


def read_transcript(path: Path, root: str | None = None) -> Trail:
    """The trail of the transcript at ``path`` (blocking: reads the whole file)."""
    with open(path, "rb") as fh:
        return parse_transcript(fh, root, source=f"claude transcript {path.name}")


def parse_transcript(lines: Iterable[bytes | str], root: str | None = None, *, source: str = "claude transcript") -> Trail:
    """The trail in transcript ``lines`` (see the module docstring); paths relative to ``root`` where inside it."""
    trail = Trail(source=source)
    tasks = _Tasks(trail)
    by_id: dict[str, int] = {}
    usage: dict[str, int] = {}  # response (message id) -> its tokens, in the order the responses came
    priced: list[tuple[int, str]] = []  # (action index, its response)
    for raw in lines:
        data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
        if b'"user"' not in data and b'"assistant"' not in data:
            continue
        try:
            entry = json.loads(data)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("isSidechain") or entry.get("type") not in ("user", "assistant"):
            continue
        trail.session = entry.get("sessionId") or trail.session
        trail.cwd = entry.get("cwd") or trail.cwd
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        at = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
        if entry["type"] == "assistant":
            response = str(message.get("id") or f"line {len(usage)}")
            used = _tokens(message.get("usage"))
            if used is not None:
                usage[response] = used
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_use":
                    action = _tool_use(trail, block, root, at)
                    tasks.use(block)
                    if action.call_id:
                        by_id[action.call_id] = len(trail.actions)
                    priced.append((len(trail.actions), response))
                    trail.actions.append(action)
            continue
        results = [b for b in _blocks(message.get("content")) if b.get("type") == "tool_result"]
        for block in results:
            tasks.result(block)
            index = by_id.get(str(block.get("tool_use_id") or ""))
            if index is not None:
                trail.actions[index] = _result(trail.actions[index], block, entry.get("toolUseResult"))
        if not results and not entry.get("isMeta") and not entry.get("isCompactSummary"):
            text = _text(message.get("content"))
            if text.strip() and not text.lstrip().startswith(SYNTHETIC_USER):
                trail.asks.append(text)
    _price(trail, usage, priced)
    return trail


def _tokens(usage: Any) -> int | None:
    """One response's tokens: its input (cached, written to the cache, or neither) and its output."""
    if not isinstance(usage, dict):
        return None
    parts = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                                    "output_tokens")]
    return sum(x for x in parts if isinstance(x, int)) if isinstance(parts[0], int) else None


def _price(trail: Trail, usage: dict[str, int], priced: list[tuple[int, str]]) -> None:
    """Each action's :attr:`~.model.Action.tokens`: the responses up to its own, added up."""
    so_far, running = {}, 0
    for response, used in usage.items():
        running += used
        so_far[response] = running
    for index, response in priced:
        if response in so_far:
            trail.actions[index] = replace(trail.actions[index], tokens=so_far[response])


class _Tasks:
    """The task list Claude Code's ``TaskCreate`` / ``TaskUpdate`` calls build (the plan when used last)."""

    def __init__(self, trail: Trail) -> None:
        self.trail = trail
        self.steps: dict[str, PlanStep] = {}
        self.creating: dict[str, str] = {}  # tool_use id -> subject, until the result names the task

    def use(self, block: dict[str, Any]) -> None:
        args = block.get("input") if isinstance(block.get("input"), dict) else {}
        if block.get("name") == TASK_CREATE and args.get("subject"):
            self.creating[str(block.get("id") or "")] = str(args["subject"]).strip()
        elif block.get("name") == TASK_UPDATE and str(args.get("taskId") or "") in self.steps:
            key = str(args["taskId"])
            if args.get("status") == "deleted":
                del self.steps[key]
            else:
                old = self.steps[key]
                self.steps[key] = PlanStep(str(args.get("subject") or old.text).strip(),
                                           StepStatus.parse(args["status"]) if args.get("status") else old.status)
            self.trail.plan = list(self.steps.values())

    def result(self, block: dict[str, Any]) -> None:
        subject = self.creating.pop(str(block.get("tool_use_id") or ""), None)
        found = _CREATED.match(_text(block.get("content")).strip()) if subject and not block.get("is_error") else None
        if found:
            self.steps[found.group(1)] = PlanStep(subject or "", StepStatus.PENDING)
            self.trail.plan = list(self.steps.values())


def _tool_use(trail: Trail, block: dict[str, Any], root: str | None, at: str | None) -> Action:
    name = str(block.get("name") or "?")
    args = block.get("input") if isinstance(block.get("input"), dict) else {}
    call_id = str(block.get("id") or "") or None

    def path(p: Any) -> str:
        return norm_path(str(p), trail.cwd, root)

    if name in READ_TOOLS and args.get("file_path"):
        return Action(Kind.READ, name, reads=(path(args["file_path"]),), at=at, call_id=call_id)
    if name in EDIT_TOOLS and (args.get("file_path") or args.get("notebook_path")):
        edited = path(args.get("file_path") or args["notebook_path"])
        written = {k: v for k, v in args.items() if k not in ("file_path", "notebook_path")}
        return Action(Kind.EDIT, name, edits=(edited,), at=at, call_id=call_id, change=change_digest(edited, written))
    if name in SHELL_TOOLS:
        command = str(args.get("command") or "")
        reads = reads_of_command(command)
        return Action(Kind.READ if reads else Kind.COMMAND, name, command=command, at=at, call_id=call_id,
                      reads=tuple(path(f) for f in reads or ()))
    if name in (TASK_CREATE, TASK_UPDATE):
        return Action(Kind.PLAN, name, at=at, call_id=call_id)
    if name in PLAN_TOOLS:
        todos = args.get("todos") if isinstance(args.get("todos"), list) else []
        plan = [PlanStep(str(t.get("content") or t.get("activeForm") or "").strip(), StepStatus.parse(t.get("status")))
                for t in todos if isinstance(t, dict)]
        if plan:
            trail.plan = [s for s in plan if s.text]
        return Action(Kind.PLAN, name, at=at, call_id=call_id)
    return Action(Kind.OTHER, name, at=at, call_id=call_id)


def _result(action: Action, block: dict[str, Any], extra: Any) -> Action:
    error = bool(block.get("is_error"))
    text = _text(block.get("content"))
    if action.tool not in SHELL_TOOLS:
        return replace(action, ok=not error)
    found = _EXIT.match(text.strip())
    code = int(found.group(1)) if found else (None if error else 0)
    output = text[found.end():] if found else text
    if isinstance(extra, dict) and not error:
        output = "\n".join(str(extra.get(k) or "") for k in ("stdout", "stderr"))
    kept = output_tail(output) if action.kind is Kind.COMMAND else ""
    return replace(action, ok=not error, exit_code=code, output=kept)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(content: Any) -> str:
    return "\n".join(str(b.get("text") or "") for b in _blocks(content) if b.get("type") == "text")
