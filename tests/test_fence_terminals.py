"""Terminals and capabilities inside the fence: only the agent's own terminal, no keystrokes into another's.

Every unit's agent has a PTY, and every PTY is a file in ``/dev/pts`` that the
daemon's uid owns.  Without care, a fenced agent could write into another
unit's terminal (what that unit's viewers and transcript then show as its
output) or, as root (``CAP_SYS_ADMIN``, ``dev.tty.legacy_tiocsti``), push
keystrokes into it with ``TIOCSTI`` from a descriptor opened read-only, which
Landlock does not mediate.  A probe runs in a fenced child whose standard
streams are its own PTY, as an agent's are, next to a victim PTY of the test's.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import pytest

from supervisor.session.caps import KEEP_CAPS
from supervisor.session.fence import Fence, FenceSpec, agent_spec, availability
from supervisor.session.mountview import View, ViewSpec, view_mode

pytestmark = pytest.mark.skipif(not availability().available, reason="the kernel offers no Landlock")

CAP_SYS_ADMIN, CAP_MKNOD = 21, 27

PROBE = textwrap.dedent("""
    import errno, fcntl, json, os, sys, termios

    def run(op, *args):
        try:
            if op == "write":
                fd = os.open(args[0], os.O_WRONLY | os.O_NOCTTY)
                os.write(fd, b"FAKE OUTPUT\\r\\n")
                os.close(fd)
            elif op == "tiocsti":
                fd = os.open(args[0], os.O_RDONLY | os.O_NOCTTY)
                try:
                    for ch in b"typed\\n":
                        fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
                finally:
                    os.close(fd)
            elif op == "openpty":
                master, slave = os.openpty()
                os.write(slave, b"mine\\n")
                got = os.read(master, 100)
                return "ok" if b"mine" in got else f"read {got!r}"
            elif op == "ttyname":
                return os.ttyname(0)
            elif op == "capbnd":
                for line in open("/proc/self/status"):
                    if line.startswith("CapBnd:"):
                        return int(line.split()[1], 16)
            elif op == "list":
                return sorted(os.listdir(args[0]))
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    print(json.dumps({op[0] + (":" + str(op[1]) if len(op) > 1 else ""): run(*op) for op in json.loads(sys.argv[1])}))
""")


def _probe(tmp: Path, steps: list, ops: list[list[object]]) -> dict:
    """Run the probe with its own PTY as its controlling terminal and stdio, after ``steps`` (view, fence)."""
    probe = tmp / "probe.py"
    probe.write_text(PROBE)
    master, slave = pty.openpty()
    out = tmp / "out.json"

    def child() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        for step in steps:
            step()

    try:
        with open(out, "w") as fh:
            proc = subprocess.run([sys.executable, str(probe), json.dumps(ops)], stdin=slave, stdout=fh,
                                  stderr=subprocess.DEVNULL, preexec_fn=child, timeout=60,
                                  pass_fds=tuple(fd for s in steps for fd in s.fds))
        assert proc.returncode == 0, proc
    finally:
        for step in steps:
            step.close()
        os.close(master)
        os.close(slave)
    return json.loads(out.read_text())


@pytest.fixture
def victim():
    master, slave = pty.openpty()
    os.set_blocking(slave, False)
    yield os.ttyname(slave), master, slave
    os.close(master)
    os.close(slave)


def _nothing_reached(master: int, slave: int) -> None:
    os.set_blocking(master, False)
    for fd, what in ((slave, "typed into"), (master, "written to")):
        try:
            data = os.read(fd, 1000)
        except BlockingIOError:
            data = b""
        assert not data, f"the probe {what} the victim's terminal: {data!r}"


def test_without_a_view_only_its_own_terminal_is_writable_and_tiocsti_is_refused(tmp_path: Path, victim) -> None:
    path, master, slave = victim
    fence = Fence.build(agent_spec(scope=FenceSpec.of([tmp_path])), terminals="own")
    got = _probe(tmp_path, [fence], [["write", path], ["tiocsti", path], ["write", "/dev/tty"], ["ttyname"],
                                     ["capbnd"]])
    assert got[f"write:{path}"] == "EACCES"  # another terminal: the fence refuses the write
    assert got[f"tiocsti:{path}"] in ("EPERM", "EIO")  # no CAP_SYS_ADMIN: only its own terminal takes keystrokes
    assert got["write:/dev/tty"] == "ok"
    own = got["ttyname"]
    assert own.startswith("/dev/pts/") and own != path
    own_write = _probe(tmp_path, [Fence.build(agent_spec(scope=FenceSpec.of([tmp_path])), terminals="own")],
                       [["write", "/dev/stdin"]])
    assert own_write["write:/dev/stdin"] == "ok"  # its own PTY, by its path
    _nothing_reached(master, slave)


def test_a_fenced_root_keeps_only_ordinary_capabilities(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the bounding set is root's to change")
    fence = Fence.build(agent_spec(scope=FenceSpec.of([tmp_path])), terminals="own")
    bounding = _probe(tmp_path, [fence], [["capbnd"]])["capbnd"]
    assert not bounding & (1 << CAP_SYS_ADMIN)
    assert not bounding & (1 << CAP_MKNOD)  # a block device made in the scope would be the whole disk
    assert bounding & (1 << 0) and bounding & (1 << 1)  # CHOWN, DAC_OVERRIDE: root still works as root
    assert {c for c in range(64) if bounding & (1 << c)} <= KEEP_CAPS
    unfenced = _probe(tmp_path, [], [["capbnd"]])["capbnd"]
    assert unfenced & (1 << CAP_SYS_ADMIN)  # the probe itself would have had it


def test_with_the_view_no_other_terminal_is_visible_and_new_ones_work(tmp_path: Path, victim) -> None:
    mode = view_mode()
    if not mode.available:
        pytest.skip(mode.reason)
    path, master, slave = victim
    view = View(ViewSpec.of(None, private_pts=True), mode)
    fence = Fence.build(agent_spec(scope=FenceSpec.of([tmp_path])), terminals="private")
    got = _probe(tmp_path, [view, fence], [["write", path], ["tiocsti", path], ["list", "/dev/pts"],
                                           ["openpty"], ["write", "/dev/tty"]])
    assert got[f"write:{path}"] == "ENOENT" and got[f"tiocsti:{path}"] == "ENOENT"
    assert os.path.basename(path) not in got["list:/dev/pts"]  # not even its name
    assert got["openpty"] == "ok"  # script, tmux, expect: a terminal of its own, in its own devpts
    assert got["write:/dev/tty"] == "ok"  # its controlling terminal still works
    _nothing_reached(master, slave)
