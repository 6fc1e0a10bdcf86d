"""The ``[web]`` settings: where the dashboard listens, its token, and who may read ``/metrics``.

In ``etc/agentd.toml``::

    [web]
    enabled = false          # serve the dashboard from daemon start (else: `agentd web` starts it)
    listen = "127.0.0.1"     # loopback by default; anything else is reachable from other machines
    port = 8765              # 0: any free port; taken by another program: a free one near it (the URL says which)
    token_file = "web-token" # relative: under the state directory; created (0600) on first use
    metrics_public = false   # /metrics without the token (loopback only)

or ``AGENTD_WEB__PORT=9000`` in the environment (the daemon's, at its start; or ``agentd web``'s,
which asks the running daemon for it; ``agentd web --port N`` asks for exactly N).  Every page, every API call
and ``/metrics`` need the token (a URL parameter once, then a cookie; or an
``Authorization: Bearer`` header), whatever ``listen`` is.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """True for a loopback address or name (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebSettings(BaseModel):
    """The ``[web]`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=False, description="serve the dashboard from daemon start (else `agentd web` starts it)")
    listen: str = Field(default="127.0.0.1", min_length=1,
                        description="address to listen on; a non-loopback address is reachable from other machines")
    port: int = Field(default=8765, ge=0, le=65535,
                      description="TCP port (0: any free port; taken by another program: a free one near it)")
    token_file: Path = Field(default=Path("web-token"), description="the token's file (relative: under state_dir)")
    metrics_public: bool = Field(default=False, description="/metrics without the token (only with a loopback listen)")

    @model_validator(mode="after")
    def _metrics_public_on_loopback(self) -> WebSettings:
        if self.metrics_public and not is_loopback(self.listen):
            raise ValueError(f"metrics_public = true needs a loopback listen address, not {self.listen!r} "
                             "(give Prometheus the token instead: Authorization: Bearer)")
        return self

    @property
    def loopback(self) -> bool:
        return is_loopback(self.listen)
