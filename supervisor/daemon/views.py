"""The daemon's units as other parts see them: small views that implement those parts' Protocols.

* :class:`AttachUnits` is the attach server's ``AttachTarget``
  (:mod:`supervisor.control.attach`);
* :class:`ScopeUnits` is the scope guard's ``Units`` (:mod:`supervisor.scope.guard`).

Neither part ever holds the Arbiter.  The other way round, :class:`Dashboard`
is what the daemon needs of the dashboard it hosts: the command line hands
one in (:func:`supervisor.web.host.dashboard`), so the daemon never imports
the web layer above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..scope.guard import candidate, confined_permits
from ..scope.rules import Candidate
from .commands import Daemon, unit_of
from .lifecycle import UnitState
from .unit import UnitSupervisor


class Dashboard(Protocol):
    """The dashboard the daemon hosts: opened with the command table, moved or stopped by `agentd web`."""

    async def open(self, commands: Mapping[str, Any]) -> None: ...

    async def serve(self, stop: bool = False, port: int | None = None, exact: bool = False) -> dict[str, Any]: ...

    async def close(self) -> None: ...


class NoDashboard:
    """A daemon run without a dashboard (``run_daemon(dashboard=None)``): `agentd web` says so."""

    async def open(self, commands: Mapping[str, Any]) -> None:
        return None

    async def serve(self, stop: bool = False, port: int | None = None, exact: bool = False) -> dict[str, Any]:
        from ..control.framing import ControlError

        raise ControlError("this daemon runs without a dashboard (it was started with none)")

    async def close(self) -> None:
        return None


class AttachUnits:
    """The units as the attach server sees them (``control.attach.AttachTarget``)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def current_session(self, name: str) -> Any:
        """The unit's session object now (also while it is stopping), or None."""
        driver = unit_of(self.daemon, name).driver
        return driver.session if driver else None

    async def wait_session(self, name: str, previous: Any, timeout: float) -> Any:
        """A running session of the unit other than ``previous``, waiting up to ``timeout`` seconds."""
        unit = self.daemon.units.get(name)
        if unit is None:
            return None

        def fresh() -> Any:
            driver = unit.driver
            if unit.state is not UnitState.RUNNING or driver is None or driver.exited:
                return None
            return driver.session if driver.session is not previous else None

        return fresh() if await unit.wait_until(lambda: fresh() is not None, timeout) else None

    def person_input(self, name: str) -> None:
        unit = self.daemon.units.get(name)
        if unit is not None:
            unit.talk.person_input()

    def viewer_attached(self, name: str, delta: int) -> int:
        unit = self.daemon.units.get(name)
        return unit.talk.viewer(delta) if unit is not None else 0


class Offender:
    """A unit as the scope guard acts on it (``scope.guard.Offender``)."""

    def __init__(self, unit: UnitSupervisor) -> None:
        self.unit = unit
        self.name = unit.name
        self.on_violation = unit.spec.scope.on_violation

    @property
    def violations(self) -> int:
        return self.unit.violations

    @violations.setter
    def violations(self, count: int) -> None:
        self.unit.violations = count

    def session_id(self) -> str | None:
        return self.unit.driver.session_id if self.unit.driver else None

    def warn(self, text: str) -> None:
        """Tell the agent at its next turn end (never typed into a shell)."""
        self.unit.talk.queue(text)

    def wrote(self, rel: str) -> None:
        """The agent wrote ``rel`` within its rules: what its adapter has to say about it, at the next turn end."""
        self.unit.rt.spawn(self.unit.talk.wrote(self.unit.rt.root / rel))

    async def stop(self, why: str, checkpoint: bool = True) -> None:
        await self.unit.stop(why, checkpoint)

    async def before_revert(self, path: str) -> None:
        """Keep the running session's work (a WIP commit) before the guard puts ``path`` back; never raises."""
        await self.unit.keeping.before_revert(path)


class ScopeUnits:
    """The units as the scope guard sees them."""

    def __init__(self, units: Mapping[str, UnitSupervisor], root: Path) -> None:
        self.units, self.root = units, root

    def candidates(self, now: float) -> list[Candidate]:
        """The running units that could have made a change now (a confined one only where it can write)."""
        found = []
        for unit in self.units.values():
            driver = unit.driver
            if driver is not None and unit.state in (UnitState.RUNNING, UnitState.CHECKPOINTING):
                permits = confined_permits(self.root, driver.confined.fence, driver.adapter.sandbox(),
                                           unit.spec.workdir_path(self.root))
                c = candidate(unit.name, unit.spec, self.root, not driver.idle, driver.silent_for, permits)
                if c is not None:
                    found.append(c)
        return found

    def rules(self, name: str) -> Candidate | None:
        """The unit's rules (its scope, forbid and writable paths), running or not."""
        unit = self.units.get(name)
        return candidate(name, unit.spec, self.root, False, float("inf")) if unit is not None else None

    def offender(self, name: str) -> Offender | None:
        unit = self.units.get(name)
        return Offender(unit) if unit is not None else None

    def restricts(self) -> bool:
        return any(u.spec.scope.paths or u.spec.scope.forbid for u in self.units.values())
