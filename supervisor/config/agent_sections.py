"""The sections of a unit file that belong to one agent kind (``[codex]``, ``[claude]``) and ``[freeze]``.

:class:`~supervisor.config.units.UnitSpec` holds them; the adapters
(:mod:`supervisor.adapters.codex`, :mod:`supervisor.adapters.claude`) and the
freeze policy (:class:`supervisor.continuity.policy.Freeze`) read them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CodexSection(Section):
    """Settings of the ``codex`` adapter (see supervisor/adapters/codex/ and docs/codex.md)."""

    binary: str | None = Field(default=None, description="native codex binary (default: resolved from [agent] command[0])")
    home: str | None = Field(default=None, description='CODEX_HOME: unset = the user\'s, "private" = <state>/codex/<unit>, or a path')
    model: str | None = None
    base_url: str | None = Field(default=None, description="a custom Responses API provider (e.g. http://127.0.0.1:8080/v1)")
    env_key: str | None = Field(default=None, description="variable holding the custom provider's API key")
    request_max_retries: int | None = Field(default=None, ge=0)
    stream_max_retries: int | None = Field(default=None, ge=0)
    auto_compact_at: float | None = Field(default=0.92, gt=0, lt=1, description="Codex's own auto-compaction, above checkpoint_at and hard_limit")
    model_context_window: int | None = Field(default=None, gt=0, description="tell Codex its model's window (models it does not know)")
    bypass_sandbox: bool = Field(default=False, description="--dangerously-bypass-approvals-and-sandbox (opt-in; see docs/codex.md)")
    hooks: bool = Field(default=True, description="agentd's own Codex hooks (-c, trusted per session); off: notify and the rollout only")
    trust: Literal["block", "accept"] = Field(
        default="block", description='the "Trust this folder?" screen: block (show it in status) or accept (answer yes)')
    unbounded_retries: bool = Field(default=False, description="let Codex retry an unreachable server forever")
    overrides: tuple[str, ...] = Field(default=(), description="more -c key=value overrides, passed as given")


class ClaudeSection(Section):
    """Settings of the ``claude`` adapter (see supervisor/adapters/claude/ and docs/claude.md)."""

    bypass_permissions: bool = Field(default=False, description="--dangerously-skip-permissions (opt-in; see docs/claude.md)")
    allow: tuple[str, ...] = Field(default=(), description='more permission rules allowed without asking, e.g. "Bash(npm test:*)"')


FreezeAction = Literal["restart", "notify"]


class FreezeSection(Section):
    """What agentd does when a running session freezes (see supervisor.continuity.policy.Freeze)."""

    after: float = Field(default=120.0, gt=0, description="seconds a freeze must last before it counts")
    idle_after_compaction: FreezeAction = "restart"
    stuck_above_hard_limit: FreezeAction = "restart"
    checkpoint_overdue: FreezeAction = "restart"
    approval_wait: FreezeAction = "restart"
    blocked_screen: FreezeAction = "notify"
    stopped_process: FreezeAction = "notify"  # SIGSTOPped: restart ends it (SIGKILL) and starts it again
