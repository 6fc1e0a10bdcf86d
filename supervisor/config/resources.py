"""``[resources]`` of a unit file: per-session limits applied through the session's cgroup.

Applied only where agentd runs each session in a cgroup v2 group and the
controller reaches that group (``memory`` for ``memory_max``, ``cpu`` for
``cpu_weight``); otherwise the session starts anyway and ``agentd status``
names each limit as unavailable and why (see
:mod:`supervisor.session.containment`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*", re.IGNORECASE)
_FACTOR = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any) -> int:
    """Bytes from an integer or a string such as ``"512M"``, ``"2G"``, ``"1.5GiB"`` (powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError("must be a size such as 536870912, \"512M\" or \"2G\"")
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE.fullmatch(str(value))
        if m is None:
            raise ValueError(f"{value!r} is not a size (use bytes, or a number with K, M, G or T: \"512M\")")
        size = int(float(m.group(1)) * _FACTOR[m.group(2).lower()])
    if size <= 0:
        raise ValueError("must be a positive size")
    return size


class ResourcesSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_max: int | None = Field(default=None, description="cgroup memory.max of each session (bytes, or \"512M\")")
    cpu_weight: int | None = Field(default=None, ge=1, le=10000, description="cgroup cpu.weight (100 is the default share)")

    @field_validator("memory_max", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int | None:
        return None if value is None else parse_size(value)
