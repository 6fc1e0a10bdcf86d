"""What a fenced agent sees of the files: agentd's state hidden, the person's files read-only (a mount namespace).

Landlock (:mod:`.fence`) only *allows*: a rule grants a right on a directory
and everything beneath it, and there is no "this directory but not that
child".  Two things an agent must not do cannot be said that way:

* **read** agentd's state directory (the dashboard token, every unit's
  transcripts, the event index) while reading everything else: refusing reads
  beneath one directory would mean allowing them on every sibling along its
  path, and the project root itself could then no longer be listed, nor a
  file created in it later be read (``node_modules``, ``.pytest_cache``);
* **write** ``.git`` while leaving its ``config``, ``hooks/`` and ``info/``
  alone: git writes ``index``, ``HEAD`` and refs by creating ``x.lock`` in
  ``.git`` and renaming it over ``x``, and the rights that allow that rename
  also allow ``config.lock`` renamed over ``config``.

So a fenced session gets a private mount namespace, set up in the forked
child before the Landlock fence (a :class:`View` is a ``pty.ChildStep``):

* ``hidden``: a directory covered by an empty, read-only tmpfs; the paths in
  ``shown`` (the unit's own inbox, its CLI's state, the control socket) are
  bound back at their places inside it, nothing else;
* ``readonly``: existing files and directories bound onto themselves
  read-only (``.agent/``, ``.git/config``, ``.git/hooks`` ...).  A rename over
  one fails with ``EBUSY`` (it is a mount point), a write with ``EROFS``;
* ``anchored``: directories bound onto themselves as they are, so that they
  cannot be renamed away (with the read-only files inside them) and replaced:
  ``.git`` itself, the directory of the settings file;
* ``private_pts``: a new ``devpts`` instance on ``/dev/pts``: no other unit's
  terminal (nor the person's) is visible, so none can be written, read or
  typed into (``TIOCSTI`` needs only a descriptor opened for reading), while
  ``/dev/ptmx`` makes new terminals in the private instance (``script``,
  ``tmux``, ``expect`` work).  The agent's own terminal is not in it: its
  descriptors and ``/dev/tty`` work, ``ttyname()`` of them fails (``tty``
  prints "not a tty").

Mounts made before ``landlock_restrict_self`` stay: a Landlock-restricted
process may not mount, unmount or pivot, and may not ptrace (or open
``/proc/PID/root`` of) a process outside its domain, so the agent can
neither undo the view nor look through the daemon's.  Mount events never
propagate back (``/`` is made a slave first).

As root the namespace is a mount namespace only; otherwise a user namespace
maps the agent's own uid and gid onto themselves (the only way an
unprivileged process may mount; files of other users then show as
``nobody``).  :func:`view_mode` says which is possible here.  Limits: the
view is fixed at the session's start (a file renamed over a read-only one
outside, as ``git config`` does, is seen only by the next session), paths
that do not exist at the start cannot be bound (the caller creates or
leaves them), and a second mount of the same filesystem elsewhere would
show the hidden directory's content again.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .fence import _libc

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_SLAVE = 1 << 19
MS_RELATIME = 1 << 21
PR_SET_DUMPABLE = 4
#: The private devpts: anyone may open its ptmx (only this namespace sees it); its terminals are the opener's.
PTS_OPTIONS = "newinstance,ptmxmode=0666,mode=0620"
#: statvfs flags whose mount flags a remount in a user namespace must keep (they are locked there).
_LOCKED = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
           (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))


@dataclass(frozen=True)
class ViewSpec:
    """What the view changes (absolute paths).  ``notes``: what could not be done, and why."""

    hidden: Path | None = None
    shown: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()
    anchored: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)
    private_pts: bool = False  # a devpts instance of its own on /dev/pts: no other terminal is visible

    @classmethod
    def of(cls, hidden: Path | None, shown: Iterable[Path] = (), readonly: Iterable[Path] = (),
           anchored: Iterable[Path] = (), *, private_pts: bool = False) -> ViewSpec:
        """Resolve the paths, keep those that exist, and say what was left out."""
        notes: list[str] = []
        keep_ro: list[Path] = []
        for path in readonly:
            real = Path(os.path.realpath(path))
            if not real.exists():
                notes.append(f"{path} does not exist, so it cannot be made read-only")
            elif real not in keep_ro:
                keep_ro.append(real)
        keep_anchor = sorted({Path(os.path.realpath(p)) for p in anchored if Path(p).is_dir()} - set(keep_ro))
        hide = Path(os.path.realpath(hidden)) if hidden is not None else None
        keep_shown: list[Path] = []
        if hide is not None:
            if not hide.is_dir():
                notes.append(f"{hidden} is not a directory, so it is not hidden")
                hide = None
            else:
                keep_ro = [p for p in keep_ro if p != hide and hide not in p.parents]
                keep_anchor = [p for p in keep_anchor if p != hide and hide not in p.parents]
                reals = sorted({Path(os.path.realpath(p)) for p in shown}, key=lambda p: len(p.parts))
                for real in reals:  # those inside the hidden directory, none beneath another (it shows them)
                    if hide in real.parents and real.exists() and not any(k in real.parents for k in keep_shown):
                        keep_shown.append(real)
        return cls(hide, tuple(sorted(keep_shown)), tuple(sorted(keep_ro)), tuple(keep_anchor), tuple(notes),
                   private_pts)

    @property
    def empty(self) -> bool:
        return self.hidden is None and not self.readonly and not self.anchored and not self.private_pts


@dataclass(frozen=True)
class ViewMode:
    """How a view can be made here: ``"mount"`` (root), ``"userns"``, or ``""`` and why not."""

    kind: str
    reason: str = ""

    @property
    def available(self) -> bool:
        return bool(self.kind)


def _unshare(libc: ctypes.CDLL, flags: int) -> int:
    return 0 if libc.unshare(flags) == 0 else ctypes.get_errno()


@lru_cache(maxsize=1)
def view_mode() -> ViewMode:
    """Whether this process's children can get a private mount namespace (probed once, in a forked child)."""
    kind = "mount" if os.geteuid() == 0 else "userns"
    flags = CLONE_NEWNS if kind == "mount" else CLONE_NEWNS | CLONE_NEWUSER
    libc = _libc()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe child: one syscall, then out
        os._exit(min(_unshare(libc, flags), 255))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return ViewMode(kind)
    what = "a mount namespace" if kind == "mount" else "a user namespace (not root)"
    return ViewMode("", f"cannot make {what}: {os.strerror(code) if code > 0 else 'the probe failed'}")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source or ''} on {target}: {os.strerror(err)}")


def _locked_flags(path: str) -> int:
    st = os.statvfs(path)
    return sum(ms for st_flag, ms in _LOCKED if st.f_flag & st_flag)


class View:
    """A prepared view; calling it in the forked child makes it (a ``pty.ChildStep``, run before the fence)."""

    fds: tuple[int, ...] = ()

    def __init__(self, spec: ViewSpec, mode: ViewMode) -> None:
        if not mode.available:
            raise OSError(errno.EPERM, mode.reason)
        self.spec = spec
        self.mode = mode
        self._uid, self._gid = os.getuid(), os.getgid()
        self._libc = _libc()

    def __call__(self) -> None:  # runs in the forked child (also called directly by tests in a child)
        libc, spec = self._libc, self.spec
        userns = self.mode.kind == "userns"
        # the daemon is not dumpable (lineage.mark_daemon), and neither is its fork until exec: its
        # /proc/self files belong to root then, and a user namespace could not write its uid_map
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        err = _unshare(libc, CLONE_NEWNS | (CLONE_NEWUSER if userns else 0))
        if err:
            raise OSError(err, f"unshare: {os.strerror(err)}")
        if userns:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{self._uid} {self._uid} 1"),
                               ("gid_map", f"{self._gid} {self._gid} 1")):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        _mount(libc, None, "/", None, MS_REC | MS_SLAVE)
        readonly = set(spec.readonly)
        for path in sorted({*spec.readonly, *spec.anchored}, key=lambda p: len(p.parts)):  # parents first
            where = str(path)
            _mount(libc, where, where, None, MS_BIND | MS_REC)
            if path in readonly:
                _mount(libc, None, where, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(where))
        if spec.hidden is not None:
            self._hide(libc, spec)
        if spec.private_pts:  # a new instance: the terminals opened from now on (/dev/ptmx finds it) and no other
            _mount(libc, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, PTS_OPTIONS)
        try:  # the working directory was looked up before the mounts: look it up again through them
            os.chdir(os.getcwd())
        except OSError:
            pass

    @staticmethod
    def _hide(libc: ctypes.CDLL, spec: ViewSpec) -> None:
        assert spec.hidden is not None
        hidden = str(spec.hidden)
        fds = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in spec.shown]  # before they are covered
        try:
            _mount(libc, "agentd-hidden", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for path, fd in fds:
                target = str(path)
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(target, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
                _mount(libc, f"/proc/self/fd/{fd}", target, None, MS_BIND)
            _mount(libc, None, hidden, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        finally:
            for _path, fd in fds:
                os.close(fd)

    def close(self) -> None:
        pass
