"""Adapters: what differs between agent kinds (see :mod:`supervisor.adapters.base`).

:func:`make_adapter` picks the adapter for a unit's ``[agent] kind``.
Unknown kinds raise :class:`AdapterUnavailable`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Adapter
from .claude import ClaudeAdapter
from .codex import CodexAdapter
from .generic import GenericAdapter

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.units import UnitSpec

__all__ = ["ADAPTERS", "AdapterUnavailable", "make_adapter"]

#: kind -> adapter class, for the kinds that are implemented.
ADAPTERS: dict[str, type[Adapter]] = {GenericAdapter.kind: GenericAdapter, CodexAdapter.kind: CodexAdapter,
                                   ClaudeAdapter.kind: ClaudeAdapter}


class AdapterUnavailable(NotImplementedError):
    """The unit asks for an agent kind whose adapter does not exist yet."""


def make_adapter(spec: UnitSpec, settings: Settings) -> Adapter:
    """The adapter for ``spec.agent.kind``; raises :class:`AdapterUnavailable` for unknown kinds."""
    kind = spec.agent.kind
    cls = ADAPTERS.get(kind)
    if cls is None:
        raise AdapterUnavailable(f"adapter {kind!r} is not available yet (unit {spec.name}: use kind = \"generic\")")
    return cls(spec, settings)
