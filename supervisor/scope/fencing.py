"""Does a unit's session get agentd's kernel fence, and what may its agent write then (policy, pure).

**The decision** (:func:`decide_fence`), from the unit's ``[scope] fence``,
the kernel's Landlock ABI and the agent's own sandbox:

* ``off``: never fenced; the scope is watched, not enforced;
* ``auto`` (the default): fenced when Landlock is available and the agent
  does not run a sandbox of its own.  An agent's own sandbox and the fence do
  not stack: Codex's Linux sandbox (bubblewrap) needs ``mount``, which a
  Landlock-restricted process may not call, so a Codex unit that keeps its
  sandbox (``--sandbox workspace-write``) is not fenced by agentd, and one that
  bypasses it (``--dangerously-bypass-approvals-and-sandbox``) is;
* ``on``: fenced, or the session does not start (the reason is the unit's
  state reason): a fence that cannot be built is an error, not a fallback.
  Also when the agent keeps its own sandbox (which may then fail inside it).

Adapters say whether their agent keeps a sandbox of its own with
:meth:`supervisor.adapters.base.Adapter.own_sandbox`; an adapter that sets the
agent's sandbox flags asks :func:`decide_fence` (with ``own_sandbox=None``)
whether bypassing would leave the agent fenced.

**What a fenced agent may write** (:func:`unit_fence`): its scope
(:func:`supervisor.scope.allowset.scope_allowset`: the unit's ``[scope] paths``
less its ``forbid`` and constraints.md's, a forbidden path inside the scope
refused by allowing its siblings), the unit's ``[scope] writable`` paths,
``.git`` (commits), its own memory inbox (``<state>/inbox/<unit>/``: the
daemon writes ``.agent/`` on its behalf, :mod:`supervisor.daemon.inbox`), a
private temp directory (its ``TMPDIR``), its CLI's state directory
(``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``) and the usual devices.

**What it sees** (:class:`~supervisor.session.mountview.ViewSpec`, where a
mount namespace can be made): agentd's state directory empty but for the
unit's own inbox, its CLI's state, its session's files and the control
socket (no dashboard token, no other unit's transcripts or inbox, no event
index); and read-only, whatever its scope: ``.agent/``, ``.git/config``,
``hooks/``, ``info/`` (so its own ``git config`` fails with "Device or
resource busy" while its commits work), ``units/``, ``plans/`` and the
settings file (``etc/`` while there is none: the caller's ``protect``).
Everything else stays readable.

Without a view (no mount namespace here) a unit whose scope covers the
project root could still write ``units/``, ``.agent/`` and agentd's state:
refusing them would refuse creating any file directly in the project root
(Landlock only allows; see allowset).  Status names it in ``fence_notes``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..session.fence import Availability, FenceSpec, agent_spec, git_dirs, git_protected
from ..session.mountview import ViewMode, ViewSpec
from .allowset import scope_allowset

#: Environment variables naming an agent CLI's own state directory (writable when fenced), and the
#: directory where Claude Code's status line leaves its JSON for agentd (only that file is there: the
#: session's settings, hooks and permissions stay out of the agent's reach).
STATE_DIR_ENV = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "AGENTD_STATUS_DIR")


class FenceSetting(enum.Enum):
    """``[scope] fence``."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


@dataclass(frozen=True)
class FenceDecision:
    """Whether the session is fenced; else why it is only watched.  ``required``: ``fence = "on"``."""

    fenced: bool
    why: str = ""
    required: bool = False
    own_sandbox: str | None = None

    def status(self, abi: int = 0) -> str:
        """The unit's ``scope:`` line in ``agentd status``."""
        if self.fenced:
            text = f"fenced (Landlock ABI {abi})" if abi else "fenced (Landlock)"
            return text + (f"; the agent's own sandbox ({self.own_sandbox}) may fail inside it" if self.own_sandbox else "")
        return f"watched, not enforced ({self.why})"

    def unfenced(self, why: str) -> FenceDecision:
        """The same unit, watched instead (the fence could not be built: ``why``)."""
        return FenceDecision(False, why, self.required, self.own_sandbox)


class FenceRequired(Exception):
    """``fence = "on"`` and the fence cannot be had; the message says why (the session does not start)."""


def decide_fence(setting: FenceSetting | str, landlock: Availability, own_sandbox: str | None) -> FenceDecision:
    """Does the session get agentd's fence (see the module doc)?  Raises :class:`FenceRequired` for an
    ``on`` that the kernel cannot honour.

    ``own_sandbox`` describes the agent's own sandbox when it keeps one
    (``"codex workspace-write"``), or is None when it runs without one.
    """
    setting = FenceSetting(setting)
    if setting is FenceSetting.OFF:
        return FenceDecision(False, '[scope] fence = "off"' + (f"; the agent's own sandbox: {own_sandbox}" if own_sandbox else ""),
                             own_sandbox=own_sandbox)
    if not landlock.available:
        if setting is FenceSetting.ON:
            raise FenceRequired(f'[scope] fence = "on", but Landlock is unavailable: {landlock.reason}')
        return FenceDecision(False, f"Landlock unavailable: {landlock.reason}", own_sandbox=own_sandbox)
    if own_sandbox and setting is FenceSetting.AUTO:
        return FenceDecision(False, f"the agent keeps its own sandbox ({own_sandbox}), which cannot run inside "
                             "agentd's fence", own_sandbox=own_sandbox)
    return FenceDecision(True, required=setting is FenceSetting.ON, own_sandbox=own_sandbox)


@dataclass(frozen=True)
class UnitFence:
    """A fenced session's rules: what it may write, what it sees, and what only the watcher can check."""

    spec: FenceSpec
    #: forbid globs that may match paths not existing yet below an allowed directory
    #: (detected by the watcher, not prevented)
    watched: tuple[str, ...] = ()
    view: ViewSpec | None = None
    view_mode: ViewMode | None = None

    @property
    def terminals(self) -> str:
        """Which terminals the agent may write (``session.fence.TERMINALS``): with a view, those of its private
        ``/dev/pts`` (no other unit's is visible there); without one, its own PTY only."""
        return "private" if self.view is not None and self.view.private_pts and self.has_view else "own"

    @property
    def has_view(self) -> bool:
        return self.view is not None and self.view_mode is not None and self.view_mode.available

    @property
    def notes(self) -> tuple[str, ...]:
        return self.spec.notes + (self.view.notes if self.view else ()) + (
            (f"no private view ({self.view_mode.reason}): agentd's state directory stays readable, .agent/, "
             ".git/config, hooks/ and units/ stay writable where the scope covers them, and terminals the agent's "
             "tools open cannot be written (only its own is)",)
            if self.view_mode is not None and not self.view_mode.available else ())

    def permits(self, path: Path | str) -> bool:
        """Whether the agent can write ``path``: inside the fence and not made read-only by the view."""
        if not self.spec.permits(path):
            return False
        if self.view is None or self.view_mode is None or not self.view_mode.available:
            return True
        target = Path(os.path.realpath(path))
        if any(target == p or p in target.parents for p in self.view.readonly):
            return False
        hidden = self.view.hidden
        if hidden is not None and (target == hidden or hidden in target.parents):
            return any(target == p or p in target.parents for p in self.view.shown)
        return True


def hidden_state(state_dir: Path) -> Path:
    """The state directory an agent must not see: the daemon's own, or, for the daemon of ``agentd run-unit``
    (``<state>/run-unit/UNIT``), the project's whole state directory (the other daemons', the token)."""
    state_dir = Path(state_dir)
    return state_dir.parent.parent if state_dir.parent.name == "run-unit" else state_dir


def writable_paths(root: Path, writable: Iterable[str]) -> list[Path]:
    """``[scope] writable`` entries as absolute paths: ``~`` expanded, relative ones from the project root."""
    out = []
    for raw in writable:
        path = Path(raw).expanduser()
        out.append(path if path.is_absolute() else Path(root) / path)
    return out


def state_dirs(env: Mapping[str, str]) -> list[Path]:
    """The agent CLI's own state directories named in its environment."""
    return [Path(env[name]).expanduser() for name in STATE_DIR_ENV if env.get(name)]


def unit_fence(root: Path, paths: Sequence[str], forbid: Sequence[str], *, writable: Iterable[str] = (),
               tmp_dir: Path | None = None, env: Mapping[str, str] | None = None, inbox: Path | None = None,
               state_dir: Path | None = None, shown: Iterable[Path] = (), protect: Iterable[Path] = (),
               view_mode: ViewMode | None = None) -> UnitFence:
    """What a fenced agent of this unit may write and see (see the module doc).

    ``forbid`` is the unit's forbid globs and constraints.md's; ``inbox`` its
    memory inbox; ``state_dir`` agentd's state directory (hidden but for
    ``inbox``, ``shown`` and the CLI state directories of ``env``);
    ``protect`` more paths made read-only (the units directory, the settings
    file); ``view_mode`` whether a view can be made here (None: no view).
    Raises :class:`~supervisor.scope.allowset.AllowSetError` when the scope
    cannot be expressed as a fence.  Blocking: walks the scope's directories.
    """
    root = Path(root)
    allow = scope_allowset(root, paths, forbid)
    gits = git_dirs(root)
    cli_dirs = state_dirs(env or {})
    spec = agent_spec(scope=allow.spec(root), writable=writable_paths(root, writable), git_dirs=gits,
                      inbox=inbox, tmp_dir=tmp_dir, state_dirs=cli_dirs)
    watched = tuple(dict.fromkeys(glob for _dir, glob in allow.watched))
    view = None
    if view_mode is not None:
        readonly = [root / ".agent", *git_protected(gits), *protect]
        # a directory holding a read-only file must not be renamed away and replaced (nor .git itself)
        anchored = [*gits, *(p.parent for p in protect if p.is_file() and p.parent != root)]
        view = ViewSpec.of(state_dir, [*([inbox] if inbox else []), *cli_dirs, *shown], readonly, anchored,
                           private_pts=True)
    return UnitFence(spec, watched, view, view_mode)


def refused(paths: Iterable[str], cwd: Path, spec: FenceSpec | UnitFence) -> list[Path]:
    """The paths (as an agent named them, relative to its ``cwd``) that lie outside the fence, first seen first.

    An ``EACCES`` on such a path was the fence's refusal; one inside the fence
    was an ordinary permission error and is not a violation.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(os.path.normpath(Path(cwd) / Path(raw).expanduser()))
        if not spec.permits(path) and path not in out:
            out.append(path)
    return out
