"""The fault-injection suite's shared parts (issue 13): the checks every test ends with, and a
private mount namespace for faults of the disk.

:func:`final_checks` is how every fault test ends:

1. **the daemon answers** (``status`` within the client's timeout);
2. **every unit is in a named state** (a :class:`UnitState`, and a reason
   whenever it is not running);
3. **no data is lost**: every line of ``agentd.log`` and of the history files
   is whole JSON, the decisions the test expects are in the logs, and
   ``agentd doctor`` finds the memory store sound;
4. **nothing is left**: after ``agentd stop`` no process of the project is
   alive (by its ``AGENTD_ROOT``) and, where agentd made cgroups for the
   project, none of them holds a process.

:class:`MountNamespace` holds a private mount namespace (``unshare -m``) in
which a test mounts a small or read-only tmpfs over the state directory; the
daemon is started inside it (``nsenter``) and the test reads its files
through ``/proc/PID/root``.  Mounting needs root: the tests that need it fail
(never skip) under ``CI=true`` when not root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.daemon.lifecycle import UnitState
from tests.conftest import Project, processes_of, wait_until

NAMED = {s.value for s in UnitState}
#: States that must carry the reason the unit is there.
NEEDS_REASON = {UnitState.BACKOFF.value, UnitState.FAILED.value, UnitState.WAITING.value}


def need_root() -> None:
    """Mount namespaces and tmpfs mounts need root: skip outside CI, fail in it (CI counts a skip as a failure)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        if os.environ.get("CI") == "true":
            pytest.fail("this fault test needs root and util-linux (unshare, nsenter) in CI")
        pytest.skip("needs root and util-linux (unshare, nsenter)")


# ---------------------------------------------------------------- the checks every test ends with
def whole_json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-lines file; a torn or malformed line fails the test."""
    if not path.exists():
        return []
    items = []
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        try:
            items.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"{path}:{n}: not a whole JSON line: {line[:200]!r}") from None
    return items


def cgroup_leftovers(root: Path) -> list[int]:
    """Pids still in any cgroup agentd made for this project (none when it made none)."""
    from supervisor.session.cgroup import cgroup2_mount, project_key

    mount = cgroup2_mount()
    if mount is None:
        return []
    top = mount[0] / "agentd" / project_key(root)
    pids: list[int] = []
    if top.is_dir():
        for procs in top.rglob("cgroup.procs"):
            try:
                pids += [int(p) for p in procs.read_text().split()]
            except OSError:
                continue
    return pids


def final_checks(project: Project, units: Iterable[str] = (), decisions: Iterable[str] = (),
                 logs_whole: bool = True) -> dict[str, Any]:
    """The end of every fault test (see the module docstring); returns the last status."""
    status = wait_until(lambda: _status(project), 60, 0.2, "the daemon to answer status")
    assert status["daemon"] is not None, "the daemon does not answer"
    rows = {row["unit"]: row for row in status["units"]}
    for name in units:
        assert name in rows, f"unit {name} is missing from status: {sorted(rows)}"
    for name, row in rows.items():
        assert row["state"] in NAMED, f"{name}: state {row['state']!r} is not a named state"
        if row["state"] in NEEDS_REASON:
            assert row["reason"], f"{name} is {row['state']} without a reason"
    state = project.state
    if logs_whole:
        whole_json_lines(state / "agentd.log")
    for path in sorted((state / "history").glob("*.jsonl")) if (state / "history").is_dir() else []:
        whole_json_lines(path)
    texts = "".join(p.read_text(errors="replace") for p in sorted((project.root / ".agent").glob("decisions*.log"))) \
        if (project.root / ".agent").is_dir() else ""
    for decision in decisions:
        assert decision in texts, f"decision lost: {decision!r}"
    doctor = project.agentd("doctor", check=False, timeout=120)  # the memory store: no malformed line, no missing file
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    project.agentd("stop", "--now", timeout=120)
    wait_until(lambda: not processes_of(project.root), 30, 0.1, "every process of the project to be gone")
    wait_until(lambda: not cgroup_leftovers(project.root), 30, 0.1, "the project's cgroups to be empty")
    return status


def _status(project: Project) -> dict[str, Any] | None:
    result = project.agentd("status", "--json", check=False, timeout=60)
    if result.returncode not in (0, 3):
        return None
    data = json.loads(result.stdout)
    return data if data.get("daemon") else None


# ---------------------------------------------------------------- a private mount namespace
class MountNamespace:
    """A mount namespace of its own, kept alive by a holder process (``unshare -m sleep``)."""

    def __init__(self) -> None:
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "100000"],
                                       stdin=subprocess.DEVNULL)
        mine = os.readlink("/proc/self/ns/mnt")
        wait_until(lambda: _ns_of(self.holder.pid) not in (None, mine), 10, 0.02, "the mount namespace")

    @property
    def pid(self) -> int:
        return self.holder.pid

    def prefix(self) -> list[str]:
        """What runs a command inside the namespace."""
        return ["nsenter", "-t", str(self.pid), "-m", "--"]

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*self.prefix(), *argv], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}"
        return result

    def mount_tmpfs(self, where: Path, size: str = "4m", read_only: bool = False) -> None:
        self.view(where).mkdir(parents=True, exist_ok=True)  # inside an earlier mount: made in the namespace
        self.run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700{',ro' if read_only else ''}", "tmpfs", str(where))

    def remount(self, where: Path, read_only: bool) -> None:
        self.run("mount", "-o", f"remount,{'ro' if read_only else 'rw'}", str(where))

    def view(self, path: Path) -> Path:
        """``path`` as the namespace sees it, from outside."""
        return Path(f"/proc/{self.pid}/root") / Path(path).resolve().relative_to("/")

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait(10)


def _ns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


class NsProject(Project):
    """A project whose state directory is a mount inside ``ns``: agentd runs there, files are read through it."""

    ns: MountNamespace

    def agentd(self, *args: str, check: bool = True, timeout: float = 120,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        from tests.conftest import AGENTD, clean_env

        result = subprocess.run([*self.ns.prefix(), *AGENTD, "--root", str(self.root), *args], cwd=self.root,
                                env=env or clean_env(), capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise AssertionError(f"agentd {' '.join(args)} exited {result.returncode}\n"
                                 f"stdout: {result.stdout}\nstderr: {result.stderr}")
        return result


@pytest.fixture
def ns_project(tmp_path: Path) -> Iterator[NsProject]:
    """A project with ``.agentd`` inside a private mount namespace (mount what the test needs on it first)."""
    need_root()
    ns = MountNamespace()
    root = tmp_path / "proj"
    proj = NsProject(root)
    proj.ns = ns
    proj.state_override = ns.view(root / ".agentd")
    try:
        yield proj
    finally:
        try:
            proj.cleanup()
        finally:
            ns.close()


def fill(path: Path, chunk: int = 1 << 16) -> int:
    """Write zeros to ``path`` until the filesystem is full; the bytes written."""
    total = 0
    with open(path, "wb", buffering=0) as f:
        block = b"\0" * chunk
        while True:
            try:
                total += f.write(block) or 0
            except OSError:
                if chunk == 1:
                    return total
                chunk //= 16
                block = b"\0" * max(1, chunk)
                chunk = len(block)


PYTHON = sys.executable
