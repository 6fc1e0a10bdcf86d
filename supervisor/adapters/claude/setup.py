"""What a Claude Code session is started with: permissions, agentd's settings file, the private config dir.

**Permissions** (:func:`permissions`).  By default Claude Code keeps its own
permission checks: ``--permission-mode acceptEdits`` (edits inside the
working directories go through without asking), ``--add-dir`` for each
writable root (the unit's scope directories, ``.agent/``, ``[scope]
writable``), the allow rule ``Bash(agentd:*)`` (the checkpoint's ``agentd
note`` / ``agentd decide``) plus the unit's ``[claude] allow``, and
``permissions.denyInsteadOfPrompting`` in agentd's settings: anything that
would ask (a write outside those directories, another shell command) is
refused at once and the model is told, instead of waiting for a person who
is not there.  ``--dangerously-skip-permissions`` (with ``IS_SANDBOX=1`` as
root) only when the unit opts in (``[claude] bypass_permissions = true``);
without agentd's Landlock fence that is a warning in status and ``check``.

**Its own compaction** (:func:`compaction_env`).  Claude Code 2.1.x compacts
on its own at its *auto-compact window* less 33,000 tokens (20,000 kept for
the reply, 13,000 of margin; verified with 2.1.328: the window 217,000
compacted at 185,000 tokens and not at 183,000).  Behind a custom base URL
it takes its model's window to be 1,000,000, so a unit whose real window is
200,000 would overflow before it compacts.  When the unit sets ``[context]
window``, agentd sets ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` so that point lies
above the unit's ``hard_limit`` (92 % of the window by default): agentd's
checkpoint comes first, Claude Code's own compaction is the backstop before
the provider's limit.  A unit (or a person's environment) that sets the
variable itself, ``DISABLE_AUTO_COMPACT``, ``DISABLE_COMPACT`` or
``--autocompact`` keeps its own choice.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...durable import write_json
from ..base import Sandbox, fence_on, notify_argv, own_compaction_point
from ..roots import writable_roots

if TYPE_CHECKING:  # pragma: no cover
    from ...config.units import UnitSpec

__all__ = ["AUTO_COMPACT_ENV", "HOOK_EVENTS", "compaction_env", "hook_settings", "permissions", "prepare_config_dir",
           "status_line_command"]

#: Hook events agentd listens to (PreToolUse only for tools that write).
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "PreToolUse", "SessionEnd")
PRE_TOOL_MATCHER = "Write|Edit|MultiEdit|NotebookEdit|Bash"
HOOK_TIMEOUT = 30
#: Flags in ``[agent] command`` that mean the person chose the permission mode.
PERMISSION_FLAGS = ("--dangerously-skip-permissions", "--permission-mode", "--allow-dangerously-skip-permissions")
#: Always allowed without asking: agentd's own memory commands from the agent's shell.
AGENTD_RULE = "Bash(agentd:*)"


#: Claude Code's auto-compact window (tokens; it compacts at that less :data:`COMPACT_BUFFER`).
AUTO_COMPACT_ENV = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
#: What Claude Code 2.1.x keeps free below its auto-compact window: min(max output, 20,000) + 13,000.
COMPACT_BUFFER = 33_000
#: The least auto-compact window Claude Code accepts (a smaller value is refused with a warning).
MIN_AUTO_COMPACT_WINDOW = 100_000
#: Settings a person (or the unit) may have chosen for Claude Code's own compaction: left as they are.
OWN_COMPACTION_CHOICES = (AUTO_COMPACT_ENV, "DISABLE_AUTO_COMPACT", "DISABLE_COMPACT", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")


def compaction_env(spec: UnitSpec, env: Mapping[str, str]) -> dict[str, str]:
    """``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` putting Claude Code's own compaction above ``hard_limit`` of the
    unit's ``[context] window`` (see the module docstring); nothing when the unit names no window, or when
    the unit, the environment or ``[agent] command`` already chose."""
    if "window" not in spec.context.model_fields_set:
        return {}
    chosen = {**env, **spec.agent.env}
    if any(chosen.get(k) for k in OWN_COMPACTION_CHOICES) or any(
            a.split("=")[0] == "--autocompact" for a in spec.agent.command[1:]):
        return {}
    point = own_compaction_point(spec, spec.context.window)
    return {AUTO_COMPACT_ENV: str(max(point + COMPACT_BUFFER, MIN_AUTO_COMPACT_WINDOW))}


def chooses_permissions(command: tuple[str, ...]) -> bool:
    return any(arg.split("=")[0] in PERMISSION_FLAGS for arg in command[1:])


def writable_dirs(spec: UnitSpec, root: Path) -> list[Path]:
    """The working directories beside the workdir: scope directories, ``.agent/``, ``[scope] writable``."""
    return [p for p in writable_roots(spec, root) if p.is_dir()]


def permissions(spec: UnitSpec, root: Path) -> tuple[list[str], dict[str, Any], dict[str, str], Sandbox]:
    """(argv flags, settings ``permissions`` block, environment, what status shows) for the unit."""
    fenced = fence_on(spec)
    cfg = spec.claude
    if chooses_permissions(spec.agent.command):
        return [], {}, {}, Sandbox(mode="as [agent] command says", bypassed=False, fenced=fenced)
    if cfg.bypass_permissions:
        env = {"IS_SANDBOX": "1"} if os.geteuid() == 0 and "IS_SANDBOX" not in spec.agent.env else {}
        warning = None if fenced else (
            "Claude Code's permission checks are bypassed ([claude] bypass_permissions = true) and agentd's Landlock "
            "fence is off: the agent can write anywhere you can; turn the fence on ([scope] fence) or remove it")
        return ["--dangerously-skip-permissions"], {}, env, Sandbox(
            mode="bypassed (agentd's fence)" if fenced else "bypassed", bypassed=True, fenced=fenced, warning=warning)
    dirs = writable_dirs(spec, root)
    argv = ["--permission-mode", "acceptEdits"]
    for d in dirs:
        argv += ["--add-dir", str(d)]
    block = {"allow": [AGENTD_RULE, *cfg.allow], "denyInsteadOfPrompting": True}
    return argv, block, {}, Sandbox(mode="acceptEdits", bypassed=False, fenced=fenced, writable=tuple(str(d) for d in dirs))


def notify_command(unit: str) -> str:
    """The hook command line (a shell command line in Claude Code's settings file)."""
    return shlex.join(notify_argv(unit))


def status_line_command(path: Path) -> str:
    """A status line that prints nothing and keeps Claude Code's JSON input in ``path`` (written whole)."""
    tmp = path.with_name(path.name + ".tmp")
    return f"cat > {shlex.quote(str(tmp))} && mv -f {shlex.quote(str(tmp))} {shlex.quote(str(path))}"


def hook_settings(unit: str, bypass: bool, perms: dict[str, Any] | None = None, status_file: Path | None = None) -> dict[str, Any]:
    """agentd's settings file for one session: the hooks, the permissions, the status line."""
    hook = [{"hooks": [{"type": "command", "command": notify_command(unit), "timeout": HOOK_TIMEOUT}]}]
    hooks: dict[str, Any] = {event: hook for event in HOOK_EVENTS}
    hooks["PreToolUse"] = [{"matcher": PRE_TOOL_MATCHER, **hook[0]}]
    settings: dict[str, Any] = {"hooks": hooks}
    if bypass:
        settings["skipDangerousModePermissionPrompt"] = True
    if perms:
        settings["permissions"] = perms
    if status_file is not None:
        settings["statusLine"] = {"type": "command", "command": status_line_command(status_file), "padding": 0}
    return settings


def prepare_config_dir(config_dir: Path, workdir: Path, api_key: str | None, added: list[Path] | tuple[Path, ...] = ()) -> None:
    """agentd's private ``CLAUDE_CONFIG_DIR``: onboarding done, the workdir and the ``--add-dir``
    directories trusted (else each asks "Is this a directory you created or one you trust?"), the key approved.

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
    for trusted in (workdir, *added):
        project = projects.setdefault(str(trusted), {})
        project.update({"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True})
    if api_key:
        responses = state.setdefault("customApiKeyResponses", {"approved": [], "rejected": []})
        approved = responses.setdefault("approved", [])
        if api_key[-20:] not in approved:
            approved.append(api_key[-20:])
    write_json(path, state, mode=0o600, indent=1)
