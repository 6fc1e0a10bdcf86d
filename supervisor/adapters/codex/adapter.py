"""The Codex adapter: launch, turns, context, the agent's own events and hook answers (see the package doc)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..base import (
    Adapter,
    Blocked,
    BlockKind,
    ContextFigure,
    Keystrokes,
    Launch,
    Meaning,
    Paste,
    Sandbox,
    Turn,
    TurnWatcher,
    TypingRules,
    context_window,
)
from ..hookctx import HookContext
from ..screens import ScreenProbe
from .binary import native_binary
from .launch import KICKOFF, base_overrides, hook_overrides, prepare_private_home, sandbox, toml_string, trusted
from .rollout import SessionState

if TYPE_CHECKING:  # pragma: no cover
    from ...session.pty import Session

__all__ = ["CodexAdapter", "CodexWatcher"]

SUBMIT_PAUSE = 0.5
ENTER = b"\r"
EOF_KEY = b"\x04"
WAKEUP_FILE = "wakeup.md"


class CodexWatcher(TurnWatcher):
    """Turn ends come from notify (the daemon calls :meth:`turn_ended`); the rollout is the fallback.

    A fresh session is busy from the start: its kickoff (or its wakeup) is turn 1.
    """

    def __init__(self, state: SessionState) -> None:
        super().__init__()
        self._state = state
        self.state = Turn.BUSY
        self._baseline = 0  # rollout task starts before the current message was typed
        self._person_turn: str | None = None  # the turn id of a turn someone else began (hook)

    def feed(self, data: bytes) -> None:
        super().feed(data)
        if self._state.probe is not None:
            self._state.probe.feed(data)

    def typing(self) -> None:
        """Before agentd types: the rollout's turns so far are not the answer to this message."""
        rollout = self._state.find_rollout()
        if rollout is not None:
            rollout.update()
        self._state.starts_at_typing = rollout.task_starts if rollout is not None else 0

    def submitted(self) -> None:
        super().submitted()
        self._person_turn = None
        self._baseline = self._state.starts_at_typing

    def began(self, turn_id: str) -> None:
        """A turn agentd did not type began (a person in ``agentd attach``; the UserPromptSubmit hook)."""
        if self.state is Turn.IDLE:
            self.state = Turn.BUSY
            self._person_turn = turn_id
            self._notify()

    def poll(self) -> bool:
        rollout = self._state.find_rollout()
        if rollout is None:
            return False
        rollout.update()
        if self._person_turn is not None:
            return self._person_turn in rollout.ended_turns
        return rollout.task_starts > self._baseline and rollout.task_ends >= rollout.task_starts


class CodexAdapter(Adapter):
    """OpenAI Codex CLI in its TUI (see the package docstring)."""

    kind: ClassVar[str] = "codex"

    def __init__(self, spec: Any, settings: Any) -> None:
        super().__init__(spec, settings)
        self._sessions: dict[str, SessionState] = {}
        self._claimed: set[Path] = set()
        self._box: Sandbox | None = None

    # -- configuration --------------------------------------------------------------
    @property
    def _cfg(self) -> Any:
        return self.spec.codex

    def binary(self) -> Path:
        workdir = self.spec.workdir_path(self.settings.project_root)
        return native_binary(self._cfg.binary or self.spec.agent.command[0], workdir)

    def person_home(self, env: Mapping[str, str]) -> Path:
        """The person's own CODEX_HOME (their login and config)."""
        return Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex").expanduser()

    def home_path(self, env: Mapping[str, str]) -> Path:
        """The CODEX_HOME the unit's sessions use (nothing is created)."""
        home = self._cfg.home
        if home == "private":
            return self.settings.state_path / "codex" / self.spec.name
        if home:
            path = Path(home).expanduser()
            return path if path.is_absolute() else self.settings.project_root / path
        return self.person_home(env)

    def codex_home(self, env: Mapping[str, str]) -> Path:
        """:meth:`home_path`, created if missing (mode 0700)."""
        path = self.home_path(env)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def workdir(self) -> Path:
        return self.spec.workdir_path(self.settings.project_root).resolve()

    def overrides(self) -> list[str]:
        """The ``-c key=value`` overrides (TOML values), in order, but the sandbox's and the hooks'."""
        return [*base_overrides(self.spec, self.workdir()), *self._cfg.overrides]

    def sandbox(self) -> Sandbox:
        """The sandbox of the running session (its own temp directory included), else as it would start."""
        if self._box is not None:
            return self._box
        return sandbox(self.spec, self.settings.project_root, self.settings.state_path / "sessions" / self.spec.name)[1]

    def own_sandbox(self) -> str | None:
        """Codex's own sandbox (bubblewrap needs ``mount``, which agentd's fence forbids) unless bypassed."""
        box = self.sandbox()
        return None if box.bypassed else f"codex {box.mode}"

    def record(self, session: Session) -> Path | None:
        state = self._sessions.get(session.session_id)
        return state.rollout.path if state is not None and state.rollout is not None else None

    def trail(self, session: Session) -> Any:
        """The session's rollout, parsed (:func:`supervisor.trail.codex.read_rollout`); None before its
        rollout is known.  Reads only: the adapter's own state is left as it is."""
        from ...trail.codex import read_rollout

        state = self._sessions.get(session.session_id)
        if state is None or state.rollout is None or not state.rollout.path.exists():
            return None
        return read_rollout(state.rollout.path, str(self.settings.project_root.resolve()))

    # -- launch -----------------------------------------------------------------------
    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        home = self.codex_home(env)
        workdir = self.workdir()
        state_dir = self.state_dir(session_id)
        tmp = state_dir / "tmp"
        tmp.mkdir(exist_ok=True, mode=0o700)
        if self._cfg.home == "private":
            prepare_private_home(home, workdir, self.person_home(env))
        box_argv, self._box = sandbox(self.spec, self.settings.project_root, tmp, self.settings.state_path)
        argv = [str(self.binary()), "--no-daemon", *box_argv]
        if not self._cfg.unbounded_retries:
            argv += ["--disable", "unbounded_connection_retries"]
        for item in self.overrides():
            argv += ["-c", item]
        hooks = None
        if self._cfg.hooks:
            hooks = HookContext(self.settings.project_root, self.settings.units_path)
            for item in hook_overrides(self.spec.name):
                argv += ["-c", item]
        extra = {"CODEX_HOME": str(home), "TMPDIR": str(tmp)}
        prompt, via = None, "none"
        if wakeup is not None:
            path = state_dir / WAKEUP_FILE
            path.write_text(wakeup, encoding="utf-8")
            extra["AGENTD_WAKEUP_FILE"] = str(path)
            if self.spec.agent.wakeup_via != "none":
                argv += ["-c", f"developer_instructions={toml_string(wakeup)}"]
                prompt, via = KICKOFF, "developer-instructions"
        argv += list(self.spec.agent.command[1:])
        if prompt is not None:
            argv += ["--", prompt]
        probe = ScreenProbe("codex", self.spec.agent.rows, self.spec.agent.cols)
        self._sessions = {session_id: SessionState(home, workdir, prompt, self._claimed, hooks, probe)}
        return Launch(argv=argv, env=extra, first_input=None, wakeup_via=via)

    def _state(self, session: Session) -> SessionState:
        state = self._sessions.get(session.session_id)
        if state is None:  # a session launched by another adapter instance (reload): best effort
            state = SessionState(Path(session.env.get("CODEX_HOME", Path.home() / ".codex")), session.cwd, None,
                                 since=getattr(session, "started_wall", None))
            self._sessions = {session.session_id: state}
        return state

    # -- typing ---------------------------------------------------------------------
    @property
    def typing(self) -> TypingRules:
        return TypingRules(submit_pause=SUBMIT_PAUSE, paste=Paste.BRACKETED, enter=ENTER)

    def interrupt(self) -> Keystrokes:
        return Keystrokes.of((b"\x1b", 0.5))  # Esc interrupts the running turn (or declines a prompt)

    def quit(self) -> Keystrokes:
        return Keystrokes.of((b"/quit", SUBMIT_PAUSE), (ENTER, 2.0), (EOF_KEY, 1.0))

    # -- watching -------------------------------------------------------------------
    def watcher(self, session: Session) -> CodexWatcher:
        state = self._state(session)
        state.watcher = CodexWatcher(state)
        return state.watcher

    def context(self, session: Session) -> ContextFigure:
        state = self._state(session)
        rollout = state.find_rollout()
        if rollout is not None:
            rollout.update()
        window, source, warning = context_window(self.spec, rollout.last_window if rollout else None)
        if rollout is None:
            return ContextFigure(0, window, False, "codex: no rollout yet", source, warning)
        if rollout.last_total is None:
            return ContextFigure(0, window, False, f"codex: no token_count yet in {rollout.path.name}", source, warning)
        return ContextFigure(rollout.last_total, window, True, f"codex rollout {rollout.path.name}", source, warning)

    def failure(self, session: Session) -> str | None:
        """Why the session cannot go on (the model server is unreachable), or None."""
        rollout = self._state(session).find_rollout()
        if rollout is None:
            return None
        rollout.update()
        if rollout.error and rollout.task_ends >= rollout.task_starts:
            return f"model server unreachable: {rollout.error}"
        return None

    def blocked(self, session: Session) -> Blocked | None:
        state = self._state(session)
        kind = state.probe.check() if state.probe is not None else None
        if kind is None:
            return None
        if kind is BlockKind.TRUST:
            if self._cfg.trust == "accept":
                return Blocked(kind, "answered: [codex] trust = \"accept\"", Keystrokes.of((ENTER, 0.5)))
            config = state.home / "config.toml"
            return Blocked(kind, f"Codex asks whether to trust {state.workdir}: run `agentd trust {self.spec.name}` "
                                 f"(adds the entry to {config}), or set [codex] trust = \"accept\" or "
                                 "[codex] home = \"private\" in the unit, then restart it")
        if kind is BlockKind.LOGIN:
            return Blocked(kind, f"Codex needs a login: run `CODEX_HOME={shlex.quote(str(state.home))} codex login`, "
                                 "or configure [codex] base_url and env_key")
        if kind is BlockKind.APPROVAL:
            return Blocked(kind, "Codex waits for an approval; agentd starts Codex with approvals `never` unless "
                                 "[agent] command sets its own: answer it in `agentd attach`")
        if kind is BlockKind.UPDATE:
            return Blocked(kind, "Codex offers an update and waits: choose Skip in `agentd attach`, or update Codex; "
                                 "agentd starts it with check_for_update_on_startup=false unless [agent] command "
                                 "runs it another way")
        if kind is BlockKind.UNREACHABLE:
            where = self._cfg.base_url or "its model provider"
            line = state.probe.line if state.probe is not None else ""
            return Blocked(kind, f"Codex cannot reach {where} and retries ({line}): check [codex] base_url and the "
                                 "network; set [codex] request_max_retries and stream_max_retries so it gives up")
        return Blocked(kind, f"Codex shows a {kind.value} screen: answer it in `agentd attach`")

    def trust_problem(self, env: Mapping[str, str]) -> str | None:
        """Why Codex will ask to trust the workdir (its CODEX_HOME has no entry; a git repository), or None."""
        if self._cfg.home == "private" or self._cfg.trust == "accept":
            return None
        config = self.home_path(env) / "config.toml"
        workdir = self.workdir()
        in_git = any((p / ".git").exists() for p in (workdir, *workdir.parents))
        if in_git and not trusted(config, workdir):
            return f"{config} does not trust {workdir}: Codex will stop at its \"Trust this folder?\" screen"
        return None

    # -- the agent's own events -----------------------------------------------------
    def on_agent_event(self, session: Session, event: Mapping[str, Any]) -> list[Meaning]:
        state = self._state(session)
        name = str(event.get("hook_event_name") or "")
        if name:
            return self._hook_event(session, state, name, event)
        if event.get("type") != "agent-turn-complete":
            return []
        return self._turn_complete(state, event)

    def _hook_event(self, session: Session, state: SessionState, name: str, event: Mapping[str, Any]) -> list[Meaning]:
        thread = str(event.get("session_id") or "")
        main = state.find_rollout(thread) if thread else state.rollout
        if main is None or (thread and main.thread_id != thread):
            return []  # a hidden side thread's hook
        if name == "UserPromptSubmit":
            if isinstance(state.watcher, CodexWatcher):
                state.watcher.began(str(event.get("turn_id") or ""))
            return [Meaning.TURN_BEGAN]
        if name == "PreCompact":
            state.compact_trigger = str(event.get("trigger") or "")
            return [Meaning.PRE_COMPACT] if state.compact_trigger == "auto" else []
        if name == "SessionStart" and event.get("source") == "compact":
            own = state.compact_trigger != "manual"
            state.compact_trigger = None
            main.update()
            state.compactions_reported = main.compactions  # the hook answers it: nothing to type
            if state.hooks is not None:
                state.hooks.compacted()
            return [Meaning.COMPACTED, Meaning.OWN_COMPACTION] if own else [Meaning.COMPACTED]
        return []

    def _turn_complete(self, state: SessionState, event: Mapping[str, Any]) -> list[Meaning]:
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
        if state.hooks is None and rollout.compactions > state.compactions_reported:
            # hooks off: the rollout's `compacted` line is all there is; the wakeup is typed next
            state.compactions_reported = rollout.compactions
            meanings += [Meaning.COMPACTED, Meaning.INJECT_WAKEUP]
        return meanings

    def hook_output(self, event: Mapping[str, Any], meanings: list[Meaning], wakeup: str | None) -> str | None:
        name = str(event.get("hook_event_name") or "")
        state = next(iter(self._sessions.values()), None)
        if state is None or state.rollout is None or str(event.get("session_id") or "") != state.rollout.thread_id:
            return None  # not this session's main thread (Codex's hidden title thread has hooks too)
        context: str | None = None
        if name == "SessionStart" and Meaning.COMPACTED in meanings:
            context = wakeup
        elif name == "UserPromptSubmit" and state.hooks is not None:
            context = state.hooks.prompt_context()
        elif name == "PreToolUse" and state.hooks is not None:
            context = state.hooks.tool_context(event)
        if not context:
            return None
        return json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}})
