"""Where the real agent CLIs the end-to-end tests drive are installed (tests/install_codex.sh, install_claude.sh).

Test modules never import each other; what several of them need lives here or in conftest.
"""

from __future__ import annotations

import os
from pathlib import Path

from supervisor.adapters.codex import native_binary

REPO = Path(__file__).resolve().parent.parent


def claude_binary() -> Path | None:
    """The Claude Code native binary: ``$AGENTD_CLAUDE_BIN``, else the one tests/install_claude.sh put in .cache."""
    env = os.environ.get("AGENTD_CLAUDE_BIN")
    if env:
        return Path(env) if os.access(env, os.X_OK) else None
    found = sorted((REPO / ".cache" / "npm-claude" / "node_modules" / "@anthropic-ai").glob("claude-code-linux-*/claude"))
    return found[0] if found and os.access(found[0], os.X_OK) else None


def find_codex() -> tuple[Path | None, str]:
    """The Codex native binary (``$AGENTD_CODEX_BIN``, else tests/install_codex.sh's), or None and why not."""
    given = os.environ.get("AGENTD_CODEX_BIN")
    candidates = [Path(given)] if given else []
    candidates.append(REPO / ".cache" / "npm" / "node_modules" / "@openai" / "codex" / "bin" / "codex.js")
    reason = "no candidate"
    for cand in candidates:
        try:
            return native_binary(str(cand), REPO), ""
        except FileNotFoundError as exc:
            reason = str(exc)
    return None, f"the Codex CLI is not installed ({reason}); run tests/install_codex.sh"
