"""What every ``agentd`` command shares: the settings (loaded lazily), the paths, the control client.

Importing pydantic-settings costs a quarter of a second, most of a short
command such as ``agentd status``: :meth:`AppContext.paths` finds the state
directory without it whenever the configuration is plain.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config.paths import Location, PlainPaths, locate
from .quickpaths import quick_paths as _quick_paths

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.target import MemoryTarget
    from ..config.units import UnitSpec


class AppContext:
    """Lazily loaded settings shared by every subcommand."""

    def __init__(self, config: Path | None, root: Path | None) -> None:
        self.config_path = config
        self._config = config
        self._root = root
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from ..config.settings import SettingsError, load_settings

            try:
                self._settings = load_settings(self._config, project_root=self._root)
            except SettingsError as exc:
                raise click.ClickException(str(exc)) from None
        return self._settings

    @property
    def where(self) -> Location:
        """How the project was found (for messages)."""
        return locate(self._root, self._config)

    @property
    def paths(self) -> Settings | PlainPaths:
        """pidfile and socket_path, without loading the full settings when they are plain."""
        if self._settings is not None:
            return self._settings
        return _quick_paths(self._config, self._root) or self.settings


pass_app = click.make_pass_decorator(AppContext)



#: Seconds a command waits for the socket of a daemon that is starting (pidfile held, no socket yet).
STARTING_GRACE = 15.0


def client_call(settings: Settings | PlainPaths, cmd: str, timeout: float | None = 30.0, **args: object) -> object:
    from ..control.client import ControlError, DaemonNotRunning, call

    deadline = time.monotonic() + STARTING_GRACE
    while True:
        try:
            return call(settings.socket_path, cmd, timeout=timeout, **args)
        except DaemonNotRunning as exc:
            # A daemon that holds the pidfile but has no socket yet is still starting.
            if time.monotonic() < deadline and daemon_running(settings):
                time.sleep(0.05)
                continue
            raise click.ClickException(str(exc)) from None
        except ControlError as exc:
            raise click.ClickException(str(exc)) from None
        except PermissionError as exc:
            raise click.ClickException(
                f"cannot reach {settings.socket_path}: {exc.strerror} (not the daemon's owner?)"
            ) from None


def daemon_running(settings: Settings | PlainPaths) -> bool:
    from ..daemon.pidfile import daemon_alive

    return daemon_alive(settings.pidfile, settings.socket_path)


def units_arg(units: tuple[str, ...]) -> list[str] | None:
    return list(units) or None


def print_result(result: object) -> None:
    if isinstance(result, dict):
        for key, value in result.items():
            click.echo(f"{key}: {value}")


# ---------------------------------------------------------------- for the memory commands
@contextlib.contextmanager
def memory_errors() -> Iterator[None]:
    """Turn the memory library's errors into one-line CLI errors."""
    from ..memory import LineError, StoreError

    try:
        yield
    except (StoreError, LineError, ValueError, RuntimeError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


def _app() -> AppContext:
    app = click.get_current_context().find_object(AppContext)
    if app is None:  # pragma: no cover - only when called outside the agentd group
        raise click.ClickException("internal: no agentd context")
    return app


def current_settings() -> Settings:
    """The settings of the running ``agentd`` command."""
    return _app().settings


def current_paths() -> Settings | PlainPaths:
    """The running command's state paths, without the full settings when the configuration is plain."""
    return _app().paths


def project_root() -> Path:
    """The project's root, without the full settings when the configuration is plain."""
    return current_paths().project_root


def unit_spec(name: str) -> UnitSpec:
    """Unit ``name``'s spec, or a one-line error naming the file and the problem."""
    from ..config.units import load_unit

    try:
        return load_unit(current_settings().units_path, name)
    except Exception as exc:  # noqa: BLE001 - UnitLoadError names the file and the problem
        raise click.ClickException(f"unit {name!r}: {exc}") from None


def resolve_target(module: str | None, global_: bool, scope: Sequence[str] = ()) -> MemoryTarget:
    """The module rule (:func:`supervisor.config.target.memory_target`), with CLI errors."""
    from ..config.target import memory_target

    if global_ and module:
        raise click.UsageError("--module and --global exclude each other")
    try:
        return memory_target(_app().paths.units_path, os.environ, module, global_, scope)
    except Exception as exc:  # noqa: BLE001 - a unit file that cannot be loaded
        raise click.ClickException(f"unit {os.environ.get('AGENTD_UNIT')!r}: {exc}") from None
