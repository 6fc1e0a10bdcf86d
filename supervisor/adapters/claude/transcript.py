"""Claude Code's own records of a session: its transcript and its status line, the two sources of the context figure.

Both say how many tokens the conversation holds: the transcript's newest
``message.usage`` (or a compaction's ``postTokens``), and the status line's
``context_window.current_usage``; only the status line says the window
(``context_window.context_window_size``).  Each keeps *when* it learnt its
figure (the transcript entry's own ``timestamp``, the status file's
modification time), so the adapter takes the freshest (:func:`freshest`):
either can lag (Claude Code writes its transcript around the Stop hook, not
always before it; the status line is redrawn when the screen is).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from ...durable import JsonlTail

__all__ = ["StatusLine", "TranscriptMeter", "freshest", "project_dir_name"]


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
        self.at: float | None = None  # wall-clock time of the entry that gave ``used`` (its own timestamp)
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
            self.used = self.at = None

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
                self.used, self.source, self.at = post, "claude transcript (after compaction)", _time(entry)
            return
        message = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(message, dict) or message.get("model") == "<synthetic>":
            return
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        self.used = in_context(usage)
        self.source, self.at = "claude transcript", _time(entry)


class StatusLine:
    """What Claude Code reports to its status-line command: the window (``context_window.context_window_size``)
    and the tokens in use (``context_window.current_usage``).

    agentd's settings make the status line a command that copies its JSON
    input to a file (:func:`~supervisor.adapters.claude.setup.status_line_command`);
    this reads the newest one, only when the file changed.  ``used`` is kept only
    for the conversation given (``session``: the transcript's id), with ``at``,
    the file's modification time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.window: int | None = None
        self.used: int | None = None
        self.at: float | None = None
        self.session: str | None = None  # the conversation the figures are of
        self._mtime: int | None = None

    def read(self) -> int | None:
        """The window (None until Claude Code drew a status line)."""
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
            ctx = (data.get("context_window") or {}) if isinstance(data, dict) else {}
            ctx = ctx if isinstance(ctx, dict) else {}
            size = ctx.get("context_window_size")
            if isinstance(size, int) and size > 0:
                self.window = size
            usage = ctx.get("current_usage")
            self.used = in_context(usage) if isinstance(usage, dict) else None
            self.at = mtime / 1e9
            self.session = str(data.get("session_id") or "") or None
        return self.window


def in_context(usage: dict[str, object]) -> int:
    """Tokens a request's usage puts in the context: input, cache writes and cache reads."""
    total = 0
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = usage.get(key)
        total += value if isinstance(value, int) else 0
    return total


def freshest(meter: TranscriptMeter, status: StatusLine | None, session: str | None) -> tuple[int, str] | None:
    """(tokens in use, where from): the transcript's figure or the status line's, whichever was learnt last
    (a tie goes to the transcript); the status line's only when it is about ``session``; None without either."""
    found = []
    if meter.used is not None:
        found.append((meter.at if meter.at is not None else float("-inf"), 1, meter.used, meter.source))
    if status is not None and status.used is not None and status.at is not None and (
            session is None or status.session in (None, session)):
        found.append((status.at, 0, status.used, "claude status line"))
    if not found:
        return None
    _, _, used, source = max(found)
    return used, source


def _time(entry: dict[str, object]) -> float | None:
    """An entry's own ``timestamp`` (ISO 8601, UTC) as seconds since the epoch, or None."""
    stamp = entry.get("timestamp")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() if stamp else None
    except ValueError:
        return None
