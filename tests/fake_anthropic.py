"""A fake Anthropic Messages API for driving the real Claude Code CLI offline (stdlib only).

Binds 127.0.0.1 only.  Every request is logged as one JSON line (method, path,
headers, the whole body: system prompt, messages, tools) and every reply as
another, so tests can check what the agent was told.

``POST /v1/messages`` (streamed as SSE or plain JSON, as asked):

* the last user block is a ``tool_result``      -> text ``DONE: tool ran (...)``, or the text of a
  ``SAY: <text>`` line of its content (a command scripts the model's reply)
* a compaction request ("summary of the conversation")
                                                -> ``<summary>FAKE SUMMARY ...</summary>``
* no tools in the request (titles, topic checks) -> a short text
* the latest user text contains ``CHECKPOINT``  -> a ``Bash`` tool_use that runs
  ``agentd note ... --confirmed`` (a line appended to ``.agent/engram.md``) and
  ``agentd decide ...``; both texts name the request's sequence number
* the latest user text contains ``RUN: <cmd>``  -> a ``Bash`` tool_use running ``cmd``
* the latest user text starts with ``TRAIL:``  -> the scripted trail session of
  tests/trail_scenario.py (``Read`` twice, ``TodoWrite``, a failing ``Bash``, an ``Edit``);
  the control ``{"checkpoint": "ignore"}`` makes it answer the checkpoint prompt
  with plain text (nothing written), ``{"cwd": DIR}`` names the agent's working
  directory (else it is read from the system prompt)
* the latest user text contains ``WRITE: <path> <text>`` -> a ``Write`` tool_use creating ``path``
  (absolute) with ``text``
* otherwise                                     -> ``ECHO: <first line>``

Usage: ``input_tokens`` is ``len(body) // 4`` unless the control says otherwise.
The control is ``{"input_tokens": N, "when": "substring"}`` (``when`` optional:
the override applies only when the latest user text contains it); set it with
``POST /_control`` or, from outside a network namespace, by writing the JSON
to the ``--control-file`` (read on every request).

Run: ``python tests/fake_anthropic.py --port 0 --port-file F --log L [--control-file C]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

try:
    from tests.fake_sse import send_sse
except ImportError:  # run as a script: tests/ itself is on sys.path
    from fake_sse import send_sse  # type: ignore[no-redef]

SUMMARY = "<summary>FAKE SUMMARY: the task goes on; notes are in .agent/</summary>"


class State:
    def __init__(self, log: Path | None, control_file: Path | None) -> None:
        self.log = log
        self.control_file = control_file
        self.control: dict[str, Any] = {}
        self.seq = itertools.count(1)
        self.lock = threading.Lock()

    def record(self, item: dict[str, Any]) -> None:
        if self.log is None:
            return
        line = json.dumps(dict(item, ts=time.time())) + "\n"
        with self.lock, open(self.log, "a", encoding="utf-8") as f:
            f.write(line)

    def current_control(self) -> dict[str, Any]:
        control = dict(self.control)
        if self.control_file is not None:
            try:
                control.update(json.loads(self.control_file.read_text() or "{}"))
            except (OSError, ValueError):
                pass
        return control


def blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def latest_user_text(messages: list[dict[str, Any]]) -> str:
    """The text blocks of the newest user message that has any text."""
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in blocks(message.get("content")) if b.get("type") == "text"]
            if texts:
                return "\n".join(texts)
    return ""


def checkpoint_command(seq: int) -> str:
    note = f"fake model checkpoint {seq}: confirmed the parser port state"
    decision = f"fake model decision {seq}: keep the parser plan"
    why = f"because checkpoint {seq} confirmed it, so the next session continues it"
    return (f"agentd note {shlex.quote(note)} --confirmed && "
            f"agentd decide {shlex.quote(decision)} --why {shlex.quote(why)} && echo written")


def reply_for(seq: int, body: dict[str, Any], raw_len: int, control: dict[str, Any]) -> tuple[list[dict[str, Any]], str, dict[str, int]]:
    messages = body.get("messages") or []
    last = blocks(messages[-1].get("content")) if messages else []
    text = latest_user_text(messages)
    system = json.dumps(body.get("system") or "")
    out: list[dict[str, Any]] = []
    stop = "end_turn"
    scripted = trail_reply(seq, body, control)
    if scripted is not None:
        out, stop = scripted
    elif last and last[-1].get("type") == "tool_result":
        content = last[-1].get("content")
        if isinstance(content, list):
            content = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
        said = re.search(r"^SAY: (.+)$", str(content), re.M)  # the command's output scripts the reply
        out.append({"type": "text", "text": said.group(1).strip() if said else f"DONE: tool ran ({str(content)[:100]})"})
    elif "summary of the conversation" in (text + system).lower():
        out.append({"type": "text", "text": SUMMARY})
    elif not body.get("tools"):
        first = text.strip().splitlines()[0][:60] if text.strip() else "ok"
        out.append({"type": "text", "text": f"ECHO(no tools): {first}"})
    else:
        run = re.search(r"RUN: (.+)", text)
        write = None if run else re.search(r"WRITE: (\S+) (.+)", text)
        command = run.group(1).strip() if run else (checkpoint_command(seq) if "CHECKPOINT" in text else None)
        if write:
            out.append({"type": "tool_use", "id": f"toolu_{seq:04d}", "name": "Write",
                        "input": {"file_path": write.group(1), "content": write.group(2).strip() + "\n"}})
            stop = "tool_use"
        elif command:
            out.append({"type": "tool_use", "id": f"toolu_{seq:04d}", "name": "Bash",
                        "input": {"command": command, "description": "agentd test command"}})
            stop = "tool_use"
        else:
            first = text.strip().splitlines()[0] if text.strip() else ""
            out.append({"type": "text", "text": f"ECHO: {first[:80]}"})
    tokens = raw_len // 4
    if control.get("input_tokens") is not None and (not control.get("when") or control["when"] in text):
        tokens = int(control["input_tokens"])
    usage = {"input_tokens": tokens, "output_tokens": 9, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return out, stop, usage


def _own_text(message: dict[str, Any]) -> str:
    """A user message's text without Claude Code's ``<system-reminder>`` blocks."""
    return "\n".join(b.get("text", "") for b in blocks(message.get("content"))
                     if b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<system-reminder>"))


def trail_reply(seq: int, body: dict[str, Any], control: dict[str, Any]) -> tuple[list[dict[str, Any]], str] | None:
    """The trail scenario's next step (tests/trail_scenario.py), or None when it does not apply."""
    try:
        from tests import trail_scenario as ts
    except ImportError:  # run as a script from anywhere
        import sys

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import trail_scenario as ts  # type: ignore[no-redef]

    messages = body.get("messages") or []
    asked = next((i for i in range(len(messages) - 1, -1, -1)
                  if messages[i].get("role") == "user" and _own_text(messages[i]).strip()), None)
    if asked is None or not body.get("tools"):
        return None
    text = _own_text(messages[asked]).strip()
    if control.get("checkpoint") == "ignore" and "CHECKPOINT" in text:
        return [{"type": "text", "text": ts.IGNORED}], "end_turn"
    if not text.startswith(ts.ASK_MARK):
        return None
    done = sum(1 for m in messages[asked + 1:] for b in blocks(m.get("content")) if b.get("type") == "tool_result")
    step = ts.step(done)
    cwd = control.get("cwd") or _cwd_from_system(body)
    tool: tuple[str, dict[str, Any]] | None = None
    if step.kind == "read":
        tool = ("Read", {"file_path": os.path.join(cwd, step.path)})
    elif step.kind == "run":
        tool = ("Bash", {"command": step.command, "description": "run the parser check"})
    elif step.kind == "plan":
        tool = ("TodoWrite", {"todos": [{"content": s, "status": st, "activeForm": s} for s, st in step.plan]})
    elif step.kind == "edit":
        tool = ("Edit", {"file_path": os.path.join(cwd, step.path), "old_string": ts.EDIT_OLD, "new_string": ts.EDIT_NEW})
    if tool is None:
        return [{"type": "text", "text": ts.DONE}], "end_turn"
    return [{"type": "tool_use", "id": f"toolu_{seq:04d}", "name": tool[0], "input": tool[1]}], "tool_use"


def _cwd_from_system(body: dict[str, Any]) -> str:
    """The agent's working directory as Claude Code states it ("Primary working directory: ...")."""
    texts = [b.get("text", "") for b in blocks(body.get("system"))]
    texts += [b.get("text", "") for m in body.get("messages") or [] for b in blocks(m.get("content"))]
    for text in texts:
        found = re.search(r"Primary working directory: *(\S+)", str(text))
        if found:
            return found.group(1)
    return os.getcwd()


def sse_events(msg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    usage = msg["usage"]
    start = dict(msg, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": dict(block, input={})}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(block["input"])}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.record({"method": "GET", "path": self.path})
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

        def do_HEAD(self) -> None:
            state.record({"method": "HEAD", "path": self.path})
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            seq = next(state.seq)
            path = self.path.split("?")[0]
            state.record({"seq": seq, "method": "POST", "path": self.path, "headers": dict(self.headers),
                          "body_len": len(raw), "body": body})
            if path == "/_control":
                state.control.update(body if isinstance(body, dict) else {})
                return self._json(200, state.control)
            if path.endswith("/messages/count_tokens"):
                return self._json(200, {"input_tokens": len(raw) // 4})
            if path.endswith("/v1/messages") and isinstance(body, dict):
                return self._messages(seq, len(raw), body)
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

        def _messages(self, seq: int, raw_len: int, body: dict[str, Any]) -> None:
            content, stop, usage = reply_for(seq, body, raw_len, state.current_control())
            msg = {"id": f"msg_{seq:04d}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
                   "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
            state.record({"seq": seq, "reply": content, "usage": usage})
            if not body.get("stream"):
                return self._json(200, msg)
            send_sse(self, sse_events(msg))

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, help="written (atomically) once the server listens")
    parser.add_argument("--log", type=Path, help="JSON lines: every request and reply")
    parser.add_argument("--control-file", type=Path, help="JSON control read on every request")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(State(args.log, args.control_file)))
    if args.port_file:
        tmp = args.port_file.with_name(args.port_file.name + ".tmp")
        tmp.write_text(f"{server.server_address[1]} {os.getpid()}\n")
        os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
