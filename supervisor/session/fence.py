"""A Landlock filesystem fence for an agent's whole process tree: write only where allowed.

A ctypes module over the three Landlock syscalls (444 ``landlock_create_ruleset``,
445 ``landlock_add_rule``, 446 ``landlock_restrict_self``; the same numbers on
every Linux architecture agentd runs on).  No dependency: the two PyPI
packages (``landlock`` 1.0.0.dev5, ``py-landlock`` 0.1.1) are pre-releases that
wrap the same three calls, and we need one thing they do not give: the ruleset
built in the parent and only enforced in the forked child.

How it is used (see :class:`Fence`):

* the parent builds the ruleset (:meth:`Fence.build`): it handles the
  *write-type* rights the kernel's ABI knows (writing and truncating files,
  making and removing files, directories, links, devices, fifos and sockets,
  and renaming across directories), so reading and executing stay unrestricted; then one
  ``path_beneath`` rule per allowed directory (every write right beneath it)
  and per allowed file (write and truncate it in place);
* the child, between fork and exec, calls the :class:`Fence` object (it is a
  ``pty.ChildStep``): one more rule for the terminal it may write (its own
  PTY, known only there; :data:`TERMINALS`), its capabilities cut to
  :data:`.caps.KEEP_CAPS` (as root: Landlock does not mediate ``TIOCSTI``, ``mknod``
  of a disk, module loading), ``prctl(PR_SET_NO_NEW_PRIVS)`` and
  ``landlock_restrict_self``;
* the restriction holds for the agent and every process it starts, for
  their whole life; a write elsewhere fails with ``EACCES`` (a rename or
  link out of the fence too; ``EXDEV`` when only the cross-directory check
  fails, which ``mv`` turns into copy-and-delete).  Renames between two
  allowed directories work (the rules carry ``REFER``).

:func:`availability` says whether the kernel offers Landlock, and why not.
:class:`FenceSpec` is what may be written (absolute directories and files);
:func:`supervisor.scope.allowset.scope_allowset` computes the scope part of it
from the unit's globs, and :meth:`FenceSpec.permits` answers "was this path
inside the fence", to tell a fence refusal from an ordinary permission error.

Always writable, because programs fail without them: :data:`DEVICE_PATHS`
(``/dev/null``, ``/dev/tty``, ``/dev/ptmx``, ``/dev/shm`` ...), and one
terminal rule: never all of ``/dev/pts``, where every unit's terminal is a
file the daemon's uid owns (writing one fakes that unit's output; and a
descriptor opened *for reading* is enough for ``TIOCSTI``, which only
``CAP_SYS_ADMIN`` lets reach a terminal not one's own: so the view also gives
each agent a ``devpts`` of its own, :mod:`.mountview`).  Where the kernel knows it
(ABI 6), the ruleset is also *scoped* for signals: a fenced agent cannot
signal (stop, kill) the daemon, another unit's agent or any process outside
its own tree; ptrace and ``/proc/PID/...`` of such processes are refused at
every ABI.  Not handled on purpose: ``IOCTL_DEV`` (ABI 5; it would also stop
terminal ioctls on a reopened ``/dev/tty``), the abstract-socket scope (a
host service on an abstract socket stays reachable) and the read rights: refusing reads beneath one directory means allowing them on every
sibling along its path, and the directories on that path could then no
longer be listed.  What must not be read (agentd's state) is hidden by the
fence's mount namespace instead (:mod:`.mountview`), which also keeps
``.git/config``, ``hooks/`` and ``info/`` read-only while ``.git`` stays
writable (:func:`git_protected`).  Connecting to a Unix socket (the control
socket) is not a filesystem write and still works.
"""

from __future__ import annotations

import ctypes
import enum
import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .caps import drop_capabilities, last_cap

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38


class Access(enum.IntFlag):
    """``LANDLOCK_ACCESS_FS_*`` (the ABI that introduced each is in the comment)."""

    EXECUTE = 1 << 0
    WRITE_FILE = 1 << 1
    READ_FILE = 1 << 2
    READ_DIR = 1 << 3
    REMOVE_DIR = 1 << 4
    REMOVE_FILE = 1 << 5
    MAKE_CHAR = 1 << 6
    MAKE_DIR = 1 << 7
    MAKE_REG = 1 << 8
    MAKE_SOCK = 1 << 9
    MAKE_FIFO = 1 << 10
    MAKE_BLOCK = 1 << 11
    MAKE_SYM = 1 << 12
    REFER = 1 << 13  # ABI 2
    TRUNCATE = 1 << 14  # ABI 3
    IOCTL_DEV = 1 << 15  # ABI 5


_WRITE_ABI1 = (
    Access.WRITE_FILE | Access.REMOVE_DIR | Access.REMOVE_FILE | Access.MAKE_CHAR | Access.MAKE_DIR
    | Access.MAKE_REG | Access.MAKE_SOCK | Access.MAKE_FIFO | Access.MAKE_BLOCK | Access.MAKE_SYM
)
#: Rights a rule on a file (not a directory) may carry.
_FILE_RIGHTS = Access.WRITE_FILE | Access.TRUNCATE

#: Written by ordinary programs everywhere; always allowed.  ``/dev/ptmx`` makes a new terminal (``script``,
#: ``tmux``, ``expect``): a new pair, nobody else's.  ``/dev/pts`` is *not* here: every unit's terminal
#: is a file there, and writing another's fakes its output (see :data:`TERMINALS`).
DEVICE_PATHS = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
    "/dev/tty", "/dev/ptmx", "/dev/shm",
)

#: Which terminals a fenced process may write, decided in the child (:meth:`Fence.__call__`), where its own
#: is known: ``own`` its own terminal only (``ttyname(0)``: the session's PTY); ``private`` everything in
#: ``/dev/pts`` *as the child sees it*, which is only right where the view mounted a private ``devpts``
#: instance there (:mod:`.mountview`: other units' terminals are then not even visible); ``none``: none.
TERMINALS = ("own", "private", "none")

def write_rights(abi: int) -> Access:
    """The write-type rights ABI ``abi`` knows (a newer right on an older kernel is masked out)."""
    rights = _WRITE_ABI1
    if abi >= 2:
        rights |= Access.REFER
    if abi >= 3:
        rights |= Access.TRUNCATE
    return rights


class _RulesetAttr(ctypes.Structure):
    # Only the first field (ABI 1); the kernel accepts a shorter struct and
    # treats the later fields (handled_access_net, scoped) as zero.
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):
    # ABI 6: handled_access_net (0: the network is not the fence's business), then scoped.
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


#: ``LANDLOCK_SCOPE_SIGNAL`` (ABI 6): no signal to a process outside the domain.
SCOPE_SIGNAL = 1 << 1


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


class FenceUnavailable(Exception):
    """Landlock cannot be used here; the message says why."""


@dataclass(frozen=True)
class Availability:
    """The kernel's Landlock ABI version (0 when unavailable) and, when unavailable, why."""

    abi: int
    reason: str = ""

    @property
    def available(self) -> bool:
        return self.abi >= 1


@lru_cache(maxsize=1)
def availability() -> Availability:
    """Ask the kernel which Landlock ABI it offers (cached: it cannot change while running)."""
    libc = _libc()
    abi = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if abi >= 1:
        return Availability(int(abi))
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return Availability(0, "the kernel has no Landlock system calls (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK)")
    if err == errno.EOPNOTSUPP:
        return Availability(0, "Landlock is built in but not enabled (add landlock to the lsm= kernel parameter)")
    return Availability(0, f"landlock_create_ruleset failed: {os.strerror(err)}")


@dataclass(frozen=True)
class FenceSpec:
    """What a fenced agent may write: whole directories (everything beneath) and single files, absolute."""

    dirs: tuple[Path, ...] = ()
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)  # what could not be granted, and why

    @classmethod
    def of(cls, dirs: Iterable[Path | str] = (), files: Iterable[Path | str] = (), notes: Iterable[str] = ()) -> FenceSpec:
        """Resolve, deduplicate and drop paths already beneath an allowed directory."""
        rdirs = sorted({Path(os.path.realpath(d)) for d in dirs}, key=lambda p: (len(p.parts), str(p)))
        kept: list[Path] = []
        for d in rdirs:
            if not any(d == k or k in d.parents for k in kept):
                kept.append(d)
        rfiles = sorted({Path(os.path.realpath(f)) for f in files})
        rfiles = [f for f in rfiles if not any(k in f.parents for k in kept)]
        return cls(tuple(kept), tuple(rfiles), tuple(notes))

    def merged(self, other: FenceSpec) -> FenceSpec:
        return FenceSpec.of((*self.dirs, *other.dirs), (*self.files, *other.files), (*self.notes, *other.notes))

    def permits(self, path: Path | str) -> bool:
        """True when writing ``path`` is inside the fence (path resolved as the kernel would)."""
        target = Path(os.path.realpath(path))
        return target in self.files or any(target == d or d in target.parents for d in self.dirs)


def agent_spec(
    *,
    scope: FenceSpec,
    writable: Iterable[Path | str] = (),
    git_dirs: Iterable[Path | str] = (),
    inbox: Path | str | None = None,
    tmp_dir: Path | str | None = None,
    state_dirs: Iterable[Path | str] = (),
    devices: Iterable[str] = DEVICE_PATHS,
) -> FenceSpec:
    """The whole fence of one agent: its scope plus every other place it must write.

    ``writable`` (the unit's extra paths), ``git_dirs`` (:func:`git_dirs`),
    ``inbox`` (the unit's own memory inbox: ``.agent/`` itself is not
    writable, the daemon writes it on the agent's behalf), ``tmp_dir`` (its
    private temp dir, also its ``TMPDIR``) and ``state_dirs`` (``CODEX_HOME``,
    Claude's config dir) are taken as given: a directory is allowed whole, a
    file in place.  Missing paths are left out with a note (create them
    before building the fence).
    """
    dirs: list[Path] = []
    files: list[Path] = []
    notes: list[str] = []
    extra = [*writable, *git_dirs, *([inbox] if inbox else []), *([tmp_dir] if tmp_dir else []), *state_dirs, *devices]
    for raw in extra:
        path = Path(raw)
        if path.is_dir():
            dirs.append(path)
        elif path.exists():
            files.append(path)
        elif str(raw) not in devices:
            notes.append(f"{path} does not exist, so it is not writable (create it before the spawn)")
    return scope.merged(FenceSpec.of(dirs, files, notes))


def git_dirs(project_root: Path) -> list[Path]:
    """Where ``git commit`` in ``project_root`` writes: ``.git``, or for a worktree its git dir and the common dir."""
    dot = Path(project_root) / ".git"
    if dot.is_dir():
        return [dot]
    if not dot.is_file():
        return []
    text = dot.read_text(errors="replace").strip()
    if not text.startswith("gitdir:"):
        return []
    gitdir = Path(text[len("gitdir:"):].strip())
    gitdir = gitdir if gitdir.is_absolute() else (dot.parent / gitdir)
    out = [gitdir]
    common = gitdir / "commondir"
    if common.is_file():
        c = Path(common.read_text().strip())
        out.append(c if c.is_absolute() else gitdir / c)
    return [p for p in out if p.is_dir()]


#: What in a git directory configures commands git runs (and so must stay the person's): the config
#: (core.fsmonitor, filters, aliases, hooksPath ...), the hooks, and info/ (attributes naming filters).
GIT_PROTECTED = ("config", "config.worktree", "hooks", "info")


def git_protected(dirs: Iterable[Path]) -> list[Path]:
    """The paths of :data:`GIT_PROTECTED` in each git directory, to be kept read-only.

    ``hooks/`` and ``info/`` are created when missing (else an agent could
    create them); ``config.worktree`` is created empty only where the config
    enables ``extensions.worktreeConfig`` (git reads it only then).
    """
    dirs = [Path(d) for d in dirs]
    texts = []
    for d in dirs:
        try:
            texts.append((d / "config").read_text(errors="replace").lower())
        except OSError:
            pass
    worktree_config = any("worktreeconfig" in t for t in texts)
    out: list[Path] = []
    for d in dirs:
        for name in GIT_PROTECTED:
            path = d / name
            try:
                if name in ("hooks", "info") and not path.exists() and (d / "objects").is_dir():
                    path.mkdir(mode=0o755)
                elif name == "config.worktree" and worktree_config and not path.exists():
                    path.touch(mode=0o644)
            except OSError:
                pass
            if path.exists():
                out.append(path)
    return out


class Fence:
    """A prepared Landlock ruleset; calling it in the forked child enforces it (a ``pty.ChildStep``).

    Build one per spawn (:meth:`build`), pass it to ``Session.spawn``, which
    closes it afterwards.  ``skipped`` lists paths of the spec that vanished
    before their rule was added.  ``terminals`` (:data:`TERMINALS`) says which
    terminal the child adds a rule for before it restricts itself.
    """

    def __init__(self, fd: int, abi: int, handled: Access, spec: FenceSpec, skipped: list[str],
                 terminals: str = "own") -> None:
        if terminals not in TERMINALS:
            raise ValueError(f"terminals: one of {', '.join(TERMINALS)}, not {terminals!r}")
        self.fd = fd
        self.fds = (fd,)
        self.abi = abi
        self.handled = handled
        self.spec = spec
        self.skipped = skipped
        self.terminals = terminals
        self.last_cap = last_cap()
        libc = _libc()
        self._prctl = libc.prctl
        self._syscall = libc.syscall
        self._args = (ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0))

    @classmethod
    def build(cls, spec: FenceSpec, *, abi: int | None = None, terminals: str = "own") -> Fence:
        """Create the ruleset and add one rule per path (in the parent).  Raises :class:`FenceUnavailable`.

        ``abi`` caps the ABI used (to test the masking of newer rights);
        ``terminals``: which terminals the child may write (:data:`TERMINALS`).
        """
        have = availability()
        if not have.available:
            raise FenceUnavailable(have.reason)
        abi = min(abi or have.abi, have.abi)
        handled = write_rights(abi)
        libc = _libc()
        attr = _ScopedRulesetAttr(int(handled), 0, SCOPE_SIGNAL) if abi >= 6 else _RulesetAttr(int(handled))
        fd = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
        if fd < 0:
            err = ctypes.get_errno()
            raise FenceUnavailable(f"landlock_create_ruleset: {os.strerror(err)}")
        skipped: list[str] = []
        try:
            for path, rights in [*((d, handled) for d in spec.dirs), *((f, handled & _FILE_RIGHTS) for f in spec.files)]:
                try:
                    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    skipped.append(str(path))
                    continue
                try:
                    rule = _PathBeneath(int(rights), pfd)
                    if libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"landlock_add_rule for {path}: {os.strerror(err)}")
                finally:
                    os.close(pfd)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, abi, handled, spec, skipped, terminals)

    def __call__(self) -> None:  # pragma: no cover - runs in the forked child
        self._terminal_rule()
        drop_capabilities(self._prctl, _libc(), self.last_cap)
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        if self._syscall(*self._args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")

    def _terminal_rule(self) -> None:
        """The child's terminal rule: its own PTY (``own``), or the private ``/dev/pts`` its view mounted."""
        if self.terminals == "none":
            return
        if self.terminals == "own":
            try:
                path = os.ttyname(0)
            except OSError:
                return  # no terminal on stdin: nothing to allow
            if not path.startswith("/dev/pts/"):
                return
        else:
            path = "/dev/pts"
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            rule = _PathBeneath(int(self.handled & _FILE_RIGHTS), pfd)
            if self._syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"landlock_add_rule for {path}: {os.strerror(err)}")
        finally:
            os.close(pfd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Fence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
