"""The benchmark child: writes lines to stdout at a given rate, in bursts, and counts them.

The same program runs under both supervisors (supervisord: a pipe into its
log file; agentd: a PTY into the transcript).  Standard library only, so any
interpreter can run it::

    child.py --rate 20000 --duration 20 [--line 100] [--burst-ms 20]
    child.py --flood 100000000          # as fast as possible
    child.py --idle                     # print one line, then sleep

``--ready FILE`` is created once the child runs; with ``--go FILE`` the child
waits until that file exists before it writes (so every child starts at the
same moment and the supervisor's start-up cost stays out of the figure).
``--count FILE`` receives ``{"bytes": B, "lines": L, "start": t0, "end": t1}``
(wall-clock seconds) once everything has been written.  After that the child
sleeps until ``--linger`` seconds have passed (default: forever), so neither
supervisor has an exit to handle while it is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def line(seq: int, size: int) -> bytes:
    head = f"{seq:09d} agent output line "
    body = (head + "abcdefghijklmnopqrstuvwxyz0123456789 " * (size // 37 + 1))[: size - 1]
    return body.encode() + b"\n"


def stream(rate: int, duration: float, size: int, burst_ms: float) -> tuple[int, int]:
    """``rate`` bytes/s of ``size``-byte lines, one burst every ``burst_ms``."""
    per_burst = max(1, round(rate * burst_ms / 1000 / size))
    interval = burst_ms / 1000
    seq = written = 0
    start = time.monotonic()
    tick = start
    while True:
        now = time.monotonic()
        if now - start >= duration:
            break
        write_all(b"".join(line(seq + i, size) for i in range(per_burst)))
        seq += per_burst
        written += per_burst * size
        tick += interval
        delay = tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return written, seq


def flood(total: int, size: int) -> tuple[int, int]:
    block = b"".join(line(i, size) for i in range(max(1, 65536 // size)))
    written = lines = 0
    per_block = block.count(b"\n")
    while written + len(block) <= total:
        write_all(block)
        written += len(block)
        lines += per_block
    return written, lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=20_000, help="bytes per second")
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--line", type=int, default=100, help="bytes per line, newline included")
    p.add_argument("--burst-ms", type=float, default=20.0)
    p.add_argument("--flood", type=int, metavar="BYTES")
    p.add_argument("--idle", action="store_true")
    p.add_argument("--ready")
    p.add_argument("--go")
    p.add_argument("--count")
    p.add_argument("--linger", type=float, default=None, help="seconds to stay alive after writing (default: forever)")
    args = p.parse_args(argv)
    born = time.monotonic()
    if args.ready:
        with open(args.ready, "w") as fh:
            fh.write(str(os.getpid()))
    if args.go:
        while not os.path.exists(args.go):
            time.sleep(0.02)
    start = time.time()
    if args.idle:
        written, lines = 0, 0
        write_all(b"idle child ready\n")
        written, lines = 17, 1
    elif args.flood is not None:
        written, lines = flood(args.flood, args.line)
    else:
        written, lines = stream(args.rate, args.duration, args.line, args.burst_ms)
    end = time.time()
    if args.count:
        tmp = args.count + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"bytes": written, "lines": lines, "start": start, "end": end}, fh)
        os.replace(tmp, args.count)
    while args.linger is None or time.monotonic() - born < args.linger:
        time.sleep(3600 if args.linger is None else min(1.0, args.linger))
    return 0


if __name__ == "__main__":
    sys.exit(main())
