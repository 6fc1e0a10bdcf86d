"""How a Codex session is started: its ``-c`` overrides, its sandbox, agentd's hooks, its home.

Everything here is computed from the unit and returns plain values (argv
pieces, a :class:`~supervisor.adapters.base.Sandbox`); the person's own
``config.toml`` is never written, except by ``agentd trust UNIT`` when they
ask for it (:func:`trust_workdir`).

**Sandbox** (:func:`sandbox`).  By default Codex keeps its own sandbox,
described as a Codex *permission profile* (``-c default_permissions="agentd"``
and ``-c permissions.agentd.filesystem={...}``, Codex 0.138 and later; a
``-c`` layer wins over the person's ``sandbox_mode``, checked with 0.169.0)
with ``--ask-for-approval never`` (:func:`permission_profile`): everything
readable; writable only the unit's scope (as directories,
:func:`supervisor.scope.allowset.scope_allowset`), its ``[scope] writable``
paths, a private temp directory (``TMPDIR``; ``/tmp`` itself is not) and
``.git`` (commits) but its ``config``, ``hooks/`` and ``info/``; agentd's
state directory unreadable but for the unit's own memory inbox (the
checkpoint's ``agentd note``/``decide`` leave requests there:
:mod:`supervisor.memory.channel`); ``.agent/``, ``units/``,
``etc/agentd.toml``, ``.codex`` and ``.agents`` read-only even inside a
writable directory.  Unlike ``--sandbox workspace-write`` the workdir is not
writable by itself: a Codex unit writes what its scope says, as a fenced one
does.  ``--dangerously-bypass-approvals-and-sandbox`` is used only when the
unit opts in (``[codex] bypass_sandbox = true``) or when agentd's Landlock
fence is on for the unit: Codex's sandbox (bubblewrap) cannot run inside a
Landlock domain, so there the fence is the sandbox.

**Hooks** (:func:`hook_overrides`).  agentd's hooks are ``-c hooks.<Event>``
overrides (a layer of their own, for this process only), each trusted by a
``-c hooks.state`` entry whose ``trusted_hash`` is Codex's own identity hash
of that handler (SHA-256 of its JSON with sorted keys), so no
``--dangerously-bypass-hook-trust`` is needed and the person's own hooks
keep their own trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from ...durable import atomic_write
from ...memory.channel import ensure_inbox
from ...scope.fencing import hidden_state
from ...session.fence import git_dirs, git_protected
from ..base import Sandbox, fence_on, notify_argv, own_compaction_point
from ..roots import writable_roots

if TYPE_CHECKING:  # pragma: no cover
    from ...config.units import UnitSpec

__all__ = ["HOOK_EVENTS", "KICKOFF", "base_overrides", "hook_overrides", "prepare_private_home", "sandbox",
           "toml_string", "trust_workdir"]

#: The first user message of a session whose wakeup is in the developer instructions.
KICKOFF = ("agentd started this session from a briefing (the agentd wakeup in your developer instructions). "
           "Read it, then continue the current task it describes.")
#: Codex hook events agentd registers (Codex's ``notify`` stays the turn end).
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PreCompact", "PostCompact")
HOOK_TIMEOUT = 30
#: The source path Codex gives hooks that come from ``-c`` overrides.
SESSION_FLAGS_SOURCE = "/<session-flags>/config.toml"
#: Flags in ``[agent] command`` that mean the person chose the sandbox or approvals themselves.
SANDBOX_FLAGS = ("-s", "--sandbox", "-a", "--ask-for-approval", "--full-auto", "--dangerously-bypass-approvals-and-sandbox",
                 "--approve-for-me")


def toml_string(text: str) -> str:
    """A TOML basic string (JSON escapes are valid TOML for these)."""
    return json.dumps(text, ensure_ascii=False)


def toml_array(items: list[str]) -> str:
    return "[" + ", ".join(toml_string(i) for i in items) + "]"


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", event).lower()


def hook_hash(event: str, command: str, timeout: int = HOOK_TIMEOUT, matcher: str | None = None) -> str:
    """Codex's trust hash of one command hook (its identity as JSON, keys sorted, no spaces)."""
    identity: dict[str, object] = {"event_name": _snake(event),
                                   "hooks": [{"async": False, "command": command, "timeout": timeout, "type": "command"}]}
    if matcher is not None:
        identity["matcher"] = matcher
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(data.encode()).hexdigest()


def hook_overrides(unit: str, events: tuple[str, ...] = HOOK_EVENTS) -> list[str]:
    """``-c`` values registering ``agentd notify --unit UNIT`` for ``events``, each trusted for this process."""
    command = shlex.join(notify_argv(unit))
    out, states = [], []
    for event in events:
        out.append(f"hooks.{event}=[{{hooks=[{{type=\"command\",command={toml_string(command)},timeout={HOOK_TIMEOUT}}}]}}]")
        key = f"{SESSION_FLAGS_SOURCE}:{_snake(event)}:0:0"
        states.append(f"{toml_string(key)}={{trusted_hash={toml_string(hook_hash(event, command))},enabled=true}}")
    out.append("hooks.state={" + ",".join(states) + "}")
    return out


def chooses_sandbox(command: tuple[str, ...]) -> bool:
    """Whether ``[agent] command`` already sets the sandbox or approvals (then agentd adds neither)."""
    return any(arg.split("=")[0] in SANDBOX_FLAGS for arg in command[1:])


#: The name of the permission profile agentd gives Codex (``default_permissions``).
PROFILE = "agentd"


def permission_profile(spec: UnitSpec, root: Path, tmp: Path, state_dir: Path | None) -> dict[str, str]:
    """Codex's ``permissions.agentd.filesystem`` table for the unit: absolute path (or ``:root``) -> access
    (``read``, ``write``, ``none``; the most specific path wins).  See the module doc."""
    root = Path(root).resolve()
    table = {":root": "read", str(root): "read"}
    writable = writable_roots(spec, root, tmp)
    for path in writable:
        table[str(path)] = "write"
    gits = git_dirs(root)
    for path in gits:
        table[str(path)] = "write"
    for path in git_protected(gits):
        table[str(path)] = "read"
    if state_dir is not None:
        state = Path(state_dir).resolve()
        table[str(hidden_state(state))] = "none"
        table[str(ensure_inbox(state, spec.name))] = "write"
        for path in writable:
            if path == state or state in path.parents:
                table[str(path)] = "write"  # its temp directory lives in the state directory
    settings_file = root / "etc" / "agentd.toml"
    for path in (root / ".agent", root / "units", settings_file, root / ".codex", root / ".agents"):
        if path.exists() or path.name in (".codex", ".agents"):
            table[str(path)] = "read"
    parent = settings_file.parent
    if settings_file.exists() and any(parent == w or w in parent.parents for w in writable):
        table[str(parent)] = "write"  # a mount point: etc/ cannot be renamed away and replaced
    return table


def toml_inline(table: dict[str, str]) -> str:
    return "{" + ", ".join(f"{toml_string(k)}={toml_string(v)}" for k, v in table.items()) + "}"


def sandbox(spec: UnitSpec, root: Path, tmp: Path, state_dir: Path | None = None) -> tuple[list[str], Sandbox]:
    """The sandbox argv pieces (flags and ``-c`` values, in order) and what status shows."""
    fenced = fence_on(spec)
    if chooses_sandbox(spec.agent.command):
        return [], Sandbox(mode="as [agent] command says", bypassed=False, fenced=fenced)
    if spec.codex.bypass_sandbox or fenced:
        warning = None if fenced else (
            "the Codex sandbox is bypassed ([codex] bypass_sandbox = true) and agentd's Landlock fence is off: "
            "the agent can write anywhere you can; turn the fence on ([scope] fence) or remove bypass_sandbox")
        return ["--dangerously-bypass-approvals-and-sandbox"], Sandbox(
            mode="bypassed (agentd's fence)" if fenced else "bypassed", bypassed=True, fenced=fenced, warning=warning)
    table = permission_profile(spec, root, tmp, state_dir)
    argv = ["--ask-for-approval", "never", "-c", f"default_permissions={toml_string(PROFILE)}",
            "-c", f"permissions.{PROFILE}.filesystem={toml_inline(table)}"]
    writable = tuple(path for path, access in table.items() if access == "write")
    return argv, Sandbox(mode="workspace-write", bypassed=False, fenced=False, writable=writable)


def base_overrides(spec: UnitSpec, workdir: Path) -> list[str]:
    """The ``-c key=value`` overrides (TOML values), in order, but the sandbox and the hooks."""
    cfg, ctx = spec.codex, spec.context
    out = [
        f"projects.{toml_string(str(workdir))}.trust_level=\"trusted\"",  # ignored by 0.169.0 for git repositories
        "check_for_update_on_startup=false",
        "analytics.enabled=false",
        "features.plugins=false",
        "allow_login_shell=false",  # a login shell's profile would reset PATH and lose `agentd`
        "tui.disable_paste_burst=true",  # a fast burst of typed text must not swallow the Enter
        "notify=" + toml_array(notify_argv(spec.name)),
    ]
    if cfg.model_context_window:
        out.append(f"model_context_window={cfg.model_context_window}")
    # the window agentd uses is the smaller of the unit's and Codex's: its compaction goes above hard_limit of it
    window = min((w for w in (cfg.model_context_window, ctx.window if "window" in ctx.model_fields_set else None) if w),
                 default=None)
    if cfg.auto_compact_at and window:
        out.append(f"model_auto_compact_token_limit={own_compaction_point(spec, window, cfg.auto_compact_at)}")
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
    return out


# ------------------------------------------------------------------ CODEX_HOME and trust
def trusted(config: Path, workdir: Path) -> bool:
    """Whether ``config`` (a Codex config.toml) trusts ``workdir``."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    entry = (data.get("projects") or {}).get(str(workdir))
    return isinstance(entry, dict) and entry.get("trust_level") == "trusted"


def trust_workdir(config: Path, workdir: Path) -> bool:
    """Add ``[projects."<workdir>"] trust_level = "trusted"`` to ``config`` (created if missing), keeping
    everything else as it is; False when it was already there.  Raises ValueError for a config that is
    not valid TOML or that has an entry for ``workdir`` with another trust level (left to the person)."""
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{config} is not valid TOML ({exc}); fix it first") from None
    entry = (data.get("projects") or {}).get(str(workdir))
    if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
        return False
    if entry is not None:
        raise ValueError(f"{config} already has an entry for {workdir} (trust_level = {entry.get('trust_level')!r}); "
                         "change it by hand")
    block = f'[projects.{toml_string(str(workdir))}]\ntrust_level = "trusted"\n'
    text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block
    mode = config.stat().st_mode & 0o777 if config.exists() else 0o600
    config.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(config, text, mode=mode)
    return True


def prepare_private_home(home: Path, workdir: Path, source_home: Path | None) -> list[str]:
    """agentd's own ``CODEX_HOME``: the workdir trusted, the login imported from ``source_home``
    (its ``auth.json`` copied when newer).  Returns what was done, for the log."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    done = []
    if trust_workdir(home / "config.toml", workdir):
        done.append(f"trusted {workdir}")
    if source_home is not None and source_home.resolve() != home.resolve():
        auth = source_home / "auth.json"
        mine = home / "auth.json"
        try:
            if auth.is_file() and (not mine.exists() or auth.stat().st_mtime > mine.stat().st_mtime):
                shutil.copy2(auth, mine)
                os.chmod(mine, 0o600)
                done.append(f"imported the login from {auth}")
        except OSError as exc:
            done.append(f"could not import the login from {auth}: {exc.strerror or exc}")
    return done
