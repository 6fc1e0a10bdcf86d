"""``agentd doctor --env``: is this machine ready to run the project's agents?

One :class:`Finding` per check, each with what to do when it fails:

* the agent CLIs the units name, and their versions against the verified ones;
* each Codex and Claude unit's login, from files and the environment (the
  running daemon's, else this one), never the network
  (:func:`supervisor.adapters.checks.login_problem`);
* git, and what ``agentd sync`` runs of the person's git configuration
  (their credential helpers, ssh command: named; one an agent may write: a
  failure);
* inotify watches against the project's folders;
* user namespaces and Landlock (the scope fence, the end-to-end tests);
* the state directory (the control socket's home): owner, mode, path length;
* free disk space for transcripts;
* the service manager's stop timeout against the checkpoint deadlines;
* supervisord's ``supervisor`` distribution installed beside agentd: both
  import as ``supervisor`` (:func:`check_collision`).

Each check takes what it reads as arguments (paths, the environment), so that
a test can point it at a failing case.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Settings
    from ..config.stopbudget import StopLimit
    from ..config.units import UnitSpec

#: The CLI versions agentd's adapters were verified with (docs/codex.md, docs/claude.md, tests/install_*.sh).
VERIFIED = {"codex": "0.169.0", "claude": "2.1.328"}
INSTALL = {"codex": "npm install -g @openai/codex@0.169.0",
           "claude": "npm install -g @anthropic-ai/claude-code@2.1.328"}
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_watches")
#: Free space below which transcripts may fill the disk (fail) or soon will (warn).
DISK_FAIL = 100 * 2**20
DISK_WARN = 1 * 2**30
#: Unix socket paths longer than this do not fit in sockaddr_un.sun_path (108 bytes with the NUL).
SOCKET_PATH_MAX = 107


class Status(Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""

    def render(self) -> str:
        line = f"{self.status.value:<5} {self.check:<16} {self.detail}"
        return f"{line}\n{'':<22}-> {self.fix}" if self.fix and self.status is not Status.OK else line


# -- the agent CLIs ------------------------------------------------------------------

def _version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\d+\.\d+\.\d+", out.stdout + out.stderr)
    return found.group(0) if found else None


def _resolved(spec: UnitSpec, root: Path, path_env: str) -> Path:
    from ..config.units import agent_path

    program = spec.agent.command[0]
    workdir = spec.workdir_path(root)
    if "/" in program:
        return Path(program) if Path(program).is_absolute() else workdir / program
    search = agent_path(spec.agent.env.get("PATH", path_env))
    return Path(shutil.which(program, path=search) or program)


def check_agent(spec: UnitSpec, root: Path, path_env: str) -> Finding:
    """The unit's program is there and, for codex and claude, is the verified version."""
    from ..config.units import command_problem

    name = f"agent {spec.name}"
    kind = spec.agent.kind
    problem = command_problem(spec, root, path_env)
    if problem:
        fix = f"{INSTALL[kind]}, or " if kind in INSTALL else ""
        return Finding(name, Status.FAIL, problem, f"{fix}give the full path in [agent] command, or fix PATH")
    program = _resolved(spec, root, path_env)
    if kind not in VERIFIED:
        return Finding(name, Status.OK, f"{program} ({kind})")
    if kind == "codex":
        from ..adapters.codex import native_binary

        try:
            program = native_binary(str(spec.codex.binary or program), spec.workdir_path(root))
        except FileNotFoundError as exc:
            return Finding(name, Status.FAIL, str(exc), INSTALL[kind])
    version = _version([str(program)])
    if version is None:
        return Finding(name, Status.FAIL, f"`{program} --version` gave no version", f"check the install: {INSTALL[kind]}")
    if version != VERIFIED[kind]:
        return Finding(name, Status.WARN, f"{kind} {version} at {program}; agentd is verified with {VERIFIED[kind]}",
                       f"{INSTALL[kind]} (other versions may change hooks, token counts or keys)")
    return Finding(name, Status.OK, f"{kind} {version} at {program} (verified)")


def check_login(spec: UnitSpec, settings: Settings, environ: Mapping[str, str]) -> Finding | None:
    """A Codex or Claude unit's agent can log in (a key, a login file), read without the network."""
    from ..adapters.checks import login_problem

    if spec.agent.kind not in VERIFIED:
        return None
    name = f"login {spec.name}"
    problem = login_problem(spec, settings, environ)
    if problem is None:
        return Finding(name, Status.OK, f"{spec.agent.kind}: a key or a login is there (not tried: no network)")
    detail, _, fix = problem.partition("; ")
    return Finding(name, Status.WARN, detail, fix)


# -- git -------------------------------------------------------------------------------

def check_git(root: Path, path_env: str) -> Finding:
    git = shutil.which("git", path=path_env)
    if git is None:
        return Finding("git", Status.FAIL, "git not found on PATH",
                       "install git (apt-get install git): reverts and snapshots read the project's history")
    version = _version([git]) or "?"
    from ..memory.gitfiles import in_git  # libgit2: no git process in the project (its config is agent-writable)

    if not in_git(root):
        return Finding("git", Status.WARN, f"git {version}; {root} is not a git work tree",
                       "`git init` there: without git, a revert can only restore from snapshots")
    return Finding("git", Status.OK, f"git {version}; {root} is a work tree")


def _person_git(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, bool]]] | None:
    from ..memory.gitrepo import open_repo
    from ..memory.gittransport import person_config, sync_urls

    repo = open_repo(root)
    return None if repo is None else (person_config(repo), sync_urls(repo))


def check_sync(root: Path, specs: Mapping[str, UnitSpec], environ: Mapping[str, str]) -> Finding | None:
    """What ``agentd sync``'s git runs of the person's configuration (libgit2 reads it: no git process), or
    None outside git.  Their own commands are a warning that names them; one that runs a file a unit's agent
    may write is a failure (config/runnable.py)."""
    from ..config.runnable import command_problem
    from ..memory.gitfiles import RepoError
    from ..memory.gittransport import sync_runs
    from ..memory.gitworker import run
    from ..session.redact import redact_text

    try:
        found = run(_person_git, root, what="reading the git configuration")
    except RepoError as exc:
        return Finding("git sync", Status.WARN, f"cannot read the git configuration: {exc}", "see `agentd check`")
    if found is None:
        return None
    runs, off = sync_runs(found[0], dict(environ), found[1])
    pinned = f"; your {', '.join(off)} pinned off for it" if off else ""
    for key, argv in runs:
        problem = command_problem(f"your git config's {key}", argv, root, specs, root,
                                  path_env=environ.get("PATH", ""))
        if problem:
            return Finding("git sync", Status.FAIL, f"`agentd sync` runs {problem}",
                           f"point {key} at a program outside the project, or narrow those scopes")
    if not runs:
        return Finding("git sync", Status.OK, f"`agentd sync` runs no command of your git config for this "
                       f"project's remotes{pinned}")
    named = ", ".join(f"{key} ({redact_text(' '.join(argv).removeprefix('sh -c '))})" for key, argv in runs)
    return Finding("git sync", Status.WARN, f"`agentd sync` runs, from your git config and environment for this "
                   f"project's remotes: {named}{pinned}",
                   "these are yours, run as you when a sync fetches or pushes (never the project's .git/config); "
                   "keep what they run out of every unit's scope")

# -- inotify -------------------------------------------------------------------------

def count_dirs(root: Path, ignore: Iterable[str], stop_at: int) -> int:
    """Folders under ``root`` the scope guard watches (one inotify watch each), counting up to ``stop_at``."""
    skip = set(ignore)
    count = 0
    for _dirpath, dirnames, _files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        count += 1
        if count >= stop_at:
            break
    return count


def watches_in_use(uid: int, proc: Path = Path("/proc")) -> int:
    """inotify watches held by ``uid``'s processes (the limit is per user)."""
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            for info in (entry / "fdinfo").iterdir():
                text = info.read_text(errors="replace")
                if "inotify wd:" in text:
                    total += text.count("inotify wd:")
        except OSError:
            continue
    return total


def check_inotify(root: Path, limit_path: Path = INOTIFY_LIMIT) -> Finding:
    from ..scope.watcher import DEFAULT_IGNORE

    try:
        limit = int(limit_path.read_text().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        return Finding("inotify", Status.FAIL, f"cannot read {limit_path}: {exc}",
                       "the scope guard needs inotify (a Linux kernel with CONFIG_INOTIFY_USER)")
    used = watches_in_use(os.getuid())
    free = max(limit - used, 0)
    need = count_dirs(root, DEFAULT_IGNORE, stop_at=free + 1)
    fix = (f"sysctl fs.inotify.max_user_watches={max(2 * (need + used), 65536)} (and in /etc/sysctl.d/ to keep it), "
           "or add big generated folders to the ignored ones")
    detail = f"the project needs {need}{'+' if need > free else ''} watches; {free} of {limit} are free ({used} in use)"
    if need > free:
        return Finding("inotify", Status.FAIL, detail, fix)
    if need > free // 2:
        return Finding("inotify", Status.WARN, detail, fix)
    return Finding("inotify", Status.OK, detail)


# -- user namespaces and Landlock ------------------------------------------------------

_USERNS_PROBE = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
    sys.exit("user namespace: " + os.strerror(ctypes.get_errno()))
for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
    with open(f"/proc/self/{name}", "w") as fh:
        fh.write(text)
if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
    sys.exit("network namespace in it: " + os.strerror(ctypes.get_errno()))
"""


def check_userns() -> Finding:
    """What ``unshare -rn`` does (the end-to-end tests' loopback-only jail), tried in a child process."""
    try:
        probe = subprocess.run([sys.executable, "-c", _USERNS_PROBE], capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding("user namespaces", Status.FAIL, f"probe failed: {exc}")
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return Finding("user namespaces", Status.FAIL, f"cannot create one ({reason})",
                       "sysctl user.max_user_namespaces=15000 (Debian: kernel.unprivileged_userns_clone=1; "
                       "Ubuntu: kernel.apparmor_restrict_unprivileged_userns=0): the end-to-end tests and the "
                       "scope fence need them")
    return Finding("user namespaces", Status.OK, "a user namespace with a network namespace in it works")


def landlock_abi() -> int | str:
    """Landlock's ABI version, or why it is unavailable (``landlock_create_ruleset(NULL, 0, VERSION)``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(abi) if abi >= 0 else os.strerror(ctypes.get_errno())


def check_landlock() -> Finding:
    abi = landlock_abi()
    if isinstance(abi, str):
        return Finding("landlock", Status.FAIL, f"unavailable ({abi})",
                       "a kernel >= 5.13 with CONFIG_SECURITY_LANDLOCK and landlock in its lsm= list; in a container, "
                       "a seccomp profile that allows the landlock_* system calls (the scope fence needs it)")
    return Finding("landlock", Status.OK, f"ABI {abi}")


# -- the state directory, the disk -------------------------------------------------------

def check_state_dir(state: Path, socket_path: Path) -> Finding:
    name = "state dir"
    if len(os.fsencode(socket_path)) > SOCKET_PATH_MAX:
        return Finding(name, Status.FAIL, f"the control socket {socket_path} is {len(os.fsencode(socket_path))} "
                       f"bytes long; Unix sockets allow {SOCKET_PATH_MAX}", "set state_dir to a shorter absolute path")
    if socket_path.parent != state:  # the state directory is too deep for a socket: it goes to /tmp/agentd-UID
        from ..config.paths import socket_dir_problem

        problem = socket_dir_problem(socket_path.parent)
        if problem:  # the daemon's own rule (it makes the directory mode 700 itself)
            return Finding(name, Status.FAIL, f"{problem} ({state} is too deep for a Unix socket, so it goes there)",
                           f"remove {socket_path.parent}")
    if not state.exists():
        parent = next((p for p in state.parents if p.exists()), Path("/"))
        if not os.access(parent, os.W_OK | os.X_OK):
            return Finding(name, Status.FAIL, f"{state} does not exist and {parent} is not writable",
                           f"create {state} (mode 700) for this user, or set state_dir elsewhere")
        where = "" if socket_path.parent == state else f"; the control socket will be {socket_path}"
        return Finding(name, Status.OK, f"{state} will be created (mode 700){where}")
    info = state.stat()
    if info.st_uid != os.getuid():
        return Finding(name, Status.FAIL, f"{state} belongs to uid {info.st_uid}, not to this user ({os.getuid()})",
                       f"run agentd as its owner, or chown {os.getuid()} {state}")
    if info.st_mode & 0o077:
        return Finding(name, Status.FAIL, f"{state} is mode {info.st_mode & 0o777:o}: others can reach the socket",
                       f"chmod 700 {state}")
    where = "" if socket_path.parent == state else f"; the control socket is {socket_path} (the state dir is too deep)"
    return Finding(name, Status.OK, f"{state}: mode 700, owned by this user{where}")


def check_disk(transcripts: Path) -> Finding:
    where = next((p for p in (transcripts, *transcripts.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(where).free
    detail = f"{free / 2**30:.2f} GiB free for transcripts on {where}"
    fix = "free some space, or set state_dir on a bigger file system (transcripts grow with every session)"
    if free < DISK_FAIL:
        return Finding("disk", Status.FAIL, detail, fix)
    if free < DISK_WARN:
        return Finding("disk", Status.WARN, detail, fix)
    return Finding("disk", Status.OK, detail)


# -- the stop timeout --------------------------------------------------------------------

def daemon_environ(settings: Settings) -> Mapping[str, str] | None:
    """The environment of the running daemon (what it was started under), or None."""
    from ..daemon.pidfile import is_locked, read_pidfile

    if not is_locked(settings.pidfile):
        return None
    record = read_pidfile(settings.pidfile)
    proc = record.alive() if record is not None else None
    try:
        return proc.environ() if proc is not None else None
    except Exception:  # noqa: BLE001 - psutil.AccessDenied and friends: no figure, no check
        return None


def service_stop_limit(settings: Settings, environ: Mapping[str, str]) -> StopLimit | None:
    """The stop timeout agentd runs (or would run) under: the setting, $TIMEOUT_STOP_USEC here or in the daemon."""
    from ..config.stopbudget import stop_limit

    limit = stop_limit(settings.service_stop_timeout, environ, "environment")
    if limit is None:
        running = daemon_environ(settings)
        if running is not None:
            limit = stop_limit(None, running, "the running daemon's environment")
    return limit


def check_stop_timeout(specs: Mapping[str, UnitSpec], settings: Settings, environ: Mapping[str, str]) -> Finding:
    from ..config.stopbudget import stop_budget, stop_problem, timeout_stop_sec

    budget = stop_budget(specs, settings.stop_timeout)
    try:
        limit = service_stop_limit(settings, environ)
    except ValueError as exc:
        return Finding("stop timeout", Status.FAIL, str(exc), "TIMEOUT_STOP_USEC is microseconds, e.g. 360000000")
    if limit is None:
        return Finding("stop timeout", Status.OK, f"stopping may take {budget.seconds:g} s; no service manager limit "
                       f"known (under systemd set TimeoutStopSec={timeout_stop_sec(budget)} or more, and "
                       "TIMEOUT_STOP_USEC to match)")
    problem = stop_problem(budget, limit)
    if problem:
        return Finding("stop timeout", Status.FAIL, problem, "see `Running under systemd` in the README")
    return Finding("stop timeout", Status.OK, f"stopping may take {budget.seconds:g} s; {limit.source} allows "
                   f"{limit.seconds:g} s")


# -- the import name -------------------------------------------------------------------------

def check_collision(lookup: Callable[[str], Any] | None = None) -> Finding:
    """supervisord's distribution (named ``supervisor``) is not installed beside agentd: both import as
    ``supervisor``, and whichever was installed last overwrote the other's files."""
    from importlib import metadata

    try:
        dist = (lookup or metadata.distribution)("supervisor")
    except metadata.PackageNotFoundError:
        return Finding("package name", Status.OK, "no supervisord beside it (agentd's import name is `supervisor`)")
    return Finding("package name", Status.WARN,
                   f"supervisord ({dist.metadata['Name']} {dist.version}) is installed in this environment "
                   f"({sys.prefix}): it and agentd (agentd-supervisor) both import as `supervisor`, so one "
                   "overwrites the other's files",
                   "install agentd in an environment of its own: `pipx install .` from a checkout (README)")


# -- all of it -------------------------------------------------------------------------------

def diagnose_env(settings: Settings, environ: Mapping[str, str] | None = None) -> list[Finding]:
    """Every check, in the order of the module's list."""
    from ..config.units import load_units, unit_files

    environ = os.environ if environ is None else environ
    path_env = environ.get("PATH", "")
    root = settings.project_root
    findings: list[Finding] = []
    specs, errors = load_units(settings.units_path)
    if not unit_files(settings.units_path):
        findings.append(Finding("units", Status.WARN, f"no unit file in {settings.units_path}",
                                "`agentd init` (or see `agentd check`)"))
    if errors:
        findings.append(Finding("units", Status.WARN, f"{len(errors)} unit file(s) do not load",
                                "`agentd check` names each problem"))
    findings.extend(check_agent(spec, root, path_env) for spec in specs.values())
    agent_env = daemon_environ(settings) or environ  # what the agents are (or would be) started under
    findings.extend(f for f in (check_login(spec, settings, agent_env) for spec in specs.values()) if f is not None)
    findings.append(check_git(root, path_env))
    sync = check_sync(root, specs, environ) if shutil.which("git", path=path_env) else None
    if sync is not None:
        findings.append(sync)
    findings.append(check_inotify(root))
    findings.append(check_userns())
    findings.append(check_landlock())
    findings.append(check_state_dir(settings.state_path, settings.socket_path))
    findings.append(check_disk(settings.transcripts_path))
    findings.append(check_stop_timeout(specs, settings, environ))
    findings.append(check_collision())
    return findings
