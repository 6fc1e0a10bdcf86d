"""Another unit's terminal is out of a fenced agent's reach, and the daemon cannot be ptraced (issue 25).

Two fenced fake agents, ``a`` and ``b``; ``a`` runs
tests/security/terminal_attack.py with ``b``'s terminal as the daemon sees it.
Before the fix ``/dev/pts`` was writable inside the fence: ``a`` wrote a fake
"all tests pass" into ``b``'s terminal (what ``b``'s viewers and transcript
show), and as root typed a command into it with ``TIOCSTI`` from a descriptor
opened read-only (``CAP_SYS_ADMIN``; ``dev.tty.legacy_tiocsti`` is 1 here).
Now ``a`` has a ``/dev/pts`` of its own (its view) and, as root, no
``CAP_SYS_ADMIN``.  The daemon itself is undumpable: a process of its uid
without ``CAP_SYS_PTRACE`` (a Codex unit in its own sandbox) cannot read its
memory or environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.session.mountview import view_mode
from tests.conftest import Project, wait_until

ATTACK = Path(__file__).with_name("terminal_attack.py")


def _results(path: Path) -> dict[str, object]:
    return {r["case"]: r["result"] for r in map(json.loads, path.read_text().splitlines()) if r}


@pytest.mark.skipif(not view_mode().available, reason="no mount namespace here: the private /dev/pts needs one")
def test_a_fenced_agent_cannot_write_or_type_into_another_units_terminal(project: Project) -> None:
    results = project.root.parent / "terminal-results.jsonl"
    results.touch()
    for name in ("a", "b"):
        project.fake_unit(name, writable=(str(results),))
    project.agentd("start")
    a, b = project.wait_state("a", "running"), project.wait_state("b", "running")
    assert a["scope"].startswith("fenced")
    other_pty = os.readlink(f"/proc/{b['pid']}/fd/0")
    assert other_pty.startswith("/dev/pts/")
    daemon = project.daemon_pid()
    project.agentd("send", "a", f"run python {ATTACK} {results} {other_pty} {b['pid']} {daemon}")
    got = wait_until(lambda: (r := _results(results)).get("done") and r, 60, what="the attack to finish")

    assert got["write-other-pty"] == "ENOENT" and got["tiocsti-other-pty"] == "ENOENT"  # not even there
    assert got["tiocsti-other-via-proc-fd"] == "EACCES" and got["write-other-via-proc-fd"] == "EACCES"
    assert got["list-pts"] == ["ptmx"]  # a devpts of its own: no terminal but those it opens
    assert got["own-terminal"] == "ok" and got["new-terminal"] == "ok"  # its own terminal and new ones work
    if os.geteuid() == 0:
        assert not int(got["capabilities"]) & (1 << 21)  # CAP_SYS_ADMIN: TIOCSTI into any terminal
    assert got["signal-daemon"] == "EPERM" and got["daemon-environ"] == "EACCES"

    # b got nothing: no keystroke reached its agent, no fake output is in its transcript
    project.agentd("send", "b", "echo b-still-here")
    wait_until(lambda: "echo b-still-here" in project.last_inputs("b"), 30, what="the operator's send to b")
    assert not any("FROM-A" in m for s in project.inputs("b") for m in s), project.inputs("b")
    assert "FROM-A" not in project.transcript("b") and "FROM-A" not in project.transcript("b", suffix=".log")
    assert project.unit_status("b")["pid"] == b["pid"]


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c"]
TARGET = ("import sys; sys.path.insert(0, {root!r}); from supervisor.session.lineage import mark_daemon; "
          "{mark}print('ready', flush=True); sys.stdin.read()")
PTRACE = ("import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); pid = int(sys.argv[1]); "
          "r = libc.ptrace(16, pid, 0, 0); print('ok' if r == 0 else os.strerror(ctypes.get_errno())); "
          "r == 0 and (os.waitpid(pid, 0), libc.ptrace(17, pid, 0, 0))")


def _ptraced(mark: bool) -> str:
    """A process of uid nobody (as the daemon, with or without mark_daemon) ptraced by another one of uid nobody."""
    root = str(Path(__file__).resolve().parents[2])
    target = subprocess.Popen([*NOBODY, TARGET.format(root=root, mark="mark_daemon(); " if mark else "")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline().strip() == "ready"
        probe = subprocess.run([*NOBODY, PTRACE, str(target.pid)], capture_output=True, text=True, timeout=60)
        return probe.stdout.strip() or probe.stderr
    finally:
        target.kill()
        target.wait()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to run as another user")
def test_the_daemon_is_not_dumpable_so_its_uid_cannot_ptrace_it(project: Project) -> None:
    """What Landlock does for fenced agents, PR_SET_DUMPABLE does for every other process of the daemon's uid
    (a Codex unit in its own sandbox): no ptrace, no /proc/PID/mem.  Proved as uid nobody (root's
    CAP_SYS_PTRACE would pass anyway), then that the real daemon runs the same call."""
    assert _ptraced(mark=False) == "ok"  # the same uid may ptrace an ordinary process
    assert _ptraced(mark=True) == "Operation not permitted"
    project.fake_unit("u")
    project.agentd("start")
    project.wait_state("u", "running")
    daemon = project.daemon_pid()
    assert Path(f"/proc/{daemon}/comm").read_text().strip() == "agentd-daemon"  # mark_daemon ran in the daemon
