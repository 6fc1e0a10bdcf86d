"""The one Server-Sent Events writer under both fake model servers (stdlib only).

tests/fake_responses.py (OpenAI Responses, for Codex) and tests/fake_anthropic.py
(Anthropic Messages, for Claude Code) stream their answers the same way: a 200
with ``text/event-stream``, one ``event: NAME`` / ``data: JSON`` block per
event, flushed one by one, then the connection closes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_sse(handler: BaseHTTPRequestHandler, events: Iterable[tuple[str, dict[str, Any]]]) -> bool:
    """Stream ``(name, data)`` events as the reply to ``handler``'s request; False if the client left early."""
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("cache-control", "no-cache")
    handler.send_header("connection", "close")
    handler.end_headers()
    handler.close_connection = True
    try:
        for name, data in events:
            handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True
