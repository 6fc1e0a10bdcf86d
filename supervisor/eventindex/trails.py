"""The events of a Codex or Claude Code session, from the agent's own record (its trail), a step at a time.

For these agents the clean transcript is a terminal UI redrawn all the
time; what the agent did and said is in its own record, linked beside the
transcript by the daemon (:mod:`supervisor.trail.records`).  One event per:

* a message typed to the agent (``asked: ...``; agentd's own wakeup and
  prompts left out) and a message the agent wrote (``said: ...``), a long one
  as its head and tail;
* a tool call: the command (``$ pytest -q``), the files read or edited, the
  plan, or the tool and its input, with how it ended (``exit 1``) and the head
  and tail of its output (:data:`OUTPUT_CHARS` each, runs of a repeated line
  kept once); a file's content that a read returned is not kept (the file is
  in the project).

The record types are those the trail parsers read (:mod:`supervisor.trail.codex`,
:mod:`supervisor.trail.claude`; their names and helpers are used from there).
Every text is redacted (the agent's record is not) before it is indexed.

**A step** reads the record's new whole lines from ``pos``.  A call and its
result are one event: a call whose result has not come is *open* (read again
next step, like a transcript's open part, :mod:`.transcripts`) until its
result comes or :data:`PAIR_BYTES` of record follow it without one, so the
events do not depend on where steps cut the file.  ``at`` is the line number
(``where``: ``path:line``); the line number at ``pos`` is kept in the
position's ``turn_start``.
"""

from __future__ import annotations

import calendar
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.kinds import KINDS
from ..trail import claude as claude_trail
from ..trail import codex as codex_trail
from ..trail.common import norm_path, patch_files
from .shaping import AGENTD_TEXT, collapse
from .sources import EventKind, Row
from .transcripts import Position, Step

#: Characters kept of the start and of the end of a tool's output.
OUTPUT_CHARS = 2048
#: Characters kept of the start and of the end of a long message.
MESSAGE_CHARS = 4000
#: A call whose result has not come within this many bytes of record is indexed without it.
PAIR_BYTES = 256 * 1024
#: The least a step reads (a pending call's whole pairing window, and then some).
READ_MIN = 2 * PAIR_BYTES
#: A record line longer than this is skipped (read past, not parsed).
LINE_MAX = 32 << 20


def head_tail(text: str, chars: int) -> str:
    """``text`` with repeated lines collapsed; when longer than ``2 * chars``, its head and tail around a mark."""
    text = collapse(text.strip("\n"))
    if len(text) <= 2 * chars:
        return text
    return f"{text[:chars]}\n[… {len(text) - 2 * chars:,} characters …]\n{text[-chars:]}"


@dataclass
class _Event:
    line: int
    offset: int
    time: float
    body: str
    call: str | None = None  # the call id it waits a result for
    parts: list[str] = field(default_factory=list)


class _Reader:
    """The events of one region's lines (see the module)."""

    def __init__(self, kind: str, root: str, redact: Callable[[str], str]) -> None:
        self.kind, self.root, self.redact = kind, root, redact
        self.events: list[_Event] = []
        self.pending: dict[str, _Event] = {}

    def path(self, p: Any, cwd: Any = None) -> str:
        """Relative to the project root, else to the agent's working directory, where inside it."""
        return norm_path(str(p), cwd if isinstance(cwd, str) else None, self.root)

    def add(self, line: int, offset: int, when: float, body: str, call: str | None = None) -> None:
        event = _Event(line, offset, when, body, call)
        self.events.append(event)
        if call:
            self.pending[call] = event

    def result(self, line: int, offset: int, when: float, call: str, text: str, *, code: int | None = None,
               output: bool = True) -> None:
        tail = [f"exit {code}"] if code is not None else []
        if output and text.strip():
            tail.append(head_tail(text, OUTPUT_CHARS))
        event = self.pending.pop(call, None)
        if event is not None:
            event.parts += tail
            event.call = None
        elif tail:  # its call is in an earlier step, indexed without it
            self.add(line, offset, when, "result: " + "\n".join(tail))

    # -- Codex ---------------------------------------------------------------------------
    def codex(self, line: int, offset: int, when: float, entry: dict[str, Any]) -> None:
        p = entry.get("payload")
        if entry.get("type") != "response_item" or not isinstance(p, dict):
            return
        kind = p.get("type")
        call = str(p.get("call_id") or "")
        if kind == "message" and p.get("role") in ("user", "assistant"):
            text = codex_trail._message_text(p.get("content"))
            if p["role"] == "user" and text.lstrip().startswith(codex_trail.SYNTHETIC_USER + AGENTD_TEXT):
                return
            if text.strip():
                label = "asked" if p["role"] == "user" else "said"
                self.add(line, offset, when, f"{label}: {head_tail(text, MESSAGE_CHARS)}")
        elif kind in ("function_call", "local_shell_call"):
            name = str(p.get("name") or "local_shell")
            args = codex_trail._arguments(p.get("arguments")) if kind == "function_call" else {
                "command": (p.get("action") or {}).get("command") if isinstance(p.get("action"), dict) else None}
            self.add(line, offset, when, self._codex_call(name, args), call or None)
        elif kind == "custom_tool_call":
            name, text = str(p.get("name") or "?"), str(p.get("input") or "")
            body = (f"edited: {', '.join(self.path(f) for f in patch_files(text))}" if name == "apply_patch"
                    else f"tool {name}: {head_tail(text, 500)}")
            self.add(line, offset, when, body, call or None)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out = p.get("output")
            text = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
            found = codex_trail._EXIT.search(text)
            body = text.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in text else ("" if found else text)
            self.result(line, offset, when, call, body, code=int(found.group(1)) if found else None)

    def _codex_call(self, name: str, args: dict[str, Any]) -> str:
        if name in codex_trail.SHELL_TOOLS or name == "local_shell":
            command = codex_trail._command(args.get("cmd") if "cmd" in args else args.get("command"))
            return f"$ {command}"
        if name in codex_trail.PLAN_TOOLS:
            steps = args.get("plan") if isinstance(args.get("plan"), list) else []
            return "plan: " + "; ".join(f"[{s.get('status', '')}] {s.get('step') or s.get('text') or ''}"
                                        for s in steps if isinstance(s, dict))
        if name in codex_trail.GOAL_TOOLS:
            return f"goal: {args.get('objective') or args.get('status') or ''}"
        return f"tool {name}: {head_tail(json.dumps(args, ensure_ascii=False), 500)}"

    # -- Claude Code ---------------------------------------------------------------------
    def claude(self, line: int, offset: int, when: float, entry: dict[str, Any]) -> None:
        message = entry.get("message")
        if entry.get("isSidechain") or entry.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            return
        blocks = claude_trail._blocks(message.get("content"))
        if entry["type"] == "assistant":
            for block in blocks:
                if block.get("type") == "text" and str(block.get("text") or "").strip():
                    self.add(line, offset, when, f"said: {head_tail(str(block['text']), MESSAGE_CHARS)}")
                elif block.get("type") == "tool_use":
                    self.add(line, offset, when, self._claude_call(block, entry.get("cwd")),
                             str(block.get("id") or "") or None)
            return
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for block in results:
            call = str(block.get("tool_use_id") or "")
            event = self.pending.get(call)
            text = claude_trail._text(block.get("content"))
            found = claude_trail._EXIT.match(text.strip())
            extra = entry.get("toolUseResult")
            if isinstance(extra, dict) and not block.get("is_error") and (extra.get("stdout") or extra.get("stderr")):
                text = "\n".join(str(extra.get(k) or "") for k in ("stdout", "stderr"))
            elif found:
                text = text.strip()[found.end():]
            code = int(found.group(1)) if found else (1 if block.get("is_error") else None)
            reads = event is not None and event.body.startswith("read: ")
            self.result(line, offset, when, call, text, code=code, output=not reads)
        if results or entry.get("isMeta") or entry.get("isCompactSummary"):
            return
        text = claude_trail._text(message.get("content"))
        if text.strip() and not text.lstrip().startswith(claude_trail.SYNTHETIC_USER + AGENTD_TEXT):
            self.add(line, offset, when, f"asked: {head_tail(text, MESSAGE_CHARS)}")

    def _claude_call(self, block: dict[str, Any], cwd: Any) -> str:
        name = str(block.get("name") or "?")
        args = block.get("input") if isinstance(block.get("input"), dict) else {}
        if name in claude_trail.SHELL_TOOLS:
            return f"$ {args.get('command') or ''}"
        if name in claude_trail.READ_TOOLS and args.get("file_path"):
            return f"read: {self.path(args['file_path'], cwd)}"
        if name in claude_trail.EDIT_TOOLS and (args.get("file_path") or args.get("notebook_path")):
            return f"edited: {self.path(args.get('file_path') or args['notebook_path'], cwd)}"
        if name in claude_trail.PLAN_TOOLS:
            todos = args.get("todos") if isinstance(args.get("todos"), list) else []
            return "plan: " + "; ".join(f"[{t.get('status', '')}] {t.get('content') or t.get('activeForm') or ''}"
                                        for t in todos if isinstance(t, dict))
        return f"tool {name}: {head_tail(json.dumps(args, ensure_ascii=False), 500)}"


def _time(entry: dict[str, Any], fallback: float) -> float:
    stamp = entry.get("timestamp")
    if isinstance(stamp, str) and len(stamp) >= 19:
        try:
            return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))
        except ValueError:
            pass
    return fallback


def step(path: Path, kind: str, was: Position, limit: int | None, *, root: str,
         redact: Callable[[str], str]) -> Step | None:
    """Read the next region of the record at ``path`` (see the module); None when nothing changed or it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # the link names a file, never a symlink
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if (was.ino, was.size, was.mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns):
            return None
        reset = was.ino is not None and (was.ino != st.st_ino or st.st_size < was.pos)
        pos, number = (0, 1) if reset or was.ino is None else (was.pos, max(was.turn_start, 1))
        want = st.st_size - pos if limit is None else min(max(limit, READ_MIN), st.st_size - pos)
        fh.seek(pos)
        data = fh.read(want)
        reached = pos + len(data) >= st.st_size  # the file's end: a torn last line waits for its newline
        skipped = 0  # bytes of one line too long to parse, stepped over
        if b"\n" not in data and pos + len(data) < st.st_size:  # one line longer than a step: read it whole
            fh.seek(pos)
            data = fh.readline(LINE_MAX)
            if not data.endswith(b"\n") and len(data) == LINE_MAX:
                skipped = len(data)
                while not data.endswith(b"\n") and data:
                    data = fh.readline(1 << 20)
                    skipped += len(data)
                skipped = skipped if data.endswith(b"\n") else 0
                data = b""
    data = data[:data.rfind(b"\n") + 1]
    region_end = pos + len(data) + skipped
    at_end = reached or region_end >= st.st_size
    reader = _Reader(kind, root, redact)
    wanted = KINDS[kind].record_lines if kind in KINDS else ()  # config/kinds.py
    offset, line = pos, number
    for raw in data.split(b"\n")[:-1]:
        if any(w in raw for w in wanted):
            try:
                entry = json.loads(raw)
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                getattr(reader, kind, lambda *a: None)(line, offset, _time(entry, st.st_mtime), entry)
        offset += len(raw) + 1
        line += 1
    line += 1 if skipped else 0
    # a call still waiting for its result, with less than PAIR_BYTES of record after it so far, stays open
    waiting = [e for e in reader.pending.values() if e.call and region_end - e.offset < PAIR_BYTES]
    open_at = min((e.offset for e in waiting), default=region_end)
    open_line = min((e.line for e in waiting), default=line)
    rows = [Row(EventKind.TRAIL, e.line, e.time, redact("\n".join([e.body, *e.parts])))
            for e in reader.events if e.body.strip()]
    more = not at_end
    size = st.st_size if at_end else -1  # a waiting call is read again when the record grows
    return Step(Position(st.st_ino, size, st.st_mtime_ns, open_at, open_line), number, reset, rows,
                len(data) + skipped, more)
