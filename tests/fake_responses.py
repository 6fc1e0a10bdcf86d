"""A fake OpenAI Responses API server for driving the real Codex CLI offline (stdlib only).

Binds 127.0.0.1 only.  ``POST <base>/responses`` answers with a Server-Sent
Events stream shaped like the real API (``response.created``,
``response.output_item.added``/``.done``, ``response.output_text.delta``,
``response.completed`` with a ``usage`` object), which is what Codex 0.169
reads.  What it answers:

* the TUI's title side request (``text.format`` is a JSON schema with a
  ``title`` property)            -> a message ``{"title": "..."}``;
* a request whose last input item is a tool output -> "DONE: tool ran (...)", or the
  text of a ``SAY: <text>`` line of that output (a command scripts the model's reply);
* a compaction request (Codex's compaction prompt)  -> "SUMMARY: ...";
* the latest user message contains ``CHECKPOINT``   -> an ``exec_command`` tool
  call that appends a line to ``.agent/engram.md`` (``agentd note ... --confirmed``) and runs
  ``agentd decide "<decision>" --why "..."`` (the decision text is set with
  ``/_control {"decision": ...}``), then, on the follow-up request, a message;
* ``RUN: <cmd>`` in the latest user message        -> ``exec_command`` with that cmd;
* a latest user message starting ``TRAIL:``         -> the scripted trail session of
  tests/trail_scenario.py (reads, a plan, a failing test, an ``apply_patch`` edit);
  ``/_control {"checkpoint": "ignore"}`` makes it answer the checkpoint prompt with
  a plain message (no notes written);
* anything else                                     -> "ECHO: <first line>".

``usage.input_tokens`` is ``/_control``'s ``input_tokens`` when set, else
about a quarter of the request body's length.  ``POST /_control`` with a JSON
object updates the knobs (``input_tokens``, ``decision``, ``engram``,
``delay``) and returns them.  Every request is one JSON line in the log
(``--log``): seq, path, the ``x-codex-turn-metadata`` header, the parsed body.

Run: ``python tests/fake_responses.py --port 0 --port-file F --log L``
(the port is written to F atomically once the socket listens).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

try:
    from tests.fake_sse import send_sse
except ImportError:  # run as a script: tests/ itself is on sys.path
    from fake_sse import send_sse  # type: ignore[no-redef]

COMPACT_MARKERS = ("CONTEXT CHECKPOINT COMPACTION", "handoff summary")

_counter = itertools.count(1)
_lock = threading.Lock()
CONTROL: dict[str, Any] = {
    "input_tokens": None,
    "decision": "Use the fake model for the e2e test",
    "engram": "checkpoint flushed by the fake model",
    "delay": 0.0,
    "checkpoint": "confirm",  # or "ignore": answer the checkpoint prompt without writing anything
}
LOG_PATH: str | None = None


def log(obj: dict[str, Any]) -> None:
    if not LOG_PATH:
        return
    obj = {**obj, "ts": time.time()}
    with _lock, open(LOG_PATH, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(obj) + "\n")


def message_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(s["text"] for s in content or [] if isinstance(s, dict) and isinstance(s.get("text"), str))


def last_user_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item.get("type") == "message" and item.get("role") == "user":
            return message_text(item)
    return ""


def shell_call(body: dict[str, Any], cmd: str, call_id: str) -> dict[str, Any]:
    names = {t.get("name") for t in body.get("tools") or []}
    if "exec_command" in names or not names:
        name, args = "exec_command", {"cmd": cmd}
    elif "shell_command" in names:
        name, args = "shell_command", {"command": cmd}
    else:
        name, args = "shell", {"command": ["bash", "-lc", cmd]}
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": json.dumps(args)}


def message(msg_id: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": msg_id, "content": [{"type": "output_text", "text": text}]}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def answer(seq: int, body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input") or []
    last = items[-1] if items else {}
    user = last_user_text(items)
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        props = (fmt.get("schema") or {}).get("properties") or {}
        return [message(f"msg_{seq}", json.dumps({"title": "Fake task title"}) if "title" in props else "{}")]
    scripted = trail_answer(seq, body, items, user)
    if scripted is not None:
        return scripted
    if last.get("type") in ("function_call_output", "custom_tool_call_output"):
        output = last.get("output")
        if not isinstance(output, str):
            output = json.dumps(output)
        said = re.search(r"^SAY: (.+)$", output, re.M)  # the command's output scripts the reply (plans' claims)
        if said:
            return [message(f"msg_{seq}", said.group(1).strip())]
        return [message(f"msg_{seq}", "DONE: tool ran (" + output.replace("\n", " ")[:160] + ")")]
    if any(m in user for m in COMPACT_MARKERS):
        return [message(f"msg_{seq}", "SUMMARY: fake compaction summary.")]
    if not body.get("tools"):
        return [message(f"msg_{seq}", "ECHO(no tools): " + user[:60])]
    run = re.search(r"RUN: (.+)", user)
    if run:
        return [shell_call(body, run.group(1).strip(), f"call_{seq}")]
    if "CHECKPOINT" in user:
        line = f"{CONTROL['engram']} (request {seq})"
        cmd = (f"agentd note {_quote(line)} --confirmed && "
               f"agentd decide {_quote(str(CONTROL['decision']))} --why {_quote('because the e2e test asks, so it is recorded')}"
               " && echo written")
        return [shell_call(body, cmd, f"call_{seq}")]
    first = user.strip().splitlines()[0] if user.strip() else ""
    return [message(f"msg_{seq}", f"ECHO: {first[:80]}")]


def trail_answer(seq: int, body: dict[str, Any], items: list[dict[str, Any]], user: str) -> list[dict[str, Any]] | None:
    """The trail scenario's next step (tests/trail_scenario.py), or None when it does not apply."""
    try:
        from tests import trail_scenario as ts
    except ImportError:  # run as a script from anywhere
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import trail_scenario as ts  # type: ignore[no-redef]

    if CONTROL.get("checkpoint") == "ignore" and "CHECKPOINT" in user and body.get("tools"):
        return [message(f"msg_{seq}", ts.IGNORED)]
    if not user.startswith(ts.ASK_MARK) or not body.get("tools"):
        return None
    asked = max(i for i, item in enumerate(items) if item.get("type") == "message" and item.get("role") == "user")
    done = sum(1 for item in items[asked:] if item.get("type") in ("function_call_output", "custom_tool_call_output"))
    step, call = ts.step(done), f"call_{seq}"
    if step.kind == "read":
        return [shell_call(body, f"cat {step.path}", call)]
    if step.kind == "run":
        return [shell_call(body, step.command, call)]
    if step.kind == "plan":
        args = {"explanation": "trail scenario", "plan": [{"step": s, "status": st} for s, st in step.plan]}
        return [{"type": "function_call", "id": f"fc_{call}", "call_id": call, "name": "update_plan",
                 "arguments": json.dumps(args)}]
    if step.kind == "edit":
        if any(t.get("name") == "apply_patch" and t.get("type") == "custom" for t in body.get("tools") or []):
            return [{"type": "custom_tool_call", "id": f"ctc_{call}", "call_id": call, "name": "apply_patch",
                     "input": ts.patch()}]
        return [shell_call(body, f"apply_patch <<'PATCH'\n{ts.patch()}PATCH", call)]
    return [message(f"msg_{seq}", ts.DONE)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, code: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        log({"method": "GET", "path": self.path})
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            return self._json(200, {"object": "list", "data": [], "models": []})
        if self.path == "/_control":
            return self._json(200, CONTROL)
        return self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        path = self.path.split("?")[0]
        seq = next(_counter)
        try:
            meta = json.loads(self.headers.get("x-codex-turn-metadata") or "{}")
        except ValueError:
            meta = {}
        log({"seq": seq, "method": "POST", "path": path, "meta": meta, "body_len": len(raw), "body": body})
        if not isinstance(body, dict):
            return self._json(400, {"error": {"message": "bad json"}})
        if path == "/_control":
            with _lock:
                CONTROL.update(body)
                state = dict(CONTROL)
            return self._json(200, state)
        if not path.endswith("/responses"):
            return self._json(404, {"error": {"message": "not found"}})
        if CONTROL.get("delay"):
            time.sleep(float(CONTROL["delay"]))
        out = answer(seq, body)
        in_tok = int(CONTROL["input_tokens"]) if CONTROL.get("input_tokens") is not None else len(raw) // 4
        usage = {"input_tokens": in_tok, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 7,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": in_tok + 7}
        rid = f"resp_{seq}"
        events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": rid}}]
        for item in out:
            if item["type"] == "message":
                events.append({"type": "response.output_item.added", "item": {**item, "content": []}})
                events.append({"type": "response.output_text.delta", "item_id": item["id"], "delta": item["content"][0]["text"]})
            events.append({"type": "response.output_item.done", "item": item})
        events.append({"type": "response.completed", "response": {"id": rid, "usage": usage}})
        log({"seq": seq, "reply": out, "usage": usage})
        if not send_sse(self, ((ev["type"], ev) for ev in events)):
            log({"seq": seq, "client_disconnected": True})


def serve(port: int, port_file: str | None, log_path: str | None) -> ThreadingHTTPServer:
    """Bind 127.0.0.1:port (0 = any), write the port file; the caller runs ``serve_forever``."""
    global LOG_PATH
    LOG_PATH = log_path
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    if port_file:
        tmp = port_file + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(server.server_address[1]))
        os.replace(tmp, port_file)
    return server


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    args = ap.parse_args(argv)
    server = serve(args.port, args.port_file, args.log)
    print(f"fake responses server on 127.0.0.1:{server.server_address[1]}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
