"""The ``codex`` adapter: OpenAI Codex CLI (verified with ``@openai/codex`` 0.169.0).

How a session runs (see docs/codex.md):

* **Binary.**  The native binary, never the npm ``codex`` node wrapper (SIGKILL
  on the wrapper orphans the real process): ``[codex] binary`` if set, else
  resolved from ``[agent] command[0]`` (a native binary as is; the npm
  wrapper ``.../node_modules/.bin/codex`` or ``.../@openai/codex/bin/codex.js``
  is followed to ``@openai/codex-<platform>/vendor/<triple>/bin/codex``).
  Always ``--no-daemon`` (otherwise a detached app-server outlives the
  session).  The Session makes it a process-group leader in its own PTY.
* **Configuration** only through ``-c key=value`` overrides and environment;
  the user's ``config.toml`` is never written.  ``CODEX_HOME`` is the user's
  (their login) unless ``[codex] home`` names another directory or is
  ``"private"`` (``<state>/codex/<unit>``).  Overrides: trust entry for the
  workdir (no "Trust this folder?" screen), no update check, analytics and
  plugins off, ``notify = [agentd, "notify", "--unit", NAME]``,
  ``allow_login_shell = false`` (a login shell's profile would reset PATH
  and lose ``agentd``), ``model_context_window`` = the unit's ``[context]
  window`` and ``model_auto_compact_token_limit`` above agentd's own
  thresholds (so agentd checkpoints first), ``--disable
  unbounded_connection_retries`` (an unreachable model server ends the turn
  with an error instead of retrying silently forever), optionally a custom
  provider (``[codex] base_url``).
* **Wakeup** = the positional PROMPT: Codex submits it at once as the first
  user message of turn 1 (``wakeup_via = "argv"``; nothing is typed).
* **Turn end** = Codex's ``notify`` (``agent-turn-complete``) for the main
  thread only (the hidden title thread notifies too; its thread has no
  rollout file); the rollout's ``task_complete`` / ``turn_aborted`` is the
  fallback (e.g. a failed turn sends no notify).
* **Context** = the newest ``token_count`` of the session's rollout file
  (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*-<thread>.jsonl``), read
  incrementally from a kept offset: ``last_token_usage.total_tokens`` over the
  unit's ``[context] window`` (Codex itself reports 95 % of the configured
  window, so its own figure is not used).
* **Compaction anyway** (a rollout ``compacted`` line): reported at the next
  turn end as ``compacted`` + ``inject_wakeup`` (the daemon records it and
  types the wakeup as the next message).
* **Failure**: a turn that ended with a connection error (model server
  unreachable) is reported by :meth:`CodexAdapter.failure`; the daemon ends
  the session and applies the restart policy with that reason.
* **Typing**: text, pause 0.3 s, Enter (Codex treats a fast ``text\\r`` as a
  paste and does not submit); several lines as one bracketed paste.
  **Quit**: ``/quit``, pause, Enter, then Ctrl-D; then the daemon signals.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..durable import JsonlTail
from .base import Adapter, ContextFigure, Keystrokes, Launch, Meaning, Paste, Turn, TurnWatcher, TypingRules, notify_argv

if TYPE_CHECKING:  # pragma: no cover
    from ..session.pty import Session

__all__ = ["CodexAdapter", "CodexWatcher", "Rollout", "native_binary"]

SUBMIT_PAUSE = 0.5
ENTER = b"\r"
EOF_KEY = b"\x04"
#: codex_error_info keys / message starts that mean the model server cannot be reached.
CONNECTION_ERRORS = ("http_connection_failed", "connection_failed", "response_stream_disconnected", "stream_disconnected")
CONNECTION_MESSAGES = ("Connection failed", "stream disconnected", "error sending request")


def _platform_package() -> tuple[str, str]:
    """(npm platform package suffix, target triple) for this machine."""
    machine = platform.machine().lower()
    arch = "arm64" if machine in ("aarch64", "arm64") else "x64"
    triple_arch = "aarch64" if arch == "arm64" else "x86_64"
    if sys.platform == "darwin":
        return f"darwin-{arch}", f"{triple_arch}-apple-darwin"
    return f"linux-{arch}", f"{triple_arch}-unknown-linux-musl"


def native_binary(program: str, workdir: Path) -> Path:
    """The native Codex binary for ``program`` (a native binary, or the npm wrapper); raises FileNotFoundError."""
    import shutil

    path = Path(program).expanduser()
    if not path.is_absolute():
        found = shutil.which(program) if "/" not in program else None
        path = Path(found) if found else (workdir / path)
    path = path.resolve()
    if not path.is_file():
        raise FileNotFoundError(f"codex program {program!r} not found")
    if path.name == "codex.js" or path.suffix == ".js":
        package = path.parent.parent  # .../@openai/codex/bin/codex.js -> .../@openai/codex
        suffix, triple = _platform_package()
        candidates = [
            package.parent / f"codex-{suffix}" / "vendor" / triple / "bin" / "codex",  # sibling package
            package / "node_modules" / "@openai" / f"codex-{suffix}" / "vendor" / triple / "bin" / "codex",
            package / "vendor" / triple / "codex" / "codex",  # older layout
        ]
        for candidate in candidates:
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        raise FileNotFoundError(f"{program!r} is the npm wrapper and its native binary (@openai/codex-{suffix}) is not installed")
    return path


def toml_string(text: str) -> str:
    """A TOML basic string (JSON escapes are valid TOML for these)."""
    return json.dumps(text, ensure_ascii=False)


class Rollout:
    """One session's rollout file, read incrementally (an offset is kept; only new bytes are read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tail = JsonlTail(path)
        self.thread_id = "-".join(path.stem.split("-")[-5:])  # rollout-<date>T<time>-<thread uuid>
        self.last_total: int | None = None
        self.last_window: int | None = None
        self.task_starts = 0
        self.turn_ids: list[str] = []  # turn ids in the order their task_started lines appear
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
                self.last_window = info.get("model_context_window")
        elif kind == "task_started":
            self.task_starts += 1
            self.turn_ids.append(str(payload.get("turn_id") or ""))
        elif kind in ("task_complete", "turn_aborted"):
            self.task_ends += 1
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


class _SessionState:
    """What the adapter knows about one Codex session."""

    def __init__(self, home: Path, workdir: Path, prompt: str | None, claimed: set[Path] | None = None) -> None:
        self.claimed = claimed if claimed is not None else set()  # rollouts of earlier sessions
        self.home = home
        self.workdir = workdir
        self.prompt = prompt
        self.started_wall = time.time()
        self.rollout: Rollout | None = None
        self.title_threads: set[str] = set()
        self.compactions_reported = 0
        self.next_scan = 0.0
        self.starts_at_typing = 0

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
        for day in _recent_day_dirs(sessions):
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


def _recent_day_dirs(sessions: Path) -> list[Path]:
    """``sessions/YYYY/MM/DD`` of yesterday, today and tomorrow (local and UTC dates)."""
    days = set()
    for offset in (-86400, 0, 86400):
        for t in (time.localtime(time.time() + offset), time.gmtime(time.time() + offset)):
            days.add(sessions / time.strftime("%Y", t) / time.strftime("%m", t) / time.strftime("%d", t))
    return [d for d in sorted(days) if d.is_dir()]


class CodexWatcher(TurnWatcher):
    """Turn ends come from notify (the daemon calls :meth:`turn_ended`); the rollout is the fallback.

    A fresh session is busy from the start: its wakeup is turn 1.
    """

    def __init__(self, state: _SessionState) -> None:
        super().__init__()
        self._state = state
        self.state = Turn.BUSY
        self._baseline = 0  # rollout task starts before the current message was typed

    def typing(self) -> None:
        """Before agentd types: the rollout's turns so far are not the answer to this message."""
        rollout = self._state.find_rollout()
        if rollout is not None:
            rollout.update()
        self._state.starts_at_typing = rollout.task_starts if rollout is not None else 0

    def submitted(self) -> None:
        super().submitted()
        self._baseline = self._state.starts_at_typing

    def poll(self) -> bool:
        rollout = self._state.find_rollout()
        if rollout is None:
            return False
        rollout.update()
        return rollout.task_starts > self._baseline and rollout.task_ends >= rollout.task_starts


class CodexAdapter(Adapter):
    """OpenAI Codex CLI in its TUI (see the module docstring)."""

    kind: ClassVar[str] = "codex"

    def __init__(self, spec: Any, settings: Any) -> None:
        super().__init__(spec, settings)
        self._sessions: dict[str, _SessionState] = {}
        self._claimed: set[Path] = set()

    # -- configuration --------------------------------------------------------------
    @property
    def _cfg(self) -> Any:
        return self.spec.codex

    def binary(self) -> Path:
        workdir = self.spec.workdir_path(self.settings.project_root)
        return native_binary(self._cfg.binary or self.spec.agent.command[0], workdir)

    def codex_home(self, env: Mapping[str, str]) -> Path:
        home = self._cfg.home
        if home == "private":
            path = self.settings.state_path / "codex" / self.spec.name
        elif home:
            path = Path(home).expanduser()
            if not path.is_absolute():
                path = self.settings.project_root / path
        else:
            path = Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex")
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def overrides(self) -> list[str]:
        """The ``-c key=value`` overrides (TOML values), in order."""
        cfg, ctx = self._cfg, self.spec.context
        workdir = self.spec.workdir_path(self.settings.project_root).resolve()
        window = ctx.window
        compact_at = max(cfg.auto_compact_at, ctx.hard_limit, ctx.checkpoint_at) if cfg.auto_compact_at else None
        out = [
            f"projects.{toml_string(str(workdir))}.trust_level=\"trusted\"",
            "check_for_update_on_startup=false",
            "analytics.enabled=false",
            "features.plugins=false",
            "allow_login_shell=false",
            "tui.disable_paste_burst=true",  # a fast burst of typed text must not swallow the Enter
            "notify=[" + ", ".join(toml_string(a) for a in notify_argv(self.spec.name)) + "]",
            f"model_context_window={window}",
        ]
        if compact_at is not None:
            out.append(f"model_auto_compact_token_limit={int(window * min(compact_at, 0.94))}")
        if cfg.model:
            out.append(f"model={toml_string(cfg.model)}")
        if cfg.base_url:
            fields = [f"name={toml_string('agentd')}", f"base_url={toml_string(cfg.base_url)}", 'wire_api="responses"']
            if cfg.env_key:
                fields.append(f"env_key={toml_string(cfg.env_key)}")
            if cfg.request_max_retries is not None:
                fields.append(f"request_max_retries={cfg.request_max_retries}")
            if cfg.stream_max_retries is not None:
                fields.append(f"stream_max_retries={cfg.stream_max_retries}")
            out.append("model_providers.agentd={" + ", ".join(fields) + "}")
            out.append('model_provider="agentd"')
        out.extend(cfg.overrides)
        return out

    # -- launch -----------------------------------------------------------------------
    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        home = self.codex_home(env)
        workdir = self.spec.workdir_path(self.settings.project_root)
        argv = [str(self.binary()), "--no-daemon"]
        if self._cfg.bypass_sandbox:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        if not self._cfg.unbounded_retries:
            argv += ["--disable", "unbounded_connection_retries"]
        for item in self.overrides():
            argv += ["-c", item]
        argv += list(self.spec.agent.command[1:])
        if wakeup is not None:
            (self.state_dir(session_id) / "wakeup.md").write_text(wakeup, encoding="utf-8")
            argv += ["--", wakeup]
        self._sessions = {session_id: _SessionState(home, workdir, wakeup, self._claimed)}  # only the current session matters
        return Launch(argv=argv, env={"CODEX_HOME": str(home)}, first_input=None,
                      wakeup_via="argv" if wakeup is not None else "none")

    def _state(self, session: Session) -> _SessionState:
        state = self._sessions.get(session.session_id)
        if state is None:  # a session launched by another adapter instance (reload): best effort
            state = _SessionState(Path(session.env.get("CODEX_HOME", Path.home() / ".codex")), session.cwd, None)
            self._sessions = {session.session_id: state}
        return state

    # -- typing ---------------------------------------------------------------------
    @property
    def typing(self) -> TypingRules:
        return TypingRules(submit_pause=SUBMIT_PAUSE, paste=Paste.BRACKETED, enter=ENTER)

    def interrupt(self) -> Keystrokes:
        return Keystrokes.of((b"\x1b", 0.5))  # Esc interrupts the running turn; the TUI stays up

    def quit(self) -> Keystrokes:
        return Keystrokes.of((b"/quit", SUBMIT_PAUSE), (ENTER, 2.0), (EOF_KEY, 1.0))

    # -- watching -------------------------------------------------------------------
    def watcher(self, session: Session) -> CodexWatcher:
        return CodexWatcher(self._state(session))

    def context(self, session: Session) -> ContextFigure:
        state = self._state(session)
        rollout = state.find_rollout()
        window = self.spec.context.window
        if rollout is None:
            return ContextFigure(used=0, window=window, exact=False, source="codex: no rollout yet")
        rollout.update()
        if rollout.last_total is None:
            return ContextFigure(used=0, window=window, exact=False, source=f"codex: no token_count yet in {rollout.path.name}")
        return ContextFigure(used=rollout.last_total, window=window, exact=True, source=f"codex rollout {rollout.path.name}")

    def trail(self, session: Session) -> Any:
        """The session's rollout, parsed (:func:`supervisor.trail.codex.read_rollout`); None before its
        rollout is known.  Reads only: the adapter's own state is left as it is."""
        from ..trail.codex import read_rollout

        state = self._sessions.get(session.session_id)
        if state is None or state.rollout is None or not state.rollout.path.exists():
            return None
        return read_rollout(state.rollout.path, str(self.settings.project_root.resolve()))

    def failure(self, session: Session) -> str | None:
        """Why the session cannot go on (the model server is unreachable), or None."""
        rollout = self._state(session).find_rollout()
        if rollout is None:
            return None
        rollout.update()
        if rollout.error and rollout.task_ends >= rollout.task_starts:
            return f"model server unreachable: {rollout.error}"
        return None

    def on_agent_event(self, session: Session, event: Mapping[str, Any]) -> list[Meaning]:
        if event.get("type") != "agent-turn-complete":
            return []
        state = self._state(session)
        thread = str(event.get("thread-id") or "")
        if thread in state.title_threads:
            return []
        main = state.rollout
        if main is None or main.thread_id != thread:
            found = state.find_rollout(thread) if thread else None
            if found is None:  # no rollout: Codex's hidden title thread
                state.title_threads.add(thread)
                return []
            if main is not None and main.thread_id != thread:
                messages = event.get("input-messages") or []
                if state.prompt is not None and (not messages or messages[0] != state.prompt):
                    state.rollout = main  # another session in the same CODEX_HOME and workdir
                    return []
        rollout = state.rollout
        assert rollout is not None
        rollout.update()
        # notify runs as a separate process and can arrive late: a turn that started before
        # agentd last typed has already been counted (by the rollout fallback) and must not
        # end the turn agentd is waiting for now.
        turn = str(event.get("turn-id") or "")
        stale = turn in rollout.turn_ids and rollout.turn_ids.index(turn) < state.starts_at_typing
        meanings = [] if stale else [Meaning.TURN_END]
        if rollout.compactions > state.compactions_reported:
            state.compactions_reported = rollout.compactions
            meanings += [Meaning.COMPACTED, Meaning.INJECT_WAKEUP]
        return meanings
