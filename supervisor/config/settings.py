"""Daemon settings: ``etc/agentd.toml``, then ``AGENTD_*`` environment, then CLI flags.

Precedence, highest first: explicit keyword arguments (the CLI), ``AGENTD_*``
environment variables, the TOML file, the defaults below.  Which project and
which TOML file is the one rule of :func:`supervisor.config.paths.locate`
(``--project``, ``$AGENTD_PROJECT``, the file's ``project_root``, else the
nearest folder above the working directory with ``units/``, ``.agent/`` or
``.agentd/``), shared with the CLI's fast path.

A bad value is reported as one line naming the setting and where it came from,
e.g. ``setting 'stop_timeout' from AGENTD_STOP_TIMEOUT (environment): Input
should be a valid number``.
"""

from __future__ import annotations

import contextvars
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .paths import DEFAULT_START_TIMEOUT, ENV_PREFIX, StatePaths, discover_root, locate
from .fleet import FleetSettings
from .notify import NotifySection
from .web import WebSettings

#: Sessions per unit whose transcripts are kept (``transcript_keep``; supervisor.session.retention), and the
#: least it may be (0 aside): the running session and the one before it, whose trail is read as it ends.
DEFAULT_KEEP = 100
MIN_KEEP = 2


_FILE_DATA: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("agentd_settings_file", default={})  # noqa: B039 - never mutated: set() replaces it


class _FileSource(PydanticBaseSettingsSource):
    """The TOML file's values, below the environment in precedence."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return _FILE_DATA.get().get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_DATA.get())


class SettingsError(Exception):
    """A setting could not be loaded; the message is one line for the user."""


class Settings(StatePaths, BaseSettings):
    """What the daemon and the CLI need to find their files and behave."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True)

    project_root: Path = Field(default_factory=lambda: discover_root(Path.cwd()) or Path.cwd(),
                               description="the project the agents work on")
    state_dir: Path = Field(
        default=Path(".agentd"),
        description="pidfile, control socket, agentd's log, transcripts (relative: under project_root)",
    )
    units_dir: Path = Field(default=Path("units"), description="unit files (relative: under project_root)")
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    stop_timeout: float = Field(default=10.0, gt=0, description="default seconds between SIGTERM and SIGKILL")
    start_timeout: float = Field(default=DEFAULT_START_TIMEOUT, gt=0, description="seconds `agentd start` waits for the socket")
    status_interval: float = Field(default=2.0, gt=0, description="seconds between CPU/RSS samples of agents")
    only_units: tuple[str, ...] = Field(
        default=(), description="load only these units (`agentd run-unit UNIT`: one unit, one daemon, one service)")
    event_index: bool = Field(
        default=True, description="the daemon keeps the event index (`agentd recall --events`) up to date on a thread")
    transcript_keep: int = Field(
        default=DEFAULT_KEEP, ge=0,
        description="sessions per unit whose transcripts are kept (the newest; older ones are removed as a "
                    "session starts); 0: keep every one")
    event_half_life: float = Field(
        default=14.0, gt=0, description="days: in event search a hit this old counts half as much as a new one")
    service_stop_timeout: float | None = Field(
        default=None, gt=0,
        description="seconds the service manager gives agentd to stop (systemd TimeoutStopSec; "
                    "default: $TIMEOUT_STOP_USEC when set)")
    containment: Literal["auto", "subreaper"] = Field(
        default="auto", description="auto: a cgroup v2 group per session where one can be made, else the "
                                    "subreaper; subreaper: never make cgroups")
    cgroup_parent: Path | None = Field(
        default=None, description="the cgroup v2 directory for the session groups (default: detected)")
    web: WebSettings = Field(default_factory=WebSettings,
                             description="the dashboard and /metrics: the [web] section (AGENTD_WEB__PORT=...)")
    fleet: FleetSettings = Field(default_factory=FleetSettings,
                                 description="the other daemons the fleet view shows: the [fleet] section")
    notify: NotifySection | None = Field(default=None, description="a command run with each plan or unit event "
                                                                     "as JSON on stdin: the [notify] section")

    @field_validator("transcript_keep")
    @classmethod
    def _keep_enough(cls, value: int) -> int:
        if 0 < value < MIN_KEEP:
            raise ValueError(f"keep at least {MIN_KEEP} sessions' transcripts (the running one and the one before "
                             "it, whose trail is read as it ends), or 0 to keep every one")
        return value

    @field_validator("project_root")
    @classmethod
    def _absolute_root(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))

def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise SettingsError(f"config file {path}: not found (pass an existing file to --config)") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path}: not valid TOML: {exc}") from None
    return data


def _source_of(field: str, file_data: dict[str, Any], config: Path | None, overrides: dict[str, Any],
               root_from: str) -> str:
    if field == "project_root" and root_from:
        return root_from
    if field in overrides:
        return "the command line"
    env_name = ENV_PREFIX + field.upper()
    nested = sorted(k for k in os.environ if k.startswith(env_name + "__"))
    if env_name in os.environ or nested:
        return f"{env_name if env_name in os.environ else ', '.join(nested)} (environment)"
    if field in file_data and config is not None:
        return f"{config} (config file)"
    return "the defaults"


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Load settings from the file, the environment and ``overrides``.

    Raises :class:`SettingsError` with a one-line message naming the setting and
    its source when something is wrong.
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    where = locate(overrides.pop("project_root", None), config)
    path = where.config
    file_data = _read_toml(path) if path is not None else {}
    file_value = file_data.get("project_root")
    root_from = ""
    if where.explicit is not None or file_value is None or isinstance(file_value, str):
        # Else a bad value in the file, reported by the validation below.
        overrides["project_root"] = where.project_root(file_value)
        root_from = where.root_source(file_value)
    token = _FILE_DATA.set(file_data)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        shown = ".".join(str(part) for part in err["loc"]) or "?"
        known = ", ".join(Settings.model_fields)
        if err["type"] == "extra_forbidden":
            where_from = _source_of(field, file_data, path, overrides, root_from)
            if len(err["loc"]) > 1 and field == "web":
                known = ", ".join(WebSettings.model_fields)
            if len(err["loc"]) > 1 and field == "fleet":
                from .fleet import Peer

                known = ", ".join(Peer.model_fields if "peers" in err["loc"] else FleetSettings.model_fields)
            raise SettingsError(f"unknown setting '{shown}' in {where_from}; known settings: {known}") from None
        where_from = _source_of(field, file_data, path, overrides, root_from)
        raise SettingsError(f"setting '{shown}' from {where_from}: {err['msg']}") from None
    finally:
        _FILE_DATA.reset(token)
