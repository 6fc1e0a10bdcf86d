"""The ``codex`` adapter: OpenAI Codex CLI (verified with ``@openai/codex`` 0.169.0).

How a session runs (docs/codex.md has the whole story):

* **Binary** (:mod:`.binary`).  The native binary, never the npm ``codex``
  node wrapper (SIGKILL on the wrapper orphans the real process): ``[codex]
  binary`` if set, else resolved from ``[agent] command[0]``.  Always
  ``--no-daemon``.  The Session makes it a process-group leader in its own PTY.
* **Configuration** (:mod:`.launch`) only through ``-c`` overrides and
  environment; the person's ``config.toml`` is never written (but by
  ``agentd trust UNIT``, when they ask).  ``CODEX_HOME`` is theirs unless
  ``[codex] home`` names another directory or is ``"private"``
  (``<state>/codex/<unit>``: agentd's own, the workdir trusted there and the
  login's ``auth.json`` imported).
* **Sandbox**: Codex's own ``workspace-write`` with approvals ``never`` and the
  scope, ``.agent/`` and a private ``TMPDIR`` as writable roots; bypassed only
  on ``[codex] bypass_sandbox = true`` (a warning in status and ``check``) or
  under agentd's Landlock fence (Codex's bubblewrap cannot run inside it).
* **Wakeup** = ``developer_instructions`` (a developer message sent with every
  request, kept through Codex's own compaction), and a short positional
  kickoff that starts turn 1 (``wakeup_via = "developer-instructions"``).
* **Hooks** (``-c hooks.*``, each trusted for this process by its hash):
  ``SessionStart(compact)`` is answered with the fresh wakeup,
  ``UserPromptSubmit`` with the hard constraints' digest, ``PreToolUse`` on a
  write inside a module with that module's facts (once per session),
  ``PreCompact(auto)`` starts a checkpoint.  ``[codex] hooks = false``: the old
  path (a ``compacted`` rollout line makes agentd type the wakeup).
* **Turn end** = Codex's ``notify`` for the main thread; the rollout's
  ``task_complete`` / ``turn_aborted`` is the fallback.
* **Context** = the newest ``token_count`` of the rollout (:mod:`.rollout`):
  ``last_token_usage.total_tokens`` over Codex's own ``model_context_window``
  (else the unit's ``[context] window``).
* **Blocking screens** (trust, login, approval) are read from the rendered
  screen; ``[codex] trust = "accept"`` answers the trust screen.
* **Typing**: text, pause 0.5 s, Enter; several lines as one bracketed paste.
  **Quit**: ``/quit``, pause, Enter, then Ctrl-D; then the daemon signals.
"""

from __future__ import annotations

from .adapter import CodexAdapter, CodexWatcher
from .binary import native_binary
from .launch import KICKOFF, hook_hash, trust_workdir
from .rollout import Rollout, SessionState, connection_error

__all__ = ["KICKOFF", "CodexAdapter", "CodexWatcher", "Rollout", "SessionState", "connection_error", "hook_hash",
           "native_binary", "trust_workdir"]
