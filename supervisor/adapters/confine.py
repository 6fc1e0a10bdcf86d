"""A session under containment and, when the unit gets it, the kernel fence: how it starts, ends and reports.

:func:`plan` (before the :class:`~supervisor.session.pty.Session` exists)
decides whether the session is fenced (:func:`supervisor.scope.fencing.decide_fence`),
makes its private temp directory (the agent's ``TMPDIR``) and computes what it
may write; :func:`spawn` adds the session to the daemon's containment (its own
cgroup, or the subreaper's records), builds the Landlock ruleset and spawns
the agent with both as child steps: the join first, so the agent and all it
starts are contained from their first instruction, then the fence.  A fence
that cannot be built leaves the session watched (status says why), unless
the unit says ``fence = "on"``: then the session does not start.

The :class:`Confined` it returns is what the
:class:`~supervisor.adapters.driver.Driver` holds: it ends the session's
processes (:meth:`Confined.end`: the containment's one mechanism), gives its
CPU and memory figures, reads the refusals the fence caused from the agent's
trail (:meth:`Confined.refusals`), and releases the group and the temp
directory once nothing is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..memory.channel import ensure_inbox
from ..scope.allowset import AllowSetError, denied_paths
from ..scope.fencing import FenceDecision, FenceRequired, UnitFence, decide_fence, hidden_state, refused, unit_fence
from ..scope.rules import forbid_globs_from_constraints
from ..session.containment import Containment, Ended, Limits, Member, Usage
from ..session.fence import Fence, FenceUnavailable, availability
from ..session.mountview import View, view_mode
from ..session.pty import ChildStep, Session, SpawnError

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.units import UnitSpec
    from .base import Adapter

log = structlog.get_logger("agentd")

#: Prefix of the private temp directories (``<tmp>/agentd-<project key>-<unit>-XXXX``).
TMP_PREFIX = "agentd-"
#: At most this much new transcript text is read per call of :meth:`Confined.refusals` (a flood's lines are
#: not split or decoded: only the lines around a "denied" or "eacces" are, so a call costs about 1 ms per MiB).
TRAIL_READ = 4 << 20
#: What a line that may name a refusal holds (lowercase; :func:`~supervisor.scope.allowset.denied_paths` decides).
_DENIAL_WORDS = (b"denied", b"eacces")


def tmp_prefix(project_key: str) -> str:
    return f"{TMP_PREFIX}{project_key[:12]}-"


@dataclass
class Plan:
    """What :func:`plan` decided before the session exists."""

    decision: FenceDecision
    fence: UnitFence | None = None
    tmp_dir: Path | None = None

    def discard(self) -> None:
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None


def _constraints_forbid(root: Path) -> list[str]:
    try:
        return forbid_globs_from_constraints((root / ".agent" / "constraints.md").read_text(errors="replace"))
    except OSError:
        return []


def protected(root: Path, units: Path, scope: Sequence[str] = ()) -> list[Path]:
    """What of the person's configuration a fenced agent sees read-only: the unit files, the plans (their
    [notify] commands and checks run outside the agent's fence; a scheduled plan starts with the daemon), the
    settings file; while there is none, its directory, so that none can be made (unless the unit's ``scope``
    names ``etc/`` itself: the person gave it that directory).  :func:`plan` makes ``plans/`` and ``etc/``
    for a unit of the whole project, which could otherwise create them."""
    settings_file = root / "etc" / "agentd.toml"
    named = any(g.strip().lstrip("./").split("/", 1)[0] == "etc" for g in scope)
    settings = settings_file if settings_file.exists() or named else settings_file.parent
    return [units, settings, root / "plans"]


def plan(spec: UnitSpec, settings: Settings, adapter: Adapter, env: dict[str, str], project_key: str) -> Plan:
    """Decide the fence and prepare it (``env`` gets ``TMPDIR`` when fenced).  Raises SpawnError for ``fence = "on"``
    when it cannot be had."""
    root = settings.project_root
    try:
        decision = decide_fence(spec.scope.fence, availability(), adapter.own_sandbox())
    except FenceRequired as exc:
        raise SpawnError(str(exc)) from None
    if not decision.fenced:
        return Plan(decision)
    if not spec.scope.paths:  # the whole project: make the places of the person's configuration, to hold them
        for where in (root / "plans", root / "etc"):  # read-only (empty directories: nothing for git to show)
            with contextlib.suppress(OSError):
                where.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{tmp_prefix(project_key)}{spec.name}-"))
    state = settings.state_path
    try:
        session_dir = state / "sessions" / spec.name / env["AGENTD_SESSION"] if env.get("AGENTD_SESSION") else None
        fence = unit_fence(root, spec.scope.paths, [*spec.scope.forbid, *_constraints_forbid(root)],
                           writable=spec.scope.writable, tmp_dir=tmp, env=env, inbox=ensure_inbox(state, spec.name),
                           state_dir=hidden_state(state),
                           shown=[settings.socket_path, *([session_dir] if session_dir else [])],
                           protect=protected(root, settings.units_path, [*spec.scope.paths, *spec.scope.writable]),
                           view_mode=view_mode())
    except (AllowSetError, OSError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if decision.required:
            raise SpawnError(f'[scope] fence = "on", but the fence cannot be built: {exc}') from None
        log.warning("fence_unavailable", unit=spec.name, error=str(exc))
        return Plan(decision.unfenced(f"the scope cannot be fenced: {exc}"))
    env["TMPDIR"] = str(tmp)
    return Plan(decision, fence, tmp)


def limits_of(spec: UnitSpec) -> Limits | None:
    res = spec.resources
    if res.memory_max is None and res.cpu_weight is None:
        return None
    return Limits(memory_max=res.memory_max, cpu_weight=res.cpu_weight)


def spawn(session: Session, spec: UnitSpec, containment: Containment, planned: Plan) -> Confined:
    """Add the session to ``containment``, build the fence, spawn the agent inside both.  Raises SpawnError
    (and then leaves nothing behind)."""
    try:
        member = containment.add(spec.name, session.session_id, limits_of(spec))
    except (OSError, ValueError) as exc:
        session.transcript.close()
        planned.discard()
        raise SpawnError(f"cannot contain the session: {exc}") from None
    confined = Confined(containment, member, planned.decision, planned.fence, planned.tmp_dir, session.cwd)
    steps: list[ChildStep] = []
    join = containment.child_step(member)
    if join is not None:
        steps.append(join)
    if planned.fence is not None:
        try:
            fence = Fence.build(planned.fence.spec, terminals=planned.fence.terminals)
        except (FenceUnavailable, OSError) as exc:
            if planned.decision.required:
                for step in steps:
                    step.close()
                session.transcript.close()
                confined.release()
                raise SpawnError(f'[scope] fence = "on", but the fence cannot be built: {exc}') from None
            log.warning("fence_unavailable", unit=spec.name, error=str(exc))
            confined.decision, confined.fence = planned.decision.unfenced(f"the fence cannot be built: {exc}"), None
        else:
            confined.abi = fence.abi
            view = planned.fence.view
            if view is not None and not view.empty and planned.fence.view_mode and planned.fence.view_mode.available:
                steps.append(View(view, planned.fence.view_mode))  # the mounts first: the fence forbids them
            steps.append(fence)
    try:
        session.spawn(steps)
    except SpawnError:
        confined.release()
        raise
    containment.started(member, session.pid, session.create_time)
    return confined


@dataclass
class Confined:
    """One session's containment member and fence (see the module doc)."""

    containment: Containment
    member: Member
    decision: FenceDecision
    fence: UnitFence | None
    tmp_dir: Path | None
    cwd: Path
    abi: int = 0
    released: bool = False
    memory_source: str | None = None  # of the last usage(): "memory.current" (the cgroup's) or "rss"
    _trail_at: int = 0
    _refused: set[Path] = field(default_factory=set)

    # -- status ---------------------------------------------------------------------
    @property
    def fenced(self) -> bool:
        return self.fence is not None

    @property
    def scope(self) -> str:
        """``fenced (Landlock ABI 7)`` or ``watched, not enforced (why)``."""
        return self.decision.status(self.abi)

    def usage(self) -> Usage:
        """CPU seconds (of every process the session ever ran, in cgroup mode) and memory (blocking)."""
        usage = self.containment.usage(self.member)
        self.memory_source = usage.memory_source
        return usage

    def status(self) -> dict[str, Any]:
        """The unit's containment fields in ``agentd status``."""
        member = self.member
        return {
            "containment": self.containment.mode.value,
            "memory_source": self.memory_source,
            "scope": self.scope,
            "fence_notes": list(self.fence.notes) if self.fence else [],
            "fence_watched": list(self.fence.watched) if self.fence else [],
            "limits": {"applied": list(member.limits_applied), "unavailable": list(member.limits_unavailable)}
            if member.limits_applied or member.limits_unavailable else None,
            "cgroup": str(member.group.path) if member.group is not None else None,
        }

    def record(self) -> dict[str, Any]:
        """For ``agents.json``: the group, and the recorded tree (the subreaper's)."""
        return {"cgroup": str(self.member.group.path) if self.member.group is not None else None,
                "tree": [[r.pid, r.create_time] for r in self.member.tree.values()]}

    # -- ending ---------------------------------------------------------------------
    def processes(self) -> list[Any]:
        """The session's live processes now (blocking: a cgroup read, or a walk of the daemon's children)."""
        return [] if self.released else self.containment.processes(self.member)

    async def end(self, timeout: float) -> Ended:
        """TERM every process of the session, wait ``timeout``, KILL, then whatever is left."""
        if self.released:
            return Ended((), True)
        return await self.containment.end(self.member, timeout)

    def release(self) -> bool:
        """Forget the session once nothing of it is left: its group and its temp directory (idempotent).

        False when processes remain (the group stays; the daemon's shutdown or next start ends them).
        """
        if self.released:
            return True
        try:
            self.containment.release(self.member)
        except OSError as exc:
            log.warning("containment_busy", unit=self.member.unit, session=self.member.session_id, error=str(exc))
            return False
        self.released = True
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
        return True

    # -- refusals ---------------------------------------------------------------------
    def refusals(self, session: Session, adapter: Adapter) -> list[Path]:
        """Writes the fence refused since the last call (absolute paths, each once per session; blocking).

        From the adapter's own trail where it keeps one, else from "Permission
        denied" messages in the new lines of the clean transcript.  Only paths
        outside the fence count: an ``EACCES`` inside it is not the fence's.
        """
        if self.fence is None:
            return []
        named = adapter.refused_writes(session)
        if named is None:  # a line echoing what was typed (a wakeup quoting the last session) is not a refusal
            lines = [ln for ln in _denial_lines(self._new_text(session.transcript.text_path))
                     if not session.typed(ln.strip())]
            named = denied_paths("\n".join(lines))
        found = [p for p in refused(named, self.cwd, self.fence) if p not in self._refused]
        self._refused.update(found)
        return found

    def _new_text(self, path: Path) -> bytes:
        """Whole lines of ``path`` added since the last call (at most :data:`TRAIL_READ` bytes)."""
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size <= self._trail_at:
                    return b""
                f.seek(self._trail_at)
                data = f.read(min(size - self._trail_at, TRAIL_READ))
        except OSError:
            return b""
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) < TRAIL_READ:
            return b""  # an unfinished line: read it whole next time
        data = data[:end] if end else data
        self._trail_at += len(data)
        return data


def _denial_lines(data: bytes) -> list[str]:
    """The lines of ``data`` (clean text) that hold "denied" or "eacces" in any case, decoded, in order.

    Found on the bytes (one ``lower`` and a ``find`` per word): a flood of output that names no refusal is
    neither split into lines nor decoded.
    """
    low = data.lower()
    starts: set[int] = set()
    for word in _DENIAL_WORDS:
        at = low.find(word)
        while at != -1:
            start = low.rfind(b"\n", 0, at) + 1
            starts.add(start)
            end = low.find(b"\n", at)
            at = low.find(word, end) if end != -1 else -1
    out = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        out.append(data[start:end if end != -1 else len(data)].decode("utf-8", "replace"))
    return out
