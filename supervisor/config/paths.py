"""Where agentd's files are, from the settings' path values.

Standard library only, so that short client commands (``agentd status``) can
find the pidfile and the socket without importing pydantic; :class:`Settings`
uses the same rules (it inherits :class:`StatePaths`).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_PREFIX = "AGENTD_"
DEFAULT_CONFIG = Path("etc") / "agentd.toml"
DEFAULT_STATE_DIR = Path(".agentd")


def find_config(explicit: Path | None) -> Path | None:
    """``--config``, else ``$AGENTD_CONFIG``, else ``etc/agentd.toml`` under the cwd when it exists."""
    if explicit is not None:
        return explicit
    env = os.environ.get(ENV_PREFIX + "CONFIG")
    if env:
        return Path(env)
    candidate = Path.cwd() / DEFAULT_CONFIG
    return candidate if candidate.is_file() else None


def file_root(value: str, config: Path) -> Path:
    """A ``project_root`` read from ``config``: relative means relative to the file's project (etc/..)."""
    root = Path(value).expanduser()
    if root.is_absolute():
        return root
    base = config.resolve().parent
    if base.name == "etc":
        base = base.parent
    return base / root


class StatePaths:
    """Derived paths; needs ``project_root`` (absolute), ``state_dir`` and ``units_dir``."""

    project_root: Path
    state_dir: Path
    units_dir: Path

    def _under_root(self, path: Path) -> Path:
        path = path.expanduser()
        return path if path.is_absolute() else self.project_root / path

    @property
    def state_path(self) -> Path:
        return self._under_root(self.state_dir)

    @property
    def units_path(self) -> Path:
        return self._under_root(self.units_dir)

    @property
    def pidfile(self) -> Path:
        return self.state_path / "agentd.pid"

    @property
    def socket_path(self) -> Path:
        return self.state_path / "agentd.sock"

    @property
    def log_path(self) -> Path:
        return self.state_path / "agentd.log"

    @property
    def transcripts_path(self) -> Path:
        return self.state_path / "transcripts"


class PlainPaths(StatePaths):
    """:class:`StatePaths` from plain values (the client's fast path)."""

    def __init__(self, project_root: Path, state_dir: Path, units_dir: Path = Path("units")) -> None:
        self.project_root = project_root
        self.state_dir = state_dir
        self.units_dir = units_dir
