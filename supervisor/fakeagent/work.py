"""What the fake agent prints and starts: deterministic work lines, the numbered flood, grandchildren."""

from __future__ import annotations

import subprocess
import sys

from .terminal import out

_FLOOD_LINE_BODY = b" the quick brown fox jumps over the lazy dog 0123456789\n"
_GRANDCHILD_CODE = "import time\nwhile True:\n    time.sleep(3600)\n"


def flood_payload(n: int, start: int = 0) -> bytes:
    """Bytes ``start``..``start+n`` of the infinite flood stream.

    The stream is 64-byte lines ``"%08d" + _FLOOD_LINE_BODY`` numbered from 0,
    so any prefix is deterministic and checkable.
    """
    line_len = 8 + len(_FLOOD_LINE_BODY)
    first, skip = divmod(start, line_len)
    count = -(-(skip + n) // line_len)
    block = b"".join(b"%08d%s" % (i, _FLOOD_LINE_BODY) for i in range(first, first + count))
    return block[skip:skip + n]


def flood(n: int) -> None:
    """Write exactly ``n`` payload bytes to stdout, in 64 KiB pieces."""
    done = 0
    while done < n:
        piece = flood_payload(min(1 << 16, n - done), done)
        out(piece)
        done += len(piece)


_WORK_TEMPLATES = (
    ("Reading", "src/module_{i}.py", "36"),
    ("Editing", "src/module_{i}.py: +{a} -{b}", "33"),
    ("Running", "pytest tests/test_module_{i}.py -q", "35"),
    ("Passed", "{a} tests in 0.{b}s", "32"),
    ("Thinking", "about step {i} of the plan", "90"),
)


def work_lines(n: int, color: bool = False, offset: int = 0) -> list[str]:
    """``n`` deterministic lines of plausible agent output."""
    lines = []
    for i in range(offset, offset + n):
        verb, detail, code = _WORK_TEMPLATES[i % len(_WORK_TEMPLATES)]
        detail = detail.format(i=i, a=(i * 7) % 50 + 1, b=(i * 3) % 10)
        if color:
            lines.append(f"\x1b[1;{code}m{verb}\x1b[0m {detail}")
        else:
            lines.append(f"{verb} {detail}")
    return lines


def spawn_grandchild(new_session: bool) -> int:
    """Start a long-lived sleeping Python child; with ``new_session`` it calls setsid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _GRANDCHILD_CODE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=new_session,  # setsid() in the child before exec
    )
    return proc.pid
