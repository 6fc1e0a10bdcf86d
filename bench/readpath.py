"""The read path alone: one :class:`~supervisor.session.pty.Session` reading a flooding child, in this process.

``python -m bench.readpath [MB] [--profile FILE]`` prints MB/s and MB per CPU-second of this
process (the daemon's read path without the daemon: PTY reads, redaction, clean
text, both files, a screen listener), for profiling changes to
``supervisor/session/pty.py`` and ``transcript.py`` before the full bench.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from supervisor.session.pty import Session
from supervisor.session.screen import Screen

CHILD = str(Path(__file__).resolve().parent / "child.py")


async def flood(size: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        argv = [sys.executable, CHILD, "--ready", str(base / "ready"), "--go", str(base / "go"),
                "--count", str(base / "count"), "--flood", str(size), "--linger", "0"]
        session = Session("flood", argv, env=dict(os.environ), cwd=base, rows=40, cols=120,
                          transcript_dir=base / "t", redact_env={})
        screen = Screen(40, 120)
        session.add_listener(screen.feed)
        session.spawn()
        session.attach(asyncio.get_running_loop())
        while not (base / "ready").exists():
            await asyncio.sleep(0.01)
        cpu0, t0 = time.process_time(), time.monotonic()
        (base / "go").touch()
        while not session.eof:
            await asyncio.sleep(0.005)
        t1, cpu1 = time.monotonic(), time.process_time()
        session.close()
        got = session.transcript.log_path.stat().st_size
        return {"mb_per_s": size / (t1 - t0) / 1e6, "mb_per_cpu_s": size / (cpu1 - cpu0) / 1e6, "log_bytes": got}


def main(argv: list[str]) -> int:
    size = int(float(argv[0]) * 1e6) if argv and not argv[0].startswith("-") else 50_000_000
    if "--profile" in argv:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        result = asyncio.run(flood(size))
        prof.disable()
        prof.dump_stats(argv[argv.index("--profile") + 1])
    else:
        result = asyncio.run(flood(size))
    print(f"{result['mb_per_s']:.1f} MB/s, {result['mb_per_cpu_s']:.1f} MB per CPU-s, log {result['log_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
