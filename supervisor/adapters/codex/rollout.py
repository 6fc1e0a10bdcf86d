"""A Codex session's own record: its rollout file, read incrementally; and what the adapter keeps per session.

``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<date>T<time>-<thread>.jsonl`` gets
one JSON line per event.  agentd reads only what was appended since its
last look, and only the lines it needs: ``token_count`` (the context figure
and Codex's own window), ``task_started`` / ``task_complete`` /
``turn_aborted`` (turns, and a failed turn's error) and ``compacted``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from ...durable import JsonlTail
from ..hookctx import HookContext
from ..screens import ScreenProbe

__all__ = ["Rollout", "SessionState", "connection_error"]

#: codex_error_info keys / message starts that mean the model server cannot be reached.
CONNECTION_ERRORS = ("http_connection_failed", "connection_failed", "response_stream_disconnected", "stream_disconnected")
CONNECTION_MESSAGES = ("Connection failed", "stream disconnected", "error sending request")


class Rollout:
    """One session's rollout file, read incrementally (an offset is kept; only new bytes are read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tail = JsonlTail(path)
        self.thread_id = "-".join(path.stem.split("-")[-5:])  # rollout-<date>T<time>-<thread uuid>
        self.last_total: int | None = None
        self.last_window: int | None = None  # Codex's own window (token_count.info.model_context_window)
        self.task_starts = 0
        self.turn_ids: list[str] = []  # turn ids in the order their task_started lines appear
        self.ended_turns: set[str] = set()
        self.task_ends = 0
        self.compactions = 0
        self.error: str | None = None  # the newest turn's connection error, None after a good turn

    def update(self) -> None:
        for line in self._tail.lines():
            self._line(line)

    def _line(self, line: bytes) -> None:
        if b'"compacted"' in line[:200]:
            try:
                if json.loads(line).get("type") == "compacted":
                    self.compactions += 1
            except ValueError:
                pass
            return
        if not line.startswith(b'{') or b'"event_msg"' not in line[:200]:
            return
        if not any(k in line for k in (b'"token_count"', b'"task_started"', b'"task_complete"', b'"turn_aborted"')):
            return
        try:
            payload = json.loads(line).get("payload") or {}
        except ValueError:
            return
        kind = payload.get("type")
        if kind == "token_count":
            info = payload.get("info") or {}
            last = info.get("last_token_usage") or {}
            if isinstance(last.get("total_tokens"), int):
                self.last_total = last["total_tokens"]
            if isinstance(info.get("model_context_window"), int):
                self.last_window = info["model_context_window"]
        elif kind == "task_started":
            self.task_starts += 1
            self.turn_ids.append(str(payload.get("turn_id") or ""))
            if isinstance(payload.get("model_context_window"), int) and self.last_window is None:
                self.last_window = payload["model_context_window"]
        elif kind in ("task_complete", "turn_aborted"):
            self.task_ends += 1
            if payload.get("turn_id"):
                self.ended_turns.add(str(payload["turn_id"]))
            self.error = connection_error(payload.get("error")) if kind == "task_complete" else None


def connection_error(error: Any) -> str | None:
    """The message of a turn error that means the model server is unreachable, else None."""
    if not isinstance(error, dict):
        return None
    message = str(error.get("message") or "")
    info = error.get("codex_error_info")
    keys = set(info) if isinstance(info, dict) else {str(info)} if info else set()
    if keys & set(CONNECTION_ERRORS) or any(m in message for m in CONNECTION_MESSAGES):
        return message or "connection failed"
    return None


class SessionState:
    """What the adapter knows about one Codex session."""

    def __init__(self, home: Path, workdir: Path, prompt: str | None, claimed: set[Path] | None = None,
                 hooks: HookContext | None = None, probe: ScreenProbe | None = None,
                 wall: Callable[[], float] = time.time, since: float | None = None) -> None:
        self.wall = wall  # the wall clock: rollout folders are named by date
        self.claimed = claimed if claimed is not None else set()  # rollouts of earlier sessions
        self.home = home
        self.workdir = workdir
        self.prompt = prompt  # the positional prompt (the kickoff), to tell this session's thread
        self.hooks = hooks  # agentd's hook context (None: hooks off)
        self.probe = probe
        self.started_wall = since if since else wall()  # the session's launch (a reload passes the real one)
        self.rollout: Rollout | None = None
        self.title_threads: set[str] = set()
        self.compactions_reported = 0
        self.compact_trigger: str | None = None  # of the PreCompact hook, until SessionStart(compact)
        self.next_scan = 0.0
        self.starts_at_typing = 0
        self.watcher: Any = None  # the session's turn watcher

    def find_rollout(self, thread_id: str | None = None) -> Rollout | None:
        """The main thread's rollout: by thread id, else the newest file since launch for this workdir."""
        if self.rollout is not None and (thread_id is None or self.rollout.thread_id == thread_id):
            return self.rollout
        sessions = self.home / "sessions"
        if thread_id is not None:
            found = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
            if found:
                self.rollout = Rollout(found[-1])
                self.claimed.add(found[-1])
            return self.rollout if found else None
        now = time.monotonic()
        if now < self.next_scan:
            return None
        self.next_scan = now + 0.5
        candidates = []
        for day in day_dirs(sessions, self.started_wall, self.wall()):
            for path in day.glob("rollout-*.jsonl"):
                try:
                    if path in self.claimed or path.stat().st_mtime < self.started_wall - 1:
                        continue
                    with open(path, "rb") as fh:
                        meta = json.loads(fh.readline() or b"{}").get("payload") or {}
                except (OSError, ValueError):
                    continue
                if Path(str(meta.get("cwd", ""))).resolve() == self.workdir.resolve():
                    candidates.append((path.stat().st_mtime, path))
        if len(candidates) == 1:  # ambiguous with several: wait for the notify's thread id
            self.rollout = Rollout(candidates[0][1])
            self.claimed.add(candidates[0][1])
        return self.rollout


def day_dirs(sessions: Path, since: float, now: float) -> list[Path]:
    """``sessions/YYYY/MM/DD`` that can hold a rollout created between ``since`` and ``now``.

    Codex names the folder by the date the rollout was created, which is at or
    after the session's launch (``since``) and at or before ``now``.  A session
    can wait days for its first turn, and a day either side covers local dates
    against UTC ones.  The range is bounded by the session's own age, never by
    "yesterday, today, tomorrow" of the moment of the search: a search made the
    day after launch must still look at the launch day.
    """
    days: set[Path] = set()
    day, last = since - 86400, now + 86400
    while True:
        for t in (time.localtime(day), time.gmtime(day)):
            days.add(sessions / time.strftime("%Y", t) / time.strftime("%m", t) / time.strftime("%d", t))
        if day >= last:
            break
        day = min(day + 86400, last)
    return [d for d in sorted(days) if d.is_dir()]
