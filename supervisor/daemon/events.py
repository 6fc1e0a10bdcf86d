"""The events of the daemon's one queue: signals, units' timers, file changes, the end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .unit import UnitSupervisor


@dataclass(frozen=True)
class Signal:
    number: int


@dataclass(frozen=True)
class TimerFired:
    unit: UnitSupervisor


@dataclass(frozen=True)
class FileChanged:
    path: str


@dataclass(frozen=True)
class Quit:
    pass


Event = Signal | TimerFired | FileChanged | Quit
