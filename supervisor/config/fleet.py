"""The ``[fleet]`` settings: this daemon's name in the fleet, and the other daemons it shows.

In ``etc/agentd.toml``::

    [fleet]
    name = "laptop"          # this daemon's name on the fleet view (default: the host name)
    timeout = 2.0            # seconds a peer has to answer
    refresh = 5.0            # seconds between two looks at the peers while the dashboard is served

    [[fleet.peers]]
    name = "build-1"                              # default: the URL's host:port
    url = "http://build-1.internal:8765/"         # the peer's dashboard (its `agentd web` URL, without ?token=)
    token_file = "/etc/agentd/build-1.token"      # or token_env = "AGENTD_PEER_BUILD1", or token = "..."
    max_cards = 500                               # the most of its cards shown (the rest are named as left out)

A peer's cards are shown under the name given here, never under the name the
peer gives itself: a peer cannot claim this daemon's name (or another
peer's) and add cards beside theirs.  So every peer's name differs from this
daemon's and from the other peers'.

A peer's token is the peer's own dashboard token (its ``.agentd/web-token``).
It is read when a peer is asked (so a replaced file is picked up), never
logged, never shown: :class:`Peer` keeps an inline ``token`` as a
``SecretStr`` and its repr shows neither the token nor its file's content.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class PeerTokenError(Exception):
    """A peer's token cannot be read (the message names the file or variable, never the token)."""


class Peer(BaseModel):
    """One ``[[fleet.peers]]`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, description="the peer's dashboard, e.g. http://127.0.0.1:8766/")
    name: str | None = Field(default=None, min_length=1, description="shown on the fleet view (default: host:port)")
    token_file: Path | None = Field(default=None, description="a file holding the peer's dashboard token")
    token_env: str | None = Field(default=None, min_length=1, description="an environment variable holding it")
    token: SecretStr | None = Field(default=None, description="the token itself (prefer token_file or token_env)")
    max_cards: int = Field(default=500, ge=1, le=10000, description="the most of the peer's cards shown")

    @model_validator(mode="after")
    def _check(self) -> Peer:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"peer url {self.url!r}: give the peer's dashboard as http://HOST:PORT/")
        if parts.query or parts.username or parts.password or parts.fragment:
            raise ValueError(f"peer url of {self.label}: no query, user or fragment in the URL "
                             "(a token goes in token_file or token_env, never in the URL)")
        sources = [s for s in (self.token_file, self.token_env, self.token) if s is not None]
        if len(sources) != 1:
            raise ValueError(f"peer {self.label}: give exactly one of token_file, token_env, token "
                             "(the peer's dashboard token: its .agentd/web-token)")
        return self

    @property
    def label(self) -> str:
        """The peer's name on the view: ``name``, else the URL's ``host:port``."""
        return self.name or (urlsplit(self.url).netloc or self.url)

    @property
    def base(self) -> str:
        """The URL with one trailing slash."""
        return self.url.rstrip("/") + "/"

    def read_token(self, state_dir: Path) -> str:
        """The token (a relative ``token_file`` is under ``state_dir``); :class:`PeerTokenError` if missing."""
        if self.token is not None:
            value = self.token.get_secret_value().strip()
            where = "its inline token"
        elif self.token_env is not None:
            value = os.environ.get(self.token_env, "").strip()
            where = f"${self.token_env}"
        else:
            assert self.token_file is not None
            path = self.token_file.expanduser()
            path = path if path.is_absolute() else state_dir / path
            where = f"token file {path}"
            try:
                value = path.read_text().strip()
            except OSError as exc:
                raise PeerTokenError(f"{where}: {exc.strerror or exc}") from None
        if not value:
            raise PeerTokenError(f"{where} is empty or unset")
        return value

    def __repr__(self) -> str:  # the token's source, never its value
        return f"Peer(name={self.label!r}, url={self.url!r})"

    __str__ = __repr__


class FleetSettings(BaseModel):
    """The ``[fleet]`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1, description="this daemon's name on the fleet view (default: host name)")
    peers: tuple[Peer, ...] = Field(default=(), description="the other daemons' dashboards: [[fleet.peers]] url, token_file")
    timeout: float = Field(default=2.0, gt=0, le=60, description="seconds a peer has to answer")
    refresh: float = Field(default=5.0, ge=0.5, description="seconds between two looks at the peers (dashboard)")

    @model_validator(mode="after")
    def _unique(self) -> FleetSettings:
        seen = {self.host_name()}
        for peer in self.peers:
            if peer.label == self.host_name():
                raise ValueError(f"a peer is named {peer.label!r}, this daemon's own name on the fleet view: "
                                 "give the peer another name (or this daemon one with [fleet] name)")
            if peer.label in seen:
                raise ValueError(f"two peers are named {peer.label!r}: give each a distinct name")
            seen.add(peer.label)
        return self

    def host_name(self) -> str:
        """This daemon's name on every card it serves."""
        return self.name or socket.gethostname()
