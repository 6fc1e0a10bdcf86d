"""cgroup v2 groups for sessions: find where agentd may make them, then make, join, read, kill, remove.

Mechanism only; :mod:`.containment` decides how a session uses it.

Where (:func:`find_parent`), detected, never assumed:

* the cgroup2 mount is read from ``/proc/self/mountinfo`` and the daemon's own
  group from the ``0::`` line of ``/proc/self/cgroup``;
* **delegated**: when that own group is not the root and was delegated to us
  (systemd's ``Delegate=yes`` marks it with the ``trusted.delegate`` or
  ``user.delegate`` extended attribute; for another user it is also chowned to
  that user), groups go below it: ``<own>/agentd/<project-key>/``.  This comes
  first, so a service never writes outside the subtree systemd gave it;
* **root**: otherwise, as root with a writable mount, ``<mount>/agentd/<project-key>/``;
* otherwise :class:`CgroupUnavailable` says why (the caller falls back to a
  subreaper).

One group per session, ``<unit>@<session-id>``, below that parent.  The agent
joins its group **itself, before exec**: the parent opens the group's
``cgroup.procs`` and the forked child writes ``0`` (meaning "me") to it as its
first step (:class:`JoinStep`).  So the agent's first instruction already runs
in the group and every descendant, ``setsid`` or not, is born there: there is no
window in which a grandchild could start outside.  (The parent moving the
child after fork would leave one: the child may exec and fork before the
parent's write lands.)  If the write fails, the spawn fails with the error.

Ending: ``cgroup.kill`` (Linux 5.14+) SIGKILLs every process in the group and
its subgroups at once; without it, the group is frozen (``cgroup.freeze``, so
nothing can fork meanwhile) and every pid SIGKILLed until the group is empty.
"Empty" is ``populated 0`` in ``cgroup.events``; a dead but unreaped leader
does not count, so :meth:`Group.remove` works before the daemon reaps it.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: Seconds :meth:`Group.kill` waits for a group to empty.
KILL_WAIT = 5.0
#: Poll interval while waiting for ``populated 0``.
POLL = 0.02
_DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")


class CgroupUnavailable(Exception):
    """No cgroup can be made here; the message says why and what would change it."""


@dataclass(frozen=True)
class Parent:
    """Where this project's session groups live, and how that was decided."""

    path: Path
    how: str  # "root" | "delegated" | "given"
    mount: Path


def project_key(project_root: Path) -> str:
    """A short stable name for a project: 16 hex digits of its resolved path's SHA-256."""
    return hashlib.sha256(str(Path(project_root).resolve()).encode()).hexdigest()[:16]


def _unescape(field: str) -> str:
    """A mountinfo field with its ``\\ooo`` escapes (space, tab, newline, backslash) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def cgroup2_mount(mountinfo: str | None = None) -> tuple[Path, str] | None:
    """``(mount point, root within the hierarchy)`` of the cgroup2 mount, or None.

    With several, the one that shows the hierarchy's root (``/``) wins.
    """
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    found: list[tuple[Path, str]] = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split() or right.split()[0] != "cgroup2":
            continue
        found.append((Path(_unescape(fields[4])), _unescape(fields[3])))
    found.sort(key=lambda m: m[1] != "/")
    return found[0] if found else None


def own_cgroup(text: str | None = None) -> str | None:
    """This process's cgroup v2 path (``0::PATH`` in ``/proc/self/cgroup``), or None."""
    if text is None:
        try:
            text = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def delegated(path: Path) -> bool:
    """True when the group at ``path`` was delegated to this process's user."""
    for name in _DELEGATE_XATTRS:
        try:
            if os.getxattr(path, name).strip() in (b"1", b"true", b"yes"):
                return True
        except OSError:
            continue
    uid = os.geteuid()
    try:
        return uid != 0 and (path / "cgroup.procs").stat().st_uid == uid and os.access(path, os.W_OK)
    except OSError:
        return False


def find_parent(project_root: Path, *, given: Path | None = None) -> Parent:
    """The directory for this project's session groups, created; raises :class:`CgroupUnavailable`.

    ``given`` (a setting) skips detection: groups go directly below it.
    """
    mount = cgroup2_mount()
    if mount is None:
        raise CgroupUnavailable("no cgroup2 filesystem is mounted (see /proc/self/mountinfo)")
    mount_point, mount_root = mount
    if given is not None:
        parent, how = Path(given), "given"
        if not (parent / "cgroup.procs").exists() and not (parent.parent / "cgroup.procs").exists():
            raise CgroupUnavailable(f"{parent} is not a cgroup v2 directory, nor directly below one")
    else:
        own = own_cgroup()
        if own is None:
            raise CgroupUnavailable("this process is in no cgroup v2 group (no 0:: line in /proc/self/cgroup)")
        rel = os.path.relpath(own, mount_root) if mount_root != "/" else own.lstrip("/")
        own_dir = mount_point / rel if rel not in ("", ".") else mount_point
        key = project_key(project_root)
        if own != "/" and not rel.startswith("..") and delegated(own_dir):
            parent, how = own_dir / "agentd" / key, "delegated"
        elif os.geteuid() == 0 and os.access(mount_point, os.W_OK):
            parent, how = mount_point / "agentd" / key, "root"
        else:
            raise CgroupUnavailable(
                f"not root, and this process's group {own} (under {mount_point}) is not delegated to uid "
                f"{os.geteuid()}: run agentd as a systemd service with Delegate=yes, or as root"
            )
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CgroupUnavailable(f"cannot create {parent}: {exc.strerror}") from None
    if not (parent / "cgroup.procs").exists():
        raise CgroupUnavailable(f"{parent} is not a cgroup v2 directory")
    if not os.access(parent / "cgroup.procs", os.W_OK):
        raise CgroupUnavailable(f"{parent}/cgroup.procs is not writable by uid {os.geteuid()}")
    return Parent(parent, how, mount_point)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    except OSError as exc:
        if exc.errno in (errno.ENODEV, errno.ENOENT):
            return ""
        raise


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class JoinStep:
    """A child step (see ``pty.ChildStep``): the forked child moves itself into the group before exec.

    Built in the parent (opens ``cgroup.procs``); in the child one ``write``;
    :meth:`close` in the parent once the child has exec'd.
    """

    def __init__(self, group: Path) -> None:
        self.group = group
        self.fd = os.open(group / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        self.fds = (self.fd,)

    def __call__(self) -> None:  # pragma: no cover - runs in the forked child
        try:
            os.write(self.fd, b"0")
        except OSError as exc:
            raise OSError(exc.errno, f"cannot join cgroup {self.group}: {exc.strerror}") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Group:
    """One cgroup v2 directory (a session's group)."""

    def __init__(self, path: Path, mount: Path) -> None:
        self.path = Path(path)
        self.mount = Path(mount)

    @property
    def name(self) -> str:
        return self.path.name

    def create(self) -> Group:
        try:
            self.path.mkdir()
        except FileExistsError:
            pass
        return self

    def exists(self) -> bool:
        return (self.path / "cgroup.procs").exists()

    def join_step(self) -> JoinStep:
        return JoinStep(self.path)

    def subgroups(self) -> Iterator[Path]:
        """This group and every group below it, deepest first."""
        for dirpath, _dirnames, _ in os.walk(self.path, topdown=False):
            yield Path(dirpath)

    def pids(self) -> list[int]:
        """Every process in the group and its subgroups (``cgroup.procs``)."""
        out: list[int] = []
        for sub in self.subgroups():
            out.extend(int(p) for p in _read(sub / "cgroup.procs").split())
        return out

    def populated(self) -> bool:
        """``populated`` of ``cgroup.events``: a live process in the group or below (a missing group is empty)."""
        for line in _read(self.path / "cgroup.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "populated":
                return value.strip() == "1"
        return False

    def contains(self, pid: int) -> bool:
        """True when process ``pid`` is in this group or below."""
        cg = own_cgroup(_read(Path(f"/proc/{pid}/cgroup")))
        if cg is None:
            return False
        where = self.mount / cg.lstrip("/")
        return where == self.path or self.path in where.parents

    def cpu_seconds(self) -> float | None:
        """CPU time of every process that ever ran in the group (``cpu.stat`` ``usage_usec``)."""
        for line in _read(self.path / "cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None

    def memory_bytes(self) -> int | None:
        """``memory.current``, or None without the memory controller."""
        text = _read(self.path / "memory.current").strip()
        return int(text) if text.isdigit() else None

    def signal_all(self, sig: int) -> int:
        sent = 0
        for pid in self.pids():
            try:
                os.kill(pid, sig)
                sent += 1
            except (ProcessLookupError, PermissionError):
                continue
        return sent

    async def wait_empty(self, timeout: float, *, clock: Callable[[], float] = time.monotonic) -> bool:
        """Wait until no live process is left (``populated 0``); True when it is empty."""
        deadline = clock() + timeout
        while self.populated():
            if clock() >= deadline:
                return False
            await asyncio.sleep(POLL)
        return True

    async def kill(self, timeout: float = KILL_WAIT, *, use_kill_file: bool = True,
                   clock: Callable[[], float] = time.monotonic) -> bool:
        """SIGKILL everything in the group and wait until it is empty; True when it is."""
        if not self.exists():
            return True
        if use_kill_file and (self.path / "cgroup.kill").exists():
            _write(self.path / "cgroup.kill", "1")
            return await self.wait_empty(timeout, clock=clock)
        frozen = (self.path / "cgroup.freeze").exists()
        if frozen:  # nothing forks while frozen; SIGKILL still ends frozen tasks
            _write(self.path / "cgroup.freeze", "1")
        deadline = clock() + timeout
        try:
            while self.populated():
                self.signal_all(signal.SIGKILL)
                if clock() >= deadline:
                    return False
                await asyncio.sleep(POLL)
            return True
        finally:
            if frozen and self.exists():
                _write(self.path / "cgroup.freeze", "0")

    def remove(self) -> bool:
        """Remove the group and its subgroups (they must be empty); True when it is gone."""
        for sub in self.subgroups():
            try:
                sub.rmdir()
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno == errno.EBUSY:
                    return False
                raise
        return not self.path.exists()


def enable_controllers(top: Path, parent: Path, wanted: list[str]) -> dict[str, str]:
    """Enable ``wanted`` controllers in every group from ``top`` down to ``parent`` (for limits).

    ``top`` is the highest group agentd may change (the mount for root, the
    delegated group otherwise); a controller must be enabled in each group's
    ``cgroup.subtree_control`` on the way down to reach a session group.
    Returns, per controller that could not be enabled, why (nothing is
    changed for it past that point).
    """
    dirs = [top]
    for part in parent.relative_to(top).parts:
        dirs.append(dirs[-1] / part)
    missing: dict[str, str] = {}
    for name in wanted:
        for d in dirs:
            available = _read(d / "cgroup.controllers").split()
            if name not in available:
                missing[name] = f"the {name} controller is not available in {d} (available: {' '.join(available) or 'none'})"
                break
            if name in _read(d / "cgroup.subtree_control").split():
                continue
            try:
                _write(d / "cgroup.subtree_control", f"+{name}")
            except OSError as exc:
                hint = " (a group with processes cannot pass controllers down)" if exc.errno == errno.EBUSY else ""
                missing[name] = f"cannot enable the {name} controller in {d}: {exc.strerror}{hint}"
                break
    return missing
