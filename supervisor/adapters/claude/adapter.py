"""The Claude Code adapter: launch, turns from hooks, context, hook answers (see the package doc)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ...durable import write_json
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
from .setup import compaction_env, hook_settings, permissions, prepare_config_dir
from .transcript import StatusLine, TranscriptMeter, freshest, project_dir_name

if TYPE_CHECKING:  # pragma: no cover
    from ...session.pty import Session

__all__ = ["KICKOFF", "ClaudeAdapter", "HookWatcher"]

#: The first user message of a session that starts from a wakeup (the wakeup itself is in the system prompt).
KICKOFF = ("agentd started this session from a briefing (the agentd wakeup at the end of your system prompt). "
           "Read it, then continue the current task it describes.")
#: Pause between the text and Enter (a faster Enter is taken as part of a paste).
SUBMIT_PAUSE = 0.3
#: How long the daemon waits for ``/exit`` to end the process before it signals.
EXIT_WAIT = 5.0
ENTER = b"\r"
WAKEUP_FILE = "wakeup.md"
WAKEUP_ENV = "AGENTD_WAKEUP_FILE"
SETTINGS_FILE = "settings.json"
STATUS_FILE = "statusline.json"
OFFLINE_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    # an unattended agent clones no plugin marketplace from GitHub and installs no IDE extension at start
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
}


class HookWatcher(TurnWatcher):
    """Turns from Claude Code's own hooks (``Stop``, ``UserPromptSubmit``); optional quiet fallback."""

    def __init__(self, busy: bool, quiet: float = 0.0, probe: ScreenProbe | None = None) -> None:
        super().__init__()
        self.quiet = quiet
        self.probe = probe
        if busy:
            self.state = Turn.BUSY

    def feed(self, data: bytes) -> None:
        super().feed(data)
        if self.probe is not None:
            self.probe.feed(data)

    def poll(self) -> bool:
        if self.quiet <= 0:
            return False
        since = max(self.last_output_at, self.submitted_at or self.last_output_at)
        return time.monotonic() - since >= self.quiet


@dataclass
class _Run:
    """What the adapter knows about one agentd session."""

    claude_id: str
    config_dir: Path
    meter: TranscriptMeter
    kickoff: bool
    status: StatusLine | None = None
    hooks: HookContext | None = None
    probe: ScreenProbe | None = None
    watcher: HookWatcher | None = None
    compact_trigger: str | None = None
    events: list[str] = field(default_factory=list)


class ClaudeAdapter(Adapter):
    """Claude Code: see the package docstring."""

    kind: ClassVar[str] = "claude"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._runs: dict[str, _Run] = {}

    # -- launch -------------------------------------------------------------------
    def private_config_dir(self) -> Path:
        return self.settings.state_path / "claude" / self.spec.name

    def sandbox(self) -> Sandbox:
        return permissions(self.spec, self.settings.project_root)[3]

    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        agent = self.spec.agent
        state = self.state_dir(session_id)
        workdir = self.spec.workdir_path(self.settings.project_root).resolve()
        own = agent.env  # what the unit sets explicitly wins over agentd's defaults
        extra = {k: v for k, v in OFFLINE_ENV.items() if k not in own}
        flags, perms, perm_env, box = permissions(self.spec, self.settings.project_root)
        if env.get("CLAUDE_CONFIG_DIR"):
            config_dir = Path(env["CLAUDE_CONFIG_DIR"]).expanduser()
        else:
            config_dir = self.private_config_dir()
            prepare_config_dir(config_dir, workdir, env.get("ANTHROPIC_API_KEY"), [Path(d) for d in box.writable])
            extra["CLAUDE_CONFIG_DIR"] = str(config_dir)
        extra.update(perm_env)
        extra.update(compaction_env(self.spec, env))
        settings_path = state / SETTINGS_FILE
        status_dir = state / "statusline"  # the status line writes here, also from inside agentd's fence
        status_dir.mkdir(exist_ok=True, mode=0o700)
        extra["AGENTD_STATUS_DIR"] = str(status_dir)
        status_path = status_dir / STATUS_FILE
        write_json(settings_path, hook_settings(self.spec.name, box.bypassed, perms, status_path), mode=0o600, indent=1)
        claude_id = str(uuid.uuid4())
        argv = [*agent.command, "--settings", str(settings_path), "--session-id", claude_id, *flags]
        via = "none"
        if wakeup is not None:
            path = state / WAKEUP_FILE
            path.write_text(wakeup, encoding="utf-8")
            extra[WAKEUP_ENV] = str(path)
            if agent.wakeup_via != "none":
                # "--": the prompt must not be read as one more --add-dir directory
                argv += ["--append-system-prompt-file", str(path), "--", KICKOFF]
                via = "system-prompt"
        transcript = config_dir / "projects" / project_dir_name(workdir) / f"{claude_id}.jsonl"
        self._runs = {session_id: _Run(claude_id, config_dir, TranscriptMeter(transcript), kickoff=via != "none",
                                       status=StatusLine(status_path),
                                       hooks=HookContext(self.settings.project_root, self.settings.units_path),
                                       probe=ScreenProbe("claude", agent.rows, agent.cols))}
        return Launch(argv=argv, env=extra, first_input=None, wakeup_via=via)

    # -- typing -------------------------------------------------------------------
    @property
    def typing(self) -> TypingRules:
        """Text, a pause, Enter; several lines as one bracketed paste."""
        return TypingRules(submit_pause=self.spec.agent.submit_pause or SUBMIT_PAUSE, paste=Paste.BRACKETED, enter=ENTER)

    def quit(self) -> Keystrokes:
        return Keystrokes.of((b"/exit", SUBMIT_PAUSE), (ENTER, EXIT_WAIT))

    # -- watching -----------------------------------------------------------------
    def watcher(self, session: Session) -> HookWatcher:
        run = self._runs.get(session.session_id)
        watcher = HookWatcher(busy=bool(run and run.kickoff), quiet=self.spec.agent.quiet, probe=run.probe if run else None)
        if run is not None:
            run.watcher = watcher
        return watcher

    def context(self, session: Session) -> ContextFigure:
        """Tokens in use from the freshest of the transcript and the status line (:func:`.transcript.freshest`);
        the window: the smaller of the unit's and the status line's (:func:`~..base.context_window`)."""
        run = self._runs.get(session.session_id)
        reported = run.status.read() if run is not None and run.status is not None else None
        window, source, warning = context_window(self.spec, reported)
        if run is None:
            return ContextFigure(0, window, False, "no claude session", source, warning)
        if run.meter.path is not None and not run.meter.path.exists():
            found = next(iter(run.config_dir.glob(f"projects/*/{run.claude_id}.jsonl")), None)
            if found is not None:
                run.meter.follow(found)
        run.meter.read()
        used = freshest(run.meter, run.status, run.claude_id)
        if used is None:
            return ContextFigure(0, window, False, "claude transcript (no reply yet)", source, warning)
        return ContextFigure(used[0], window, True, used[1], source, warning)

    def blocked(self, session: Session) -> Blocked | None:
        run = self._runs.get(session.session_id)
        kind = run.probe.check() if run is not None and run.probe is not None else None
        if kind is None:
            return None
        if kind is BlockKind.UNREACHABLE:
            line = run.probe.line if run is not None and run.probe is not None else ""
            where = session.env.get("ANTHROPIC_BASE_URL") or "the Anthropic API"
            return Blocked(kind, f"Claude Code cannot reach {where} ({line}): check ANTHROPIC_BASE_URL in [agent] env "
                                 "and the network; once it gives up it waits for a new message (`agentd restart`)")
        todo = {
            BlockKind.TRUST: "Claude Code asks whether to trust the workdir: run `claude` there once by hand in the "
                             "config dir the unit uses, or leave CLAUDE_CONFIG_DIR unset (agentd's private one is prepared)",
            BlockKind.LOGIN: "Claude Code is not logged in: set ANTHROPIC_API_KEY in the unit's [agent] env (or in "
                             "agentd's environment), or log in once by hand in the config dir it uses; then restart it",
            BlockKind.ONBOARDING: "Claude Code shows a first-run screen: run it once by hand in that config dir",
            BlockKind.APPROVAL: "Claude Code waits for a permission answer: answer it in `agentd attach`, or allow the "
                                "tool in [claude] allow (agentd's own settings refuse what would ask)",
        }.get(kind, f"Claude Code shows a {kind.value} screen: answer it in `agentd attach`")
        return Blocked(kind, todo)

    # -- the agent's own events -------------------------------------------------------
    def record(self, session: Session) -> Path | None:
        run = self._runs.get(session.session_id)
        return run.meter.path if run is not None else None

    def trail(self, session: Session) -> Any:
        """The session's transcript, parsed (:func:`supervisor.trail.claude.read_transcript`); None
        before it exists.  Reads only: the adapter's own state is left as it is."""
        from ...trail.claude import read_transcript

        run = self._runs.get(session.session_id)
        path = run.meter.path if run is not None else None
        if path is None or not path.exists():
            return None
        return read_transcript(path, str(self.settings.project_root.resolve()))

    def on_agent_event(self, session: Session, event: Mapping[str, Any]) -> list[Meaning]:
        run = self._runs.get(session.session_id)
        if run is None:
            return []
        name = str(event.get("hook_event_name") or "")
        run.events.append(name)
        claude_id, transcript = event.get("session_id"), event.get("transcript_path")
        if isinstance(claude_id, str) and isinstance(transcript, str) and transcript.endswith(".jsonl"):
            run.claude_id = claude_id
            run.meter.follow(Path(transcript))
        if name == "Stop":
            return [Meaning.TURN_END]
        if name == "UserPromptSubmit":
            if run.watcher is not None:
                run.watcher.submitted()
            return [Meaning.TURN_BEGAN]
        if name == "PreCompact":
            run.compact_trigger = str(event.get("trigger") or "")
            # a /compact typed by hand is the person's choice: only its end matters
            return [Meaning.PRE_COMPACT] if run.compact_trigger == "auto" else []
        if name == "SessionStart":
            source = event.get("source")
            if source == "compact":
                auto = run.compact_trigger == "auto"
                run.compact_trigger = None
                if run.hooks is not None:
                    run.hooks.compacted()
                # an automatic compaction happens inside a turn; a typed /compact is a turn of its own
                return [Meaning.COMPACTED, Meaning.OWN_COMPACTION] if auto else [Meaning.COMPACTED, Meaning.TURN_END]
            if source == "clear" or (source == "startup" and not run.kickoff):
                return [Meaning.TURN_END]  # idle at the prompt
        return []

    def hook_output(self, event: Mapping[str, Any], meanings: list[Meaning], wakeup: str | None) -> str | None:
        name = str(event.get("hook_event_name") or "")
        run = next(iter(self._runs.values()), None)
        context: str | None = None
        if name == "SessionStart" and Meaning.COMPACTED in meanings:
            context = wakeup
        elif name == "UserPromptSubmit" and run is not None and run.hooks is not None:
            context = run.hooks.prompt_context()
        elif name == "PreToolUse" and run is not None and run.hooks is not None and not event.get("agent_id"):
            context = run.hooks.tool_context(event)
        if not context:
            return None
        return json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}})
