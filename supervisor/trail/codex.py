"""Codex's trail, from its rollout file (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``).

What Codex 0.169.0 writes there (verified against the fake Responses server):

* ``session_meta`` / ``turn_context`` — the session id and the working directory;
* ``response_item`` — each item exactly as sent to or received from the model:
  user ``message`` s (also Codex's own ``<environment_context>`` and
  AGENTS.md messages), ``function_call`` (``exec_command`` with ``{"cmd": ...}``,
  ``update_plan`` with ``{"plan": [{"step", "status"}]}``, ``create_goal``
  ``{objective}`` / ``update_goal`` ``{status}``), ``custom_tool_call``
  (``apply_patch`` with the patch as ``input``) and their ``*_output`` items
  (``Process exited with code N`` / ``Exit code: N``);
* ``event_msg`` ``token_count`` after each model response: ``info.total_token_usage``
  adds up every request of the thread (``total_tokens`` = input, cached
  included, + output); each tool call gets the figure of the response that
  made it (:attr:`~.model.Action.tokens`);
* ``event_msg`` ``item_completed`` — the finished items with what Codex knows
  of them: ``UserMessage`` (only what a person or agentd typed),
  ``CommandExecution`` (``exit_code``, ``status``, ``parsed_cmd`` with the
  files a command reads), ``FileChange`` (the files an ``apply_patch``
  changed, absolute paths).

Each tool call becomes one :class:`~.model.Action`, in the order the model
made them; the completion events refine it (exit status, files).  The plan is
the newest ``update_plan`` the model sent, kept even when the CLI refused it:
it is what the agent said its plan was (0.169.0's TUI offers ``create_goal`` /
``update_goal`` rather than ``update_plan``, and answers the latter
``unsupported call``; the goal is kept too).  Lines that are not
JSON (a torn last line) are skipped.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .common import change_digest, norm_path, output_tail, patch_files, reads_of_command
from .model import Action, Kind, PlanStep, StepStatus, Trail

SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "container.exec", "local_shell"})
PLAN_TOOLS = frozenset({"update_plan"})
GOAL_TOOLS = frozenset({"create_goal", "update_goal"})
READ_PARTS = frozenset({"read", "list_files", "search"})
#: Codex's own user-role messages (not asks).
SYNTHETIC_USER = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<hook_prompt",
                  "<turn_aborted>", "<subagent_notification>", "Another language model started")
_EXIT = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)", re.M)
#: Only these lines are parsed (a cheap test on the raw bytes first: rollouts grow to megabytes).
_WANTED = (b'"session_meta"', b'"turn_context"', b'"function_call', b'"custom_tool_call', b'"local_shell_call',
           b'"item_completed"', b'"user_message"', b'"role":"user"', b'"role": "user"', b'"exec_command_end"',
           b'"patch_apply_end"', b'"token_count"')


def read_rollout(path: Path, root: str | None = None) -> Trail:
    """The trail of the rollout file at ``path`` (blocking: reads the whole file)."""
    with open(path, "rb") as fh:
        trail = parse_rollout(fh, root, source=f"codex rollout {path.name}")
    return trail


def parse_rollout(lines: Iterable[bytes | str], root: str | None = None, *, source: str = "codex rollout") -> Trail:
    """The trail in rollout ``lines`` (see the module docstring); paths relative to ``root`` where inside it."""
    parser = _Parser(Trail(source=source), root)
    for raw in lines:
        data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
        if not any(w in data for w in _WANTED):
            continue
        try:
            entry = json.loads(data)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("payload"), dict):
            parser.entry(str(entry.get("type")), entry["payload"], entry.get("timestamp"))
    return parser.finish()


class _Parser:
    def __init__(self, trail: Trail, root: str | None) -> None:
        self.trail = trail
        self.root = root
        self.by_call: dict[str, int] = {}  # call id -> index in trail.actions
        self.user_items: list[str] = []  # response_item user messages (fallback asks)
        self.typed: list[str] = []  # UserMessage / user_message events (preferred asks)
        self.unpriced: list[int] = []  # actions made since the last token_count (their response's figure is next)

    def path(self, p: str, cwd: str | None = None) -> str:
        return norm_path(p, cwd or self.trail.cwd, self.root)

    # -- dispatch ---------------------------------------------------------------------
    def entry(self, kind: str, p: dict[str, Any], at: Any) -> None:
        at = at if isinstance(at, str) else None
        if kind == "session_meta":
            self.trail.session = str(p.get("id") or p.get("session_id") or "") or self.trail.session
            self.trail.cwd = _cwd(p.get("cwd")) or self.trail.cwd
        elif kind == "turn_context":
            self.trail.cwd = _cwd(p.get("cwd")) or self.trail.cwd
        elif kind == "response_item":
            self.response_item(p, at)
        elif kind == "event_msg":
            self.event(p)

    def response_item(self, p: dict[str, Any], at: str | None) -> None:
        kind = p.get("type")
        if kind == "message" and p.get("role") == "user":
            text = _message_text(p.get("content"))
            if text and not text.lstrip().startswith(SYNTHETIC_USER):
                self.user_items.append(text)
        elif kind == "function_call":
            self.call(str(p.get("name") or "?"), _arguments(p.get("arguments")), str(p.get("call_id") or ""), at)
        elif kind == "local_shell_call":
            action = (p.get("action") or {}) if isinstance(p.get("action"), dict) else {}
            self.call("local_shell", {"command": action.get("command")}, str(p.get("call_id") or p.get("id") or ""), at)
        elif kind == "custom_tool_call":
            name, text = str(p.get("name") or "?"), str(p.get("input") or "")
            if name == "apply_patch":
                edits = tuple(self.path(f) for f in patch_files(text))
                self.add(Action(Kind.EDIT, name, edits=edits, at=at, call_id=str(p.get("call_id") or ""),
                                change=change_digest(",".join(edits), _patch_body(text))))
            else:
                self.add(Action(Kind.OTHER, name, at=at, call_id=str(p.get("call_id") or "")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.output(str(p.get("call_id") or ""), p.get("output"))

    def call(self, name: str, args: dict[str, Any], call_id: str, at: str | None) -> None:
        if name in SHELL_TOOLS:
            command = _command(args.get("cmd") if "cmd" in args else args.get("command"))
            cwd = _cwd(args.get("workdir")) or None
            if command.lstrip().startswith("apply_patch"):
                edits = tuple(self.path(f, cwd) for f in patch_files(command))
                self.add(Action(Kind.EDIT, name, command=command, at=at, call_id=call_id, edits=edits,
                                change=change_digest(",".join(edits), _patch_body(command))))
                return
            reads = reads_of_command(command)
            self.add(Action(Kind.READ if reads else Kind.COMMAND, name, command=command, at=at, call_id=call_id,
                            reads=tuple(self.path(f, cwd) for f in reads or ())))
        elif name in PLAN_TOOLS:
            steps = args.get("plan") if isinstance(args.get("plan"), list) else []
            plan = [PlanStep(str(s.get("step") or s.get("text") or "").strip(), StepStatus.parse(s.get("status")))
                    for s in steps if isinstance(s, dict)]
            if plan:
                self.trail.plan = [s for s in plan if s.text]
            self.add(Action(Kind.PLAN, name, at=at, call_id=call_id))
        elif name in GOAL_TOOLS:
            if name == "create_goal" and str(args.get("objective") or "").strip():
                self.trail.goal, self.trail.goal_status = str(args["objective"]).strip(), "active"
            elif name == "update_goal" and args.get("status") and self.trail.goal is not None:
                self.trail.goal_status = str(args["status"])
            self.add(Action(Kind.PLAN, name, at=at, call_id=call_id))
        else:
            self.add(Action(Kind.OTHER, name, at=at, call_id=call_id))

    def add(self, action: Action) -> None:
        if action.call_id:
            self.by_call[action.call_id] = len(self.trail.actions)
        self.unpriced.append(len(self.trail.actions))
        self.trail.actions.append(action)

    def tokens(self, info: Any) -> None:
        """A ``token_count``: the thread's tokens so far, for the calls of the response it follows."""
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(total, dict):
            return
        used = total.get("total_tokens")
        if not isinstance(used, int):
            parts = [total.get("input_tokens"), total.get("output_tokens")]
            if not all(isinstance(x, int) for x in parts):
                return
            used = sum(parts)
        for index in self.unpriced:
            self.trail.actions[index] = replace(self.trail.actions[index], tokens=used)
        self.unpriced = []

    def update(self, call_id: str, **changes: Any) -> None:
        index = self.by_call.get(call_id)
        if index is not None:
            self.trail.actions[index] = replace(self.trail.actions[index], **changes)

    def output(self, call_id: str, output: Any) -> None:
        index = self.by_call.get(call_id)
        if index is None:
            return
        text = output if isinstance(output, str) else json.dumps(output)
        action = self.trail.actions[index]
        found = _EXIT.search(text)
        if text.startswith("unsupported call"):
            self.update(call_id, ok=False)
        elif found and action.exit_code is None:
            code = int(found.group(1))
            body = text.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in text else ""
            kept = action.output or (output_tail(body) if action.kind is Kind.COMMAND else "")
            self.update(call_id, exit_code=code, ok=code == 0, output=kept)

    def event(self, p: dict[str, Any]) -> None:
        kind = p.get("type")
        if kind == "item_completed" and isinstance(p.get("item"), dict):
            self.item(p["item"])
        elif kind == "token_count":
            self.tokens(p.get("info"))
        elif kind == "user_message" and isinstance(p.get("message"), str):
            self.typed.append(p["message"])
        elif kind == "exec_command_end":
            self.command_done(str(p.get("call_id") or ""), p.get("exit_code"), p.get("aggregated_output") or p.get("stdout"),
                              p.get("parsed_cmd"), _cwd(p.get("cwd")))
        elif kind == "patch_apply_end" and isinstance(p.get("changes"), dict):
            self.update(str(p.get("call_id") or ""), edits=self.change_paths(p["changes"]), ok=bool(p.get("success", True)))

    def item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "UserMessage":
            text = _message_text(item.get("content"))
            if text:
                self.typed.append(text)
        elif kind == "CommandExecution":
            self.command_done(str(item.get("id") or ""), item.get("exit_code"), item.get("aggregated_output"),
                              item.get("parsed_cmd"), _cwd(item.get("cwd")))
        elif kind == "FileChange" and isinstance(item.get("changes"), dict):
            ok = str(item.get("status") or "completed") == "completed"
            self.update(str(item.get("id") or ""), kind=Kind.EDIT, edits=self.change_paths(item["changes"]), ok=ok)

    def change_paths(self, changes: dict[str, Any]) -> tuple[str, ...]:
        out = []
        for path, change in changes.items():
            out.append(self.path(path))
            if isinstance(change, dict) and change.get("move_path"):
                out.append(self.path(str(change["move_path"])))
        return tuple(dict.fromkeys(out))

    def command_done(self, call_id: str, code: Any, output: Any, parsed: Any, cwd: str | None) -> None:
        index = self.by_call.get(call_id)
        if index is None:
            return
        action = self.trail.actions[index]
        changes: dict[str, Any] = {}
        if isinstance(code, int):
            changes.update(exit_code=code, ok=code == 0)
        if isinstance(parsed, list) and parsed and action.kind is not Kind.EDIT:
            parts = [x for x in parsed if isinstance(x, dict)]
            reads = tuple(self.path(str(x["path"]), cwd) for x in parts if x.get("type") == "read" and x.get("path"))
            changes["reads"] = reads or action.reads
            changes["kind"] = Kind.READ if parts and all(x.get("type") in READ_PARTS for x in parts) else Kind.COMMAND
        if output and changes.get("kind", action.kind) is Kind.COMMAND:
            changes["output"] = output_tail(str(output))  # a read's output is the file: not kept
        self.update(call_id, **changes)

    def finish(self) -> Trail:
        self.trail.asks = self.typed if self.typed else self.user_items
        return self.trail


def _patch_body(text: str) -> str:
    """A patch's hunks without its file headers (the files are named apart, as the trail reads them)."""
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("*** "))


def _cwd(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value[len("file://"):] if value.startswith("file://") else value


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        data = json.loads(value) if isinstance(value, str) else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _command(value: Any) -> str:
    if isinstance(value, list):
        words = [str(w) for w in value]
        if len(words) == 3 and words[0].endswith("sh") and words[1] in ("-lc", "-c"):
            return words[2]  # ["bash", "-lc", "the command"]
        return shlex.join(words)
    return str(value or "")


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)
