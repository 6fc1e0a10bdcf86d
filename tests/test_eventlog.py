"""The event log under faults (issue 13 items 3 and 4): repeated errors rate-limited, lines whole or none."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import structlog

from supervisor.daemon.eventlog import RateLimit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _through(limit: RateLimit, level: str, event: str, **fields: Any) -> dict[str, Any] | None:
    try:
        return limit(None, level, {"event": event, "level": level, **fields})
    except structlog.DropEvent:
        return None


def test_the_same_error_is_written_once_per_interval_with_a_count_of_the_rest() -> None:
    clock = Clock()
    limit = RateLimit(interval=60, clock=clock)
    assert _through(limit, "error", "accept_failed", error="EMFILE") is not None
    for _ in range(500):
        clock.now += 0.01
        assert _through(limit, "error", "accept_failed", error="EMFILE") is None
    assert _through(limit, "error", "accept_failed", error="ENFILE") is not None  # another error is news
    assert _through(limit, "warning", "other_event", error="EMFILE") is not None  # another event too
    assert _through(limit, "info", "unit_state", error="EMFILE") is not None  # info is never limited
    assert _through(limit, "info", "unit_state", error="EMFILE") is not None
    clock.now += 60
    again = _through(limit, "error", "accept_failed", error="EMFILE")
    assert again is not None and again["suppressed"] == 500
    clock.now += 60
    assert "suppressed" not in (_through(limit, "error", "accept_failed", error="EMFILE") or {})


def test_an_exception_is_the_error_when_none_is_given() -> None:
    limit = RateLimit(interval=60, clock=Clock())
    assert _through(limit, "error", "tick_failed", exc_info=ValueError("a")) is not None
    assert _through(limit, "error", "tick_failed", exc_info=ValueError("a")) is None
    assert _through(limit, "error", "tick_failed", exc_info=ValueError("b")) is not None


FULL_FILE = textwrap.dedent("""
    import resource, sys
    from pathlib import Path
    import structlog
    from supervisor.daemon import eventlog
    path = Path(sys.argv[1])
    eventlog.configure(path, "info")
    log = structlog.get_logger("agentd")
    resource.setrlimit(resource.RLIMIT_FSIZE, (3000, resource.RLIM_INFINITY))  # the disk "fills up" at 3000 bytes
    for i in range(100):
        log.info("filler", n=i, padding="x" * 50)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # space returns
    log.info("after", n=100)
    print("no exception reached the caller")
""")


def test_a_full_disk_never_tears_a_line_nor_raises_and_the_dropped_lines_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "agentd.log"
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", FULL_FILE, str(path)], capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0 and "no exception reached the caller" in result.stdout, result.stderr
    lines = path.read_bytes().splitlines()
    events = [json.loads(line) for line in lines]  # every line whole
    kept = [e["n"] for e in events if e["event"] == "filler"]
    assert kept == list(range(len(kept))) and 0 < len(kept) < 100
    dropped = next(e for e in events if e["event"] == "log_lines_dropped")
    assert dropped["count"] == 100 - len(kept) and dropped["error"] in ("EFBIG", "short write (disk full?)")
    assert events[-1]["event"] == "after"


@pytest.fixture(autouse=True)
def _reset_structlog() -> Any:
    yield
    structlog.reset_defaults()
