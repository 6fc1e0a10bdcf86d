"""The context window agentd checkpoints against, the figure it watches, and where the agent's own compaction goes.

:func:`context_window` is the one rule for the window (the smaller of the
unit's and the agent's own); :class:`ContextFigure` is what an adapter
reports each tick (tokens used, the window, where each came from);
:func:`own_compaction_point` is where agentd puts the agent's own
auto-compaction when the CLI lets it (Codex's ``model_auto_compact_token_limit``,
Claude Code's ``CLAUDE_CODE_AUTO_COMPACT_WINDOW``): above ``hard_limit``.
Pure: no files, no clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..config.units import UnitSpec

__all__ = ["OWN_COMPACTION_AT", "WINDOW_TOLERANCE", "ContextFigure", "WindowSource", "context_window",
           "own_compaction_point"]


class WindowSource(str, enum.Enum):
    """Where a context figure's window came from."""

    AGENT = "agent"  # the agent reported it (Codex token_count, Claude Code's status line)
    UNIT = "unit"  # the unit's [context] window
    DEFAULT = "default"  # agentd's default [context] window (nobody said)


#: A configured window further than this (as a fraction) from the agent's own is a warning.
WINDOW_TOLERANCE = 0.10


@dataclass(frozen=True)
class ContextFigure:
    """Tokens in use and the window; ``exact`` when the agent reported them itself.

    ``window_source`` says where the window came from; ``window_warning`` is set
    when the unit's configured window disagrees with the agent's own."""

    used: int
    window: int
    exact: bool
    source: str
    window_source: WindowSource = WindowSource.UNIT
    window_warning: str | None = None

    @property
    def ratio(self) -> float:
        return self.used / self.window if self.window else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"used": self.used, "window": self.window, "ratio": round(self.ratio, 4), "exact": self.exact,
                "source": self.source, "window_source": self.window_source.value, "window_warning": self.window_warning}


def context_window(spec: UnitSpec, reported: int | None) -> tuple[int, WindowSource, str | None]:
    """The window agentd checkpoints against: the smaller of the unit's ``[context] window`` (when the
    unit sets one) and the agent's own (when it reports one); with only one, that one; with neither,
    agentd's default.

    The smaller, because a checkpoint must come before the agent compacts *or* overflows: Claude Code
    behind a custom base URL reports 1,000,000 whatever the model's real window, and a person who wrote
    ``window = 200000`` knows better; an agent that reports less than the unit says compacts at its own.
    Returns (window, where it came from, a warning when the two differ by more than
    :data:`WINDOW_TOLERANCE`)."""
    configured = spec.context.window
    explicit = "window" in spec.context.model_fields_set
    agent = reported if reported and reported > 0 else None
    if agent is None:
        return configured, WindowSource.UNIT if explicit else WindowSource.DEFAULT, None
    if not explicit:
        return agent, WindowSource.AGENT, None
    window, source = (configured, WindowSource.UNIT) if configured <= agent else (agent, WindowSource.AGENT)
    warning = None
    if abs(agent - configured) > WINDOW_TOLERANCE * configured:
        warning = (f"[context] window = {configured} disagrees with the agent's own window {agent}; "
                   f"agentd uses the smaller, {window} (fix or remove [context] window in {spec.path.name})")
    return window, source, warning


#: Where an agent's own compaction goes, as a share of the window agentd uses, at the least: above
#: ``hard_limit`` (and ``checkpoint_at``), so agentd's checkpoint always comes first.
OWN_COMPACTION_AT = 0.92
#: How far above ``hard_limit`` the agent's own compaction stays, at the least.
OWN_COMPACTION_MARGIN = 0.01


def own_compaction_point(spec: UnitSpec, window: int, at: float = OWN_COMPACTION_AT) -> int:
    """Tokens at which the agent's own auto-compaction should fire, where the CLI lets agentd set it (Codex's
    ``model_auto_compact_token_limit``, Claude Code's auto-compact window): ``at`` of ``window``, and always
    above the unit's ``hard_limit`` and ``checkpoint_at`` of it, so the agent never compacts before agentd's
    checkpoint (never past 99 % of the window either)."""
    ctx = spec.context
    share = max(at, ctx.hard_limit + OWN_COMPACTION_MARGIN, ctx.checkpoint_at + OWN_COMPACTION_MARGIN)
    return int(window * min(share, 0.99))
