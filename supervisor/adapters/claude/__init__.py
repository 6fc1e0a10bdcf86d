"""The ``claude`` adapter: Claude Code (the native CLI) in a PTY.

Verified against Claude Code 2.1.328 (see ``docs/claude.md``).

Launch (:mod:`.setup`)
    ``[agent] command`` is the native binary (plus any flags of your own, such
    as ``--model``).  The adapter adds ``--settings <session dir>/settings.json``
    (agentd's hooks, permissions and status line; the person's own settings
    files are never written), ``--session-id <uuid>`` (so the transcript's
    name is known), the permission flags (by default ``--permission-mode
    acceptEdits`` with ``--add-dir`` for the scope and ``.agent/``, agentd's
    own ``agentd`` commands allowed and anything that would ask refused;
    ``--dangerously-skip-permissions`` only on ``[claude] bypass_permissions``),
    ``--append-system-prompt-file <session dir>/wakeup.md`` (the wakeup as a
    real system message) and, after ``--``, a short positional prompt that
    starts the first turn at once.
Environment
    Offline-friendly: ``DISABLE_AUTOUPDATER``, ``DISABLE_TELEMETRY``,
    ``DISABLE_ERROR_REPORTING``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``,
    ``CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL`` (2.1.x cloned the plugin
    marketplace from GitHub at every start), ``CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL``
    (each unless the unit's ``[agent] env`` sets it).  ``CLAUDE_CONFIG_DIR``: when
    the unit's ``[agent] env`` names one (a person's own login), it is used as
    it is; otherwise agentd keeps a private one in ``<state>/claude/<unit>/``
    with the onboarding state prepared.
Hooks (``agentd notify --unit NAME``, payload on stdin)
    ``Stop`` = turn end; ``UserPromptSubmit`` = a turn began, answered with the
    hard constraints' digest; ``PreToolUse`` on a write inside a module =
    that module's facts, once per session; ``PreCompact`` with trigger
    ``auto`` = a checkpoint starts; ``SessionStart`` with source ``compact`` =
    answered with the wakeup as ``additionalContext``.
Context
    ``message.usage`` of the newest main-thread assistant entry of the session
    transcript (:mod:`.transcript`); the window from the status line's
    ``context_window.context_window_size`` when Claude Code reports it, else
    the unit's ``[context] window``.
Typing and leaving
    Text, a pause, Enter; several lines as one bracketed paste.  ``/exit``;
    then the daemon signals the process group.
"""

from __future__ import annotations

from .adapter import KICKOFF, ClaudeAdapter, HookWatcher
from .setup import hook_settings, permissions, prepare_config_dir
from .transcript import StatusLine, TranscriptMeter, project_dir_name

__all__ = ["KICKOFF", "ClaudeAdapter", "HookWatcher", "StatusLine", "TranscriptMeter", "hook_settings", "permissions",
           "prepare_config_dir", "project_dir_name"]
