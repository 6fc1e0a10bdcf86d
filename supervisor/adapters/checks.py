"""What ``agentd check`` says about a unit's agent before it starts (pure but for reading the agent's config).

* the agent's own sandbox bypassed without agentd's fence (``[codex]
  bypass_sandbox`` / ``[claude] bypass_permissions``);
* a Codex unit whose ``CODEX_HOME`` does not trust its workdir inside a git
  repository: Codex 0.169.0 then stops at "Trust this folder?" (its ``-c
  projects...trust_level`` override is ignored there), so the unit would sit
  there: ``agentd trust UNIT``, ``[codex] trust = "accept"`` or a private home;
* an agent with no way to log in (:func:`login_problem`), read from files
  and the environment only, never the network: a Codex unit whose
  ``CODEX_HOME`` (or, for a private home, the person's, whose login is
  imported) has no ``auth.json`` and no provider key in the environment; a
  Claude unit with no API key or token (or the example's placeholder
  ``sk-ant-...``) and no login in the config dir it names.  Such an agent sits
  at its login screen (issue 27: ``check`` said ``ok``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.units import UnitSpec

__all__ = ["agent_warnings", "login_problem", "placeholder"]

#: Variables that give Codex's built-in provider a key without ``codex login``.
CODEX_KEYS = ("OPENAI_API_KEY", "CODEX_API_KEY")
#: Variables that give Claude Code a key or token without a login.
CLAUDE_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")


def placeholder(value: str) -> bool:
    """An example's stand-in for a key (``sk-ant-...``, ``...``, ``<your key>``), not a key."""
    value = value.strip()
    return not value or "..." in value or "…" in value or (value.startswith("<") and value.endswith(">"))


def agent_warnings(spec: UnitSpec, settings: Settings, environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per problem of the unit's agent that loading does not refuse."""
    from . import AdapterUnavailable, make_adapter
    from .codex import CodexAdapter

    try:
        adapter = make_adapter(spec, settings)
    except AdapterUnavailable:
        return []
    out = []
    box = adapter.sandbox()
    if box.warning:
        out.append(box.warning)
    environ = os.environ if environ is None else environ
    if isinstance(adapter, CodexAdapter):
        env = {**environ, **spec.agent.env}
        problem = adapter.trust_problem(env)
        if problem:
            out.append(f"{problem}; run `agentd trust {spec.name}`, or set [codex] trust = \"accept\" or "
                       "[codex] home = \"private\"")
    login = login_problem(spec, settings, environ)
    if login:
        out.append(login)
    return out


def login_problem(spec: UnitSpec, settings: Settings, environ: Mapping[str, str]) -> str | None:
    """Why the unit's agent will stop at a login screen, from files and ``environ`` (merged under the
    unit's ``[agent] env``), or None; never the network, so a key that is set is taken as good."""
    from . import AdapterUnavailable, make_adapter
    from .codex import CodexAdapter

    env = {**environ, **spec.agent.env}
    if spec.agent.kind == "claude":
        return _claude_login(spec, env, settings.state_path / "claude" / spec.name)
    if spec.agent.kind != "codex":
        return None
    try:
        adapter = make_adapter(spec, settings)
    except AdapterUnavailable:
        return None
    assert isinstance(adapter, CodexAdapter)
    cfg = spec.codex
    if cfg.base_url:  # a custom provider: no login; its key, if it names one, must be set
        if cfg.env_key and not env.get(cfg.env_key):
            return (f"[codex] env_key names {cfg.env_key}, which is not set: Codex exits with \"Missing environment "
                    f"variable\"; set it in [agent] env or agentd's environment")
        return None
    if any(env.get(key) and not placeholder(env[key]) for key in CODEX_KEYS):
        return None
    if any("model_provider" in item for item in cfg.overrides):
        return None  # a provider of the person's own choosing: agentd cannot tell what it needs
    home = adapter.home_path(env)
    homes = [home, adapter.person_home(env)] if cfg.home == "private" else [home]  # the login is imported
    for where in homes:
        if (where / "auth.json").is_file() or _mentions(where / "config.toml", "model_provider"):
            return None
    return (f"Codex has no login: no auth.json in {' or '.join(str(h) for h in homes)} and no "
            f"{' or '.join(CODEX_KEYS)} in the environment, so it stops at \"Sign in with ChatGPT\"; run "
            f"`CODEX_HOME={homes[-1]} codex login`, or set [codex] base_url (and env_key) for a provider of your own")


def _mentions(path: Path, word: str) -> bool:
    """``word`` is in the text file at ``path`` (False when it cannot be read)."""
    try:
        return word in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def _claude_login(spec: UnitSpec, env: Mapping[str, str], private: Path) -> str | None:
    for key in CLAUDE_KEYS:
        value = env.get(key)
        if not value:
            continue
        if placeholder(value):
            where = "the unit's [agent] env" if key in spec.agent.env else "agentd's environment"
            return (f"{key} in {where} is a placeholder ({value!r}, as in the example unit): Claude Code will not "
                    f"log in; put the real key there, or remove it and name a logged-in CLAUDE_CONFIG_DIR")
        return None
    config = env.get("CLAUDE_CONFIG_DIR")
    folder = Path(config).expanduser() if config else private
    if (folder / ".credentials.json").is_file():  # a login (`claude` then /login, in that config dir)
        return None
    if config:
        if _mentions(folder / "settings.json", "apiKeyHelper"):  # a command that prints the key
            return None
        return (f"Claude Code has no key and no login: no {' or '.join(CLAUDE_KEYS)} in the environment and no "
                f".credentials.json in {folder}; set ANTHROPIC_API_KEY in [agent] env, or log in once with "
                f"CLAUDE_CONFIG_DIR={folder} claude")
    return (f"Claude Code has no key: no {' or '.join(CLAUDE_KEYS)} in [agent] env or agentd's environment, and "
            "agentd's private config dir has no login; set ANTHROPIC_API_KEY in [agent] env, or name a logged-in "
            "config dir with CLAUDE_CONFIG_DIR")
