"""Where the project is, which settings file applies, and where agentd's files are.

Standard library only, so that short client commands (``agentd status``) can
find the pidfile and the socket without importing pydantic.  The full
settings (:mod:`supervisor.config.settings`) use the same :func:`locate` and
inherit :class:`StatePaths`: one rule for both.

Finding the project works the way git finds a repository.  The project root is,
first match wins:

1. ``--project PATH`` (alias ``--root``);
2. ``$AGENTD_PROJECT``, else ``$AGENTD_PROJECT_ROOT``;
3. ``project_root`` in the settings file (relative: to the folder that holds ``etc/``);
4. the nearest folder at or above the working directory that holds ``units/``,
   ``.agent/`` or ``.agentd/``;
5. the working directory.

The settings file is ``--config PATH``, else ``$AGENTD_CONFIG``, else
``etc/agentd.toml`` in the project found by 1, 2, 4 or 5 when it exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "AGENTD_"
DEFAULT_CONFIG = Path("etc") / "agentd.toml"
DEFAULT_STATE_DIR = Path(".agentd")
#: Seconds `agentd start` waits for the new daemon's socket (settings: start_timeout).
DEFAULT_START_TIMEOUT = 30.0
#: A folder holding one of these (as a directory) is a project root.
PROJECT_MARKERS = ("units", ".agent", ".agentd")
#: Environment variables that name the project, in precedence order.
PROJECT_ENV = ("AGENTD_PROJECT", "AGENTD_PROJECT_ROOT")


def discover_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``units/``, ``.agent/`` or ``.agentd/``."""
    start = start.absolute()
    for folder in (start, *start.parents):
        if any((folder / marker).is_dir() for marker in PROJECT_MARKERS):
            return folder
    return None


def _absolute(path: Path, cwd: Path) -> Path:
    path = path.expanduser()
    return (path if path.is_absolute() else cwd / path).resolve()


def file_root(value: str, config: Path) -> Path:
    """A ``project_root`` read from ``config``: relative means relative to the file's project (etc/..)."""
    root = Path(value).expanduser()
    if root.is_absolute():
        return root
    base = config.resolve().parent
    if base.name == "etc":
        base = base.parent
    return base / root


class Location:
    """The project and the settings file, before that file is read (see the module's rule).

    A plain class, not a dataclass: importing dataclasses (inspect, ast, dis ...) cost ``agentd status``
    about 15 ms of its start-up (issue 19)."""

    __slots__ = ("cwd", "explicit", "explicit_from", "found", "config")

    def __init__(self, cwd: Path, explicit: Path | None = None, explicit_from: str = "", found: Path | None = None,
                 config: Path | None = None) -> None:
        self.cwd, self.explicit, self.explicit_from, self.found, self.config = cwd, explicit, explicit_from, found, config

    def _fields(self) -> tuple[object, ...]:
        return (self.cwd, self.explicit, self.explicit_from, self.found, self.config)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Location(" + ", ".join(f"{k}={v!r}" for k, v in zip(self.__slots__, self._fields())) + ")"

    def project_root(self, file_value: str | None = None) -> Path:
        """The root, given the settings file's ``project_root`` (None when it has none)."""
        if self.explicit is not None:
            return self.explicit
        if file_value is not None and self.config is not None:
            return file_root(file_value, self.config).resolve()
        return (self.found or self.cwd).resolve()

    def root_source(self, file_value: str | None = None) -> str:
        """Where :meth:`project_root` came from, for messages."""
        if self.explicit is not None:
            return self.explicit_from
        if file_value is not None and self.config is not None:
            return f"{self.config} (config file)"
        if self.found is not None:
            return f"found above {self.cwd}" if self.found != self.cwd else "the working directory"
        return f"the working directory: no units/, .agent/ or .agentd/ in {self.cwd} or above"


def locate(root_flag: Path | None, config_flag: Path | None, environ: Mapping[str, str] | None = None,
           cwd: Path | None = None) -> Location:
    """Apply the module's rule (steps 1, 2, 4, 5 and the settings file; step 3 is :meth:`Location.project_root`)."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    explicit: Path | None = None
    source = ""
    if root_flag is not None:
        explicit, source = _absolute(Path(root_flag), cwd), "--project (the command line)"
    else:
        for name in PROJECT_ENV:
            if environ.get(name):
                explicit, source = _absolute(Path(environ[name]), cwd), f"{name} (environment)"
                break
    found = discover_root(cwd) if explicit is None else None
    base = explicit or found or cwd
    config: Path | None = config_flag
    if config is None and environ.get(ENV_PREFIX + "CONFIG"):
        config = Path(environ[ENV_PREFIX + "CONFIG"])
    if config is None and (base / DEFAULT_CONFIG).is_file():
        config = base / DEFAULT_CONFIG
    return Location(cwd=cwd, explicit=explicit, explicit_from=source, found=found, config=config)


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
        """``<state>/agentd.sock``, or :func:`short_socket_path` where that is too long for a Unix socket."""
        path = self.state_path / "agentd.sock"
        return path if len(os.fsencode(path)) <= UNIX_PATH_MAX else short_socket_path(self.state_path)

    @property
    def log_path(self) -> Path:
        return self.state_path / "agentd.log"

    @property
    def transcripts_path(self) -> Path:
        return self.state_path / "transcripts"

    def run_unit_state(self, unit: str) -> Path:
        """The state directory of the daemon ``agentd run-unit UNIT`` starts (its own pidfile, socket, log)."""
        return self.state_path / "run-unit" / unit


#: The longest path a Unix socket can have (``sun_path`` holds 108 bytes with the NUL).
UNIX_PATH_MAX = 107


def short_socket_path(state: Path) -> Path:
    """The control socket of a state directory too deep for ``<state>/agentd.sock``: in an owner-only
    ``/tmp/agentd-UID/``, named by a hash of the state directory (the daemon and every client agree).
    The daemon refuses that directory unless it is a real directory of its own (:func:`socket_dir_problem`)."""
    import hashlib

    digest = hashlib.sha256(os.fsencode(state.resolve())).hexdigest()[:20]
    return Path(f"/tmp/agentd-{os.getuid()}") / f"{digest}.sock"


def socket_dir_problem(directory: Path) -> str | None:
    """Why the control socket must not be made in ``directory`` (it exists and is not a real directory of
    this user's: a symlink, a file, another user's), else None.  The daemon's listener refuses on it and
    makes the directory mode 700; ``agentd doctor --env`` reports the same rule."""
    import stat

    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return f"{directory} is not a directory of this user's: the control socket will not be made there"
    return None


class PlainPaths(StatePaths):
    """:class:`StatePaths` from plain values (the client's fast path)."""

    def __init__(self, project_root: Path, state_dir: Path, units_dir: Path = Path("units"),
                 start_timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self.project_root = project_root
        self.state_dir = state_dir
        self.units_dir = units_dir
        self.start_timeout = start_timeout
