"""What ``agentd check`` says about a unit's agent before it starts (pure but for reading the agent's config).

* the agent's own sandbox bypassed without agentd's fence (``[codex]
  bypass_sandbox`` / ``[claude] bypass_permissions``);
* a Codex unit whose ``CODEX_HOME`` does not trust its workdir inside a git
  repository: Codex 0.169.0 then stops at "Trust this folder?" (its ``-c
  projects...trust_level`` override is ignored there), so the unit would sit
  there: ``agentd trust UNIT``, ``[codex] trust = "accept"`` or a private home.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.units import UnitSpec

__all__ = ["agent_warnings"]


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
    if isinstance(adapter, CodexAdapter):
        env = {**(os.environ if environ is None else environ), **spec.agent.env}
        problem = adapter.trust_problem(env)
        if problem:
            out.append(f"{problem}; run `agentd trust {spec.name}`, or set [codex] trust = \"accept\" or "
                       "[codex] home = \"private\"")
    return out
