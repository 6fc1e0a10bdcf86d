"""Speed targets the test suite used to assert (tests check behaviour; speed lives here).

``python -m bench.micro [--runs N] [--check]`` prints, for each, the median and
the worst of N runs against its target; ``--check`` exits 1 when a median
misses its target.

* ``tail``: :func:`supervisor.memory.tail.tail_lines` of the last 5 lines of
  a 100,000-line (~5.6 MB) decision log: target under 50 ms (a whole-file read
  and split takes far longer).  tests/memory/test_decisions.py checks that it
  reads only the end of the file.
* ``watch``: a file written in a watched project until the scope guard's
  :class:`~supervisor.scope.watcher.ChangeWatcher` reports it (debounce
  0.2 s; inotify itself is immediate): target under 2 s.
  tests/test_scopeguard.py checks that it is reported.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from supervisor.memory.tail import tail_lines
from supervisor.scope.watcher import ChangeWatcher

LINE = "[2026-11-30 14:32] decision: x | why: because a, so b\n"


def tail_seconds(directory: Path) -> Callable[[], float]:
    path = directory / "big.log"
    path.write_text(LINE * 100_000 + "[2026-11-30 14:33] decision: last | why: because a, so b\n")

    def once() -> float:
        start = time.perf_counter()
        got = tail_lines(path, 5)
        elapsed = time.perf_counter() - start
        assert "last" in got[-1].text
        return elapsed

    return once


def watch_seconds(directory: Path) -> Callable[[], float]:
    root = directory / "proj"
    (root / "src").mkdir(parents=True)
    seen: list[str] = []
    cond = threading.Condition()

    def on_change(rel: str) -> None:
        with cond:
            seen.append(rel)
            cond.notify_all()

    watcher = ChangeWatcher(root, on_change)
    watcher.start()
    counter = iter(range(1_000_000))

    def once() -> float:
        name = f"src/f{next(counter)}.py"
        start = time.perf_counter()
        (root / name).write_text("x\n")
        with cond:
            if not cond.wait_for(lambda: name in seen, 30):
                raise RuntimeError(f"{name} was not reported within 30 s")
        return time.perf_counter() - start

    once.stop = watcher.stop  # type: ignore[attr-defined]
    return once


CASES: dict[str, tuple[Callable[[Path], Callable[[], float]], float]] = {
    "tail": (tail_seconds, 0.05),
    "watch": (watch_seconds, 2.0),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 when a median misses its target")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    missed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, target) in CASES.items():
            directory = Path(tmp) / name
            directory.mkdir()
            once = make(directory)
            try:
                times = [once() for _ in range(args.runs)]
            finally:
                getattr(once, "stop", lambda: None)()
            median = statistics.median(times)
            ok = median < target
            if not ok:
                missed.append(name)
            print(f"{name:>6}: median {median * 1000:8.1f} ms, worst {max(times) * 1000:8.1f} ms "
                  f"(target < {target * 1000:.0f} ms: {'met' if ok else 'NOT MET'})")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
