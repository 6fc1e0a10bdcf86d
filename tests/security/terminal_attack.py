"""What a prompt-injected agent tries on the other units' terminals and on the daemon: run inside its fence.

``python tests/security/terminal_attack.py RESULTS OTHER_PTY OTHER_PID DAEMON_PID``

OTHER_PTY is the other unit's terminal (``/dev/pts/N`` as the daemon sees it),
OTHER_PID its agent.  Each try is one JSON line in RESULTS: ``{"case": ...,
"result": "ok" | errno name | value}``.  The texts it tries to plant carry
``FROM-A-``, so the test can look for them where they must not be.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import termios

RESULTS, OTHER_PTY, OTHER_PID, DAEMON = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def record(case: str, result: object) -> None:
    with open(RESULTS, "a", encoding="utf-8") as f:
        f.write(json.dumps({"case": case, "result": result}) + "\n")


def attempt(case: str, fn) -> None:
    try:
        result = fn()
    except OSError as exc:
        result = errno.errorcode.get(exc.errno or 0, str(exc))
    record(case, "ok" if result is None else result)


def write_to(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
    try:
        os.write(fd, b"\r\nFROM-A-FAKE-OUTPUT: all tests pass\r\n")
    finally:
        os.close(fd)


def type_into(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_NOCTTY)
    try:
        for ch in b"echo FROM-A-TYPED\r":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
    finally:
        os.close(fd)


def capabilities() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("CapBnd:"):
            return int(line.split()[1], 16)
    return -1


attempt("write-other-pty", lambda: write_to(OTHER_PTY))
attempt("tiocsti-other-pty", lambda: type_into(OTHER_PTY))
attempt("tiocsti-other-via-proc-fd", lambda: type_into(f"/proc/{OTHER_PID}/fd/0"))
attempt("write-other-via-proc-fd", lambda: write_to(f"/proc/{OTHER_PID}/fd/1"))
attempt("list-pts", lambda: sorted(os.listdir("/dev/pts")))
for name in sorted(os.listdir("/dev/pts")):  # whatever terminals it can see: none is the other unit's
    if name.isdigit():
        attempt(f"write-pts-{name}", lambda n=name: write_to(f"/dev/pts/{n}"))
attempt("own-terminal", lambda: write_to("/dev/tty"))
attempt("new-terminal", lambda: (lambda m, s: (os.write(s, b"x\n"), os.close(m), os.close(s)))(*os.openpty()) and None)
attempt("capabilities", capabilities)
attempt("signal-daemon", lambda: os.kill(DAEMON, 0))
attempt("daemon-environ", lambda: open(f"/proc/{DAEMON}/environ", "rb").read(10) and None)
record("done", True)
