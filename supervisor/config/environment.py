"""The environment an agent starts with.

The daemon's own environment (less agentd's settings variables, but with the
memory sync's knobs :data:`MEMORY_SYNC_ENV`, meant for the agent's own
``agentd decide``), then the unit's ``[agent] env``, then what agentd tells
every agent about itself:

``AGENTD_UNIT``, ``AGENTD_MODULE``, ``AGENTD_SCOPE`` (the unit's module and
scope paths, JSON), ``AGENTD_SESSION``, ``AGENTD_ROOT`` (the project root),
``AGENTD_SOCKET`` (the control socket) and ``AGENTD_INBOX`` (where its memory
commands leave their requests: supervisor.memory.channel), so that ``agentd
decide`` and ``agentd note`` run from the agent's shell know where they are
without loading its unit.
``PATH`` starts with agentd's own bin directory so that ``agentd`` is found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .settings import ENV_PREFIX, Settings
from .units import UnitSpec, agent_path

#: ``AGENTD_SYNC=after-decision`` and where to (supervisor.memory.sync): kept for the agents, whose
#: ``agentd decide`` and MCP ``log_decision`` read them (a pod's daemon gets them from its manifest).
MEMORY_SYNC_ENV = ("AGENTD_SYNC", "AGENTD_SYNC_REMOTE", "AGENTD_SYNC_BRANCH")


def agent_environment(spec: UnitSpec, settings: Settings, session_id: str, base: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(ENV_PREFIX) or k in MEMORY_SYNC_ENV}
    env.setdefault("TERM", "xterm-256color")
    env.update(spec.agent.env)
    env["PATH"] = agent_path(env.get("PATH", ""))
    env.update(
        {
            "AGENTD_UNIT": spec.name,
            "AGENTD_MODULE": spec.module,
            # the unit's own module and scope, so that the agent's `agentd decide` loads no unit file
            "AGENTD_SCOPE": json.dumps({"module": spec.module, "paths": list(spec.scope.paths)}),
            "AGENTD_SESSION": session_id,
            "AGENTD_ROOT": str(settings.project_root),
            "AGENTD_SOCKET": str(settings.socket_path),
            "AGENTD_INBOX": str(settings.state_path / "inbox" / spec.name),  # memory.channel.inbox_path
        }
    )
    return env
