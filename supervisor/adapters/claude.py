"""The ``claude`` adapter: Claude Code (the native CLI) in a PTY.

Verified against Claude Code 2.1.328 (see ``docs/claude.md``).

Launch
    ``[agent] command`` is the native binary (plus any flags of your own, such
    as ``--model``).  The adapter adds ``--settings <session dir>/settings.json``
    (agentd's hooks; the user's own settings files are never written),
    ``--session-id <uuid>`` (so the transcript's name is known),
    ``--dangerously-skip-permissions`` (unless the command already chooses a
    permission mode; as root this needs ``IS_SANDBOX=1``, which the adapter
    sets), ``--append-system-prompt-file <session dir>/wakeup.md`` (the wakeup
    as a real system message) and a short positional prompt, which starts the
    first turn at once.
Environment
    Offline-friendly: ``DISABLE_AUTOUPDATER``, ``DISABLE_TELEMETRY``,
    ``DISABLE_ERROR_REPORTING``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``
    (each unless the unit's ``[agent] env`` sets it).  ``CLAUDE_CONFIG_DIR``: when the unit's
    ``[agent] env`` names one (a user's own login), it is used as it is;
    otherwise agentd keeps a private one in ``<state>/claude/<unit>/`` with
    the onboarding state prepared (onboarding done, the workdir trusted, the
    unit's ``ANTHROPIC_API_KEY`` approved, the bypass-permissions warning
    accepted).
Hooks (``agentd notify --unit NAME``, payload on stdin)
    ``Stop`` = turn end; ``UserPromptSubmit`` = a turn began (also when a
    person typed it in an attached terminal); ``PreCompact`` with trigger
    ``auto`` = the agent is about to compact on its own (agentd records it and
    checkpoints at the turn end); ``SessionStart`` with source ``compact`` =
    it compacted anyway: agentd answers with the wakeup as
    ``hookSpecificOutput.additionalContext``, so the compacted conversation
    continues from the briefing.  A ``/compact`` typed by hand ends there, so
    it also counts as a turn end.
Context
    ``message.usage`` of the newest main-thread assistant entry of the session
    transcript ``$CLAUDE_CONFIG_DIR/projects/<cwd munged>/<session-id>.jsonl``:
    input + cache creation + cache read tokens; after a ``compact_boundary``
    its ``postTokens`` until the next reply.  Read incrementally from an offset.
Typing and leaving
    Text, a pause, Enter; several lines as one bracketed paste.  ``/exit``;
    then the daemon signals the process group.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..durable import JsonlTail, write_json
from .base import Adapter, ContextFigure, Keystrokes, Launch, Meaning, Paste, Turn, TurnWatcher, TypingRules, notify_argv

if TYPE_CHECKING:  # pragma: no cover
    from ..session.pty import Session

__all__ = ["KICKOFF", "ClaudeAdapter", "HookWatcher", "TranscriptMeter", "project_dir_name"]

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
#: Hook events agentd listens to.
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
HOOK_TIMEOUT = 30
OFFLINE_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
#: Flags in ``[agent] command`` that mean the user chose the permission mode.
PERMISSION_FLAGS = ("--dangerously-skip-permissions", "--permission-mode", "--allow-dangerously-skip-permissions")


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


class HookWatcher(TurnWatcher):
    """Turns from Claude Code's own hooks (``Stop``, ``UserPromptSubmit``); optional quiet fallback."""

    def __init__(self, busy: bool, quiet: float = 0.0) -> None:
        super().__init__()
        self.quiet = quiet
        if busy:
            self.state = Turn.BUSY

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
    watcher: HookWatcher | None = None
    compact_trigger: str | None = None
    events: list[str] = field(default_factory=list)


class ClaudeAdapter(Adapter):
    """Claude Code: see the module docstring."""

    kind: ClassVar[str] = "claude"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._runs: dict[str, _Run] = {}

    # -- launch -------------------------------------------------------------------
    def private_config_dir(self) -> Path:
        return self.settings.state_path / "claude" / self.spec.name

    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        agent = self.spec.agent
        state = self.state_dir(session_id)
        workdir = self.spec.workdir_path(self.settings.project_root).resolve()
        own = agent.env  # what the unit sets explicitly wins over agentd's defaults
        extra = {k: v for k, v in OFFLINE_ENV.items() if k not in own}
        if env.get("CLAUDE_CONFIG_DIR"):
            config_dir = Path(env["CLAUDE_CONFIG_DIR"]).expanduser()
        else:
            config_dir = self.private_config_dir()
            prepare_config_dir(config_dir, workdir, env.get("ANTHROPIC_API_KEY"))
            extra["CLAUDE_CONFIG_DIR"] = str(config_dir)
        command = list(agent.command)
        skip_permissions = not any(arg.split("=")[0] in PERMISSION_FLAGS for arg in command[1:])
        if skip_permissions and os.geteuid() == 0 and "IS_SANDBOX" not in own:
            extra["IS_SANDBOX"] = "1"  # root refuses --dangerously-skip-permissions otherwise
        settings_path = state / SETTINGS_FILE
        write_json(settings_path, hook_settings(self.spec.name, skip_permissions), mode=0o600, indent=1)
        claude_id = str(uuid.uuid4())
        argv = [*command, "--settings", str(settings_path), "--session-id", claude_id]
        if skip_permissions:
            argv.append("--dangerously-skip-permissions")
        via = "none"
        if wakeup is not None:
            path = state / WAKEUP_FILE
            path.write_text(wakeup, encoding="utf-8")
            extra[WAKEUP_ENV] = str(path)
            if agent.wakeup_via != "none":
                argv += ["--append-system-prompt-file", str(path), KICKOFF]
                via = "system-prompt"
        transcript = config_dir / "projects" / project_dir_name(workdir) / f"{claude_id}.jsonl"
        self._runs = {session_id: _Run(claude_id, config_dir, TranscriptMeter(transcript), kickoff=via != "none")}
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
        watcher = HookWatcher(busy=bool(run and run.kickoff), quiet=self.spec.agent.quiet)
        if run is not None:
            run.watcher = watcher
        return watcher

    def context(self, session: Session) -> ContextFigure:
        run = self._runs.get(session.session_id)
        window = self.spec.context.window
        if run is None:
            return ContextFigure(used=0, window=window, exact=False, source="no claude session")
        if run.meter.path is not None and not run.meter.path.exists():
            found = next(iter(run.config_dir.glob(f"projects/*/{run.claude_id}.jsonl")), None)
            if found is not None:
                run.meter.follow(found)
        used = run.meter.read()
        if used is None:
            return ContextFigure(used=0, window=window, exact=False, source="claude transcript (no reply yet)")
        return ContextFigure(used=used, window=window, exact=True, source=run.meter.source)

    def trail(self, session: Session) -> Any:
        """The session's transcript, parsed (:func:`supervisor.trail.claude.read_transcript`); None
        before it exists.  Reads only: the adapter's own state is left as it is."""
        from ..trail.claude import read_transcript

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
            return []
        if name == "PreCompact":
            run.compact_trigger = str(event.get("trigger") or "")
            # a /compact typed by hand is the person's choice: only its end matters
            return [Meaning.PRE_COMPACT] if run.compact_trigger == "auto" else []
        if name == "SessionStart":
            source = event.get("source")
            if source == "compact":
                auto = run.compact_trigger == "auto"
                run.compact_trigger = None
                # an automatic compaction happens inside a turn; a typed /compact is a turn of its own
                return [Meaning.COMPACTED] if auto else [Meaning.COMPACTED, Meaning.TURN_END]
            if source == "clear" or (source == "startup" and not run.kickoff):
                return [Meaning.TURN_END]  # idle at the prompt
        return []

    def hook_output(self, event: Mapping[str, Any], meanings: list[Meaning], wakeup: str | None) -> str | None:
        if Meaning.COMPACTED in meanings and wakeup and event.get("hook_event_name") == "SessionStart":
            return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": wakeup}})
        return None


def notify_command(unit: str) -> str:
    """The hook command line (a shell command line in Claude Code's settings file)."""
    return shlex.join(notify_argv(unit))


def hook_settings(unit: str, skip_permissions: bool) -> dict[str, Any]:
    """agentd's settings file for one session: the hooks (and the bypass-warning opt-out)."""
    hook = [{"hooks": [{"type": "command", "command": notify_command(unit), "timeout": HOOK_TIMEOUT}]}]
    settings: dict[str, Any] = {"hooks": {event: hook for event in HOOK_EVENTS}}
    if skip_permissions:
        settings["skipDangerousModePermissionPrompt"] = True
    return settings


def prepare_config_dir(config_dir: Path, workdir: Path, api_key: str | None) -> None:
    """agentd's private ``CLAUDE_CONFIG_DIR``: onboarding done, workdir trusted, the key approved.

    Claude Code keeps its own state in the same ``.claude.json``; only these
    keys are set, everything else is kept."""
    config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = config_dir / ".claude.json"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(state, dict):
            state = {}
    except (OSError, ValueError):
        state = {}
    state.update({"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True})
    state.setdefault("theme", "dark")
    projects = state.setdefault("projects", {})
    project = projects.setdefault(str(workdir), {})
    project.update({"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True})
    if api_key:
        responses = state.setdefault("customApiKeyResponses", {"approved": [], "rejected": []})
        approved = responses.setdefault("approved", [])
        if api_key[-20:] not in approved:
            approved.append(api_key[-20:])
    write_json(path, state, mode=0o600, indent=1)
