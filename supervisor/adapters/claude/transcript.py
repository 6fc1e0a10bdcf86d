"""Claude Code's own records of a session: its transcript (the context figure) and its status line (the window)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ...durable import JsonlTail

__all__ = ["StatusLine", "TranscriptMeter", "project_dir_name"]


def project_dir_name(cwd: Path) -> str:
    """The directory Claude Code keeps a workdir's transcripts in (every non-alphanumeric character -> '-')."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


class TranscriptMeter:
    """Context use from a Claude Code session transcript, read incrementally.

    Each :meth:`read` consumes only the bytes appended since the last one
    (whole lines; a torn last line waits for its end).
    """

    def __init__(self, path: Path | None = None) -> None:
        self._tail = JsonlTail(path)
        self.used: int | None = None
        self.source = "claude transcript"

    @property
    def path(self) -> Path | None:
        return self._tail.path

    @property
    def offset(self) -> int:
        """Bytes of the transcript consumed so far."""
        return self._tail.offset

    def follow(self, path: Path) -> None:
        """Switch to another transcript (``/clear`` starts a new session id)."""
        if path != self._tail.path:
            self._tail.follow(path)
            self.used = None

    def read(self) -> int | None:
        for line in self._tail.lines():
            self._entry(line)
        return self.used

    def _entry(self, line: bytes) -> None:
        if b'"usage"' not in line and b"compact_boundary" not in line:
            return  # most entries: no need to parse
        try:
            entry = json.loads(line)
        except ValueError:
            return
        if not isinstance(entry, dict) or entry.get("isSidechain"):
            return
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            post = (entry.get("compactMetadata") or {}).get("postTokens")
            if isinstance(post, int):
                self.used, self.source = post, "claude transcript (after compaction)"
            return
        message = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(message, dict) or message.get("model") == "<synthetic>":
            return
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        self.used = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        self.source = "claude transcript"


class StatusLine:
    """The window Claude Code reports to its status-line command (``context_window.context_window_size``).

    agentd's settings make the status line a command that copies its JSON
    input to a file (:func:`~supervisor.adapters.claude.setup.status_line_command`);
    this reads the newest one, only when the file changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.window: int | None = None
        self._mtime: int | None = None

    def read(self) -> int | None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            return self.window
        if mtime != self._mtime:
            self._mtime = mtime
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return self.window
            size = (data.get("context_window") or {}).get("context_window_size") if isinstance(data, dict) else None
            if isinstance(size, int) and size > 0:
                self.window = size
        return self.window
