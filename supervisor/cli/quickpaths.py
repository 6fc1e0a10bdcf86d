"""The state directory's paths without pydantic, when the configuration is plain (standard library only).

Importing pydantic-settings and building the model costs ~0.25 s, most of a
short command such as ``agentd status``; such commands only need the state
directory's paths, which :func:`quick_paths` computes the same way when
nothing but plain, valid values is configured (else the caller loads the
full settings).  Used by :class:`.context.AppContext` and by :mod:`.fast`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config.paths import DEFAULT_START_TIMEOUT, DEFAULT_STATE_DIR, ENV_PREFIX, PROJECT_ENV, PlainPaths, locate

_PLAIN_KEYS = {"project_root": str, "state_dir": str, "units_dir": str, "log_format": ("json", "console"),
               "log_level": ("debug", "info", "warning", "error"), "stop_timeout": float, "start_timeout": float,
               "status_interval": float, "service_stop_timeout": float}
#: The only AGENTD_* variables the fast path reads itself (the rule in supervisor.config.paths.locate).
_FAST_ENV = {ENV_PREFIX + "CONFIG", *PROJECT_ENV}

#: The fields of :class:`supervisor.config.settings.Settings` (tests/test_discovery.py keeps the two equal).
#: ``AGENTD_<FIELD>`` (or ``AGENTD_<FIELD>__<KEY>``) other than :data:`_FAST_ENV` sets one: then the full
#: settings load.  Other ``AGENTD_*`` variables (``AGENTD_UNIT``, ``AGENTD_SESSION`` ... in an agent's own
#: shell) are no settings, and the commands an agent runs stay fast.
SETTINGS_FIELDS = ("project_root", "state_dir", "units_dir", "log_format", "log_level", "stop_timeout",
                   "start_timeout", "status_interval", "only_units", "event_index", "event_half_life",
                   "service_stop_timeout", "containment", "cgroup_parent", "web", "fleet", "notify", "transcript_keep")


def _sets_a_setting(key: str) -> bool:
    if not key.startswith(ENV_PREFIX) or key in _FAST_ENV:
        return False
    name = key[len(ENV_PREFIX):].lower()
    return any(name == f or name.startswith(f + "__") for f in SETTINGS_FIELDS)


def _plain(key: str, value: Any) -> bool:
    kind = _PLAIN_KEYS.get(key)
    if kind is str:
        return isinstance(value, str) and value != ""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return isinstance(kind, tuple) and value in kind


def quick_paths(config: Path | None, root: Path | None) -> PlainPaths | None:
    """The paths without pydantic when the configuration is plain (None: load the full settings).

    The project and the config file come from :func:`supervisor.config.paths.locate`,
    exactly as in :func:`supervisor.config.settings.load_settings`.  Anything
    else (other ``AGENTD_*`` variables, an unreadable file, unknown keys,
    values that need conversion) takes the full path, which also reports every
    error exactly as before.
    """
    if any(_sets_a_setting(k) for k in os.environ):
        return None
    where = locate(root, config)
    path = where.config
    data: dict[str, Any] = {}
    if path is not None:
        import tomllib

        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except (OSError, ValueError):
            return None
        if not all(_plain(k, v) for k, v in data.items()):
            return None
    return PlainPaths(where.project_root(data.get("project_root")), Path(data.get("state_dir", DEFAULT_STATE_DIR)),
                      Path(data.get("units_dir", "units")), float(data.get("start_timeout", DEFAULT_START_TIMEOUT)))
