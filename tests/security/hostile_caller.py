"""What a prompt-injected agent tries on agentd's control socket: run by the fake agent, inside its fence.

``python tests/security/hostile_caller.py RESULTS OTHER OTHER_SESSION DAEMON_PID``

Every request goes over the raw protocol (a length-prefixed JSON object), from
the agent's own process tree and from processes that tried to look like
someone else: a ``setsid`` orphan, an orphan that kept its session, a child
placed in the other unit's cgroup with ``clone3(CLONE_INTO_CGROUP)`` (the
kernel allows it, Landlock or not), ``agentd`` itself run with forged
``AGENTD_UNIT``/``AGENTD_SESSION``, a connection through ``/proc/DAEMON/root``.
It also tries to take the daemon's descriptors (``pidfd_getfd``,
``/proc/DAEMON/fd``).  One JSON line per case is appended to RESULTS:
``{"case": ..., "cmd": ..., "reply": ...}`` (or ``"error"`` for an OSError).
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESULTS, OTHER, OTHER_SESSION, DAEMON = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
SOCK = os.environ["AGENTD_SOCKET"]
ME = os.environ["AGENTD_UNIT"]
MARK = "FROM-A-"  # in every text this agent tries to type anywhere


def record(case: str, **data: object) -> None:
    with open(RESULTS, "a", encoding="utf-8") as f:
        f.write(json.dumps({"case": case, **data}) + "\n")


def request(cmd: str, path: str = SOCK, **args: object) -> dict:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(path)
        body = json.dumps({"cmd": cmd, "args": args}).encode()
        sock.sendall(struct.pack(">I", len(body)) + body)
        (size,) = struct.unpack(">I", _exactly(sock, 4))
        return json.loads(_exactly(sock, size))


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def attempt(case: str, cmd: str, path: str = SOCK, **args: object) -> None:
    try:
        record(case, cmd=cmd, reply=request(cmd, path, **args))
    except OSError as exc:
        record(case, cmd=cmd, error=f"{type(exc).__name__}: {exc}")


#: Every command a unit must not run for another unit, or at all.
FORBIDDEN: list[tuple[str, dict]] = [
    ("send", {"unit": OTHER, "text": MARK + "send"}),
    ("send", {"unit": OTHER, "text": MARK + "raw\r", "raw": True}),
    ("queue", {"unit": OTHER, "text": MARK + "queue"}),
    ("stop", {"units": [OTHER], "now": True}),
    ("start", {"units": [OTHER]}),
    ("restart", {"units": [OTHER], "now": True}),
    ("checkpoint", {"unit": OTHER}),
    ("reset-failed", {"units": [OTHER]}),
    ("status", {"units": [OTHER]}),
    ("status", {"units": [ME, OTHER]}),
    ("agent-event", {"unit": OTHER, "event": {"type": "agent-turn-complete"}}),
    ("agent-event", {"unit": ME, "session": OTHER_SESSION, "event": {"type": "agent-turn-complete"}}),
    ("attach", {"unit": OTHER, "raw": True}),
    ("attach", {"unit": OTHER, "read_only": True}),
    ("attach", {"unit": ME, "read_only": True}),
    ("send", {"unit": ME, "text": MARK + "self"}),
    # the daemon itself
    ("stop", {"now": True}),
    ("start", {}),
    ("restart", {"now": True}),
    ("reset-failed", {}),
    ("reload", {}),
    ("web", {}),
    ("web", {"stop": True}),
    ("broadcast", {"text": MARK + "broadcast", "origin": OTHER}),
    ("shutdown", {"now": True}),
]


def from_here(prefix: str) -> None:
    for cmd, args in FORBIDDEN:
        attempt(f"{prefix}forbidden", cmd, **args)
    attempt(f"{prefix}allowed", "ping")
    attempt(f"{prefix}allowed", "status")
    attempt(f"{prefix}allowed", "agent-event", unit=ME, event={})


def in_child(case: str, body: Callable[[], None], *, setsid: bool, orphan: bool) -> None:
    """Run ``body`` in a grandchild: in a session of its own or not; with its parent gone (adopted) or alive."""
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the middle process
        if setsid:
            os.setsid()
        middle = os.getpid()
        if os.fork() == 0:  # the grandchild
            if orphan:
                deadline = time.monotonic() + 10
                while os.getppid() == middle and time.monotonic() < deadline:
                    time.sleep(0.01)
            try:
                record(case, adopted_by_daemon=os.getppid() == DAEMON, own_session=os.getsid(0) == middle)
                body()
            finally:
                os.write(done_w, b"x")
                os._exit(0)
        if not orphan:
            os.wait()
        os._exit(0)
    os.close(done_w)
    os.waitpid(pid, 0)
    os.read(done_r, 1)  # until the grandchild is done
    os.close(done_r)


def from_orphans() -> None:
    def probe(prefix: str) -> Callable[[], None]:
        def body() -> None:
            attempt(prefix, "ping")
            attempt(prefix, "status")
            attempt(prefix, "send", unit=OTHER, text=MARK + prefix)
            attempt(prefix, "agent-event", unit=OTHER, event={})
        return body

    in_child("setsid-orphan", probe("setsid-orphan"), setsid=True, orphan=True)
    in_child("orphan", probe("orphan"), setsid=False, orphan=True)
    in_child("setsid-child", probe("setsid-child"), setsid=True, orphan=False)


CLONE_INTO_CGROUP = 0x200000000


def into_cgroup(group: Path) -> None:
    """A child started in ``group`` by clone3(CLONE_INTO_CGROUP): what it is told when it asks for status."""
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    args = struct.pack("11Q", CLONE_INTO_CGROUP, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)
    libc = ctypes.CDLL(None, use_errno=True)
    pid = libc.syscall(435, ctypes.create_string_buffer(args), len(args))
    if pid == 0:
        try:
            with open("/proc/self/cgroup") as f:
                where = next(line[3:].strip() for line in f if line.startswith("0::"))
            record("clone3-cgroup", group=where)
            attempt("clone3", "status")
            attempt("clone3", "agent-event", unit=OTHER, event={})
        finally:
            os._exit(0)
    if pid < 0:
        record("clone3-cgroup", error=os.strerror(ctypes.get_errno()))
        return
    os.waitpid(pid, 0)


def other_group() -> Path | None:
    with open("/proc/self/cgroup") as f:
        mine = next(line[3:].strip() for line in f if line.startswith("0::"))
    for mount in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        here = Path(mount + mine)
        if (here / "cgroup.procs").exists() and "@" in here.name:
            found = [p for p in here.parent.iterdir() if p.name.startswith(OTHER + "@")]
            return found[0] if found else None
    return None


def forged_environment() -> None:
    env = dict(os.environ, AGENTD_UNIT=OTHER, AGENTD_SESSION=OTHER_SESSION)
    agentd = [sys.executable, "-m", "supervisor"]
    for case, argv in (("forged-notify", [*agentd, "notify", "--unit", OTHER, "{}"]),
                       ("forged-status", [*agentd, "status", "--json"]),
                       ("cli-task", [*agentd, "task", OTHER, MARK + "task"])):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        record(case, code=proc.returncode, stdout=proc.stdout[-4000:], stderr=proc.stderr[-4000:])


def daemon_descriptors() -> None:
    try:
        listing = os.listdir(f"/proc/{DAEMON}/fd")
    except OSError as exc:
        listing = [f"{type(exc).__name__}: {exc}"]
    links, opened = {}, {}
    for name in listing:
        for what, call in (("readlink", os.readlink), ("open", lambda p: os.close(os.open(p, os.O_RDONLY)))):
            try:
                call(f"/proc/{DAEMON}/fd/{name}")
                result = "ok"
            except OSError as exc:
                result = exc.errno
            (links if what == "readlink" else opened)[name] = result
    record("proc-fd", listing=listing, readlink=links, open=opened)
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pidfd = os.pidfd_open(DAEMON)
    except OSError as exc:
        record("pidfd_getfd", error=f"pidfd_open: {exc}")
        return
    got = []
    for target in range(3, 64):
        fd = libc.syscall(438, pidfd, target, 0)  # pidfd_getfd
        got.append(fd if fd >= 0 else -ctypes.get_errno())
    os.close(pidfd)
    record("pidfd_getfd", results=sorted(set(got)))
    here = os.getcwd()
    try:  # the daemon's socket through the daemon's own root (relative: a /proc path is too long for sun_path)
        os.chdir(f"/proc/{DAEMON}/root{os.path.dirname(SOCK)}")
    except OSError as exc:
        record("via-proc-root", cmd="send", error=f"{type(exc).__name__}: {exc}")
    else:
        attempt("via-proc-root", "send", path=os.path.basename(SOCK), unit=OTHER, text=MARK + "proc-root")
    finally:
        os.chdir(here)


def exits_before_reply() -> None:
    """Connect, ask, and exit at once: the daemon must not act for a process it can no longer pin."""
    pid = os.fork()
    if pid == 0:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(SOCK)
        body = json.dumps({"cmd": "send", "args": {"unit": OTHER, "text": MARK + "gone"}}).encode()
        sock.sendall(struct.pack(">I", len(body)) + body)
        os._exit(0)
    os.waitpid(pid, 0)
    record("exits-before-reply", done=True)


def main() -> None:
    from_here("")
    from_orphans()
    group = other_group()
    if group is not None:
        into_cgroup(group)
    forged_environment()
    daemon_descriptors()
    exits_before_reply()
    record("done")


if __name__ == "__main__":
    main()
