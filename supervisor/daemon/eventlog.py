"""structlog set-up: every daemon event as a JSON line in the state directory.

In the foreground with ``log_format = "console"`` the same events are also
printed, pretty, to stderr.  Secrets are redacted
(:func:`~supervisor.session.redact.redact_text`, every shape of
:mod:`supervisor.session.shapes`): each string value before the event is
encoded (JSON escaping would split a multi-line key block or a key with escape
codes inside), then the whole line.

Faults never make the log a problem of its own (issue 13):

* **Whole lines or nothing.**  Each line is one ``write``; a short write (a
  disk that fills up in the middle of it) is cut back with ``ftruncate``, so
  ``agentd.log`` never holds a torn JSON line.  A line that cannot be written
  is dropped, never raised into the code that logged it; the next line that
  can be written is preceded by ``log_lines_dropped`` with the count and why.
* **Repeated errors are rate-limited** (:class:`RateLimit`): the same event
  with the same error is written at most once per :data:`REPEAT_INTERVAL`
  seconds; the next one written carries ``suppressed=N``, the lines left out.
  Warnings and errors only: state changes are always written.
* The event loop's own errors (an exception in a callback) and the warnings
  of libraries (stdlib :mod:`logging`) come through the same chain, so they
  are rate-limited and land in ``agentd.log`` too, not in ``agentd.err``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import structlog

from ..session.redact import redact_text, redact_value

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

#: Seconds during which the same event with the same error is written once.
REPEAT_INTERVAL = 60.0
#: Distinct (event, error) pairs remembered; the oldest are forgotten beyond it.
REPEAT_KEYS = 1024

log = structlog.get_logger("agentd")


def _error_of(event: dict[str, Any]) -> str:
    """What distinguishes one failure from another of the same event: its error, or its exception."""
    if event.get("error") is not None:
        return str(event["error"])
    exc = event.get("exc_info")
    if exc is True:
        exc = sys.exc_info()[1]
    elif isinstance(exc, tuple):
        exc = exc[1]
    if isinstance(exc, BaseException):
        return f"{type(exc).__name__}: {exc}"
    return str(event.get("message", ""))


class RateLimit:
    """Processor: the same event + error at most once per ``interval`` seconds (warnings and errors).

    The next line of that kind written after the interval carries
    ``suppressed``: how many were left out meanwhile.
    """

    def __init__(self, interval: float = REPEAT_INTERVAL, clock: Callable[[], float] = time.monotonic,
                 keys: int = REPEAT_KEYS) -> None:
        self.interval, self.clock, self.keys = interval, clock, keys
        self._seen: dict[tuple[str, str], list[float]] = {}  # key -> [last written, suppressed since]
        self._lock = threading.Lock()

    def __call__(self, logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        level = event.get("level", method)
        if _LEVELS.get(level, 40) < _LEVELS["warning"]:
            return event
        key = (str(event.get("event")), _error_of(event))
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval:
                seen[1] += 1
                raise structlog.DropEvent
            if seen is not None and seen[1]:
                event["suppressed"] = int(seen[1])
            self._seen.pop(key, None)
            self._seen[key] = [now, 0]
            while len(self._seen) > self.keys:
                self._seen.pop(next(iter(self._seen)))
        return event


class _Tee:
    """Final processor: JSON to the log file (whole lines or none), optionally pretty to a console."""

    def __init__(self, path: Path | None, console: TextIO | None) -> None:
        self._fd = -1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._console = console
        self._pretty = structlog.dev.ConsoleRenderer(colors=bool(console and console.isatty()))
        self._lock = threading.Lock()
        self.dropped = 0
        self._why: str | None = None

    def __call__(self, logger: Any, method: str, event: dict[str, Any]) -> str:
        event = {key: redact_value(value) for key, value in event.items()}
        if self._fd >= 0:
            line = redact_text(json.dumps(event, default=str, separators=(",", ":"))) + "\n"
            with self._lock:
                if self.dropped and self._append(self._dropped_line(event)):
                    self.dropped, self._why = 0, None
                if not self._append(line.encode()):
                    self.dropped += 1
        if self._console is not None:
            try:
                self._console.write(redact_text(self._pretty(logger, method, dict(event))) + "\n")
                self._console.flush()
            except (OSError, ValueError):  # a closed or full console loses the pretty copy only
                pass
        raise structlog.DropEvent

    def _dropped_line(self, event: dict[str, Any]) -> bytes:
        note = {"event": "log_lines_dropped", "count": self.dropped, "error": self._why, "level": "warning",
                "timestamp": event.get("timestamp")}
        return (json.dumps(note, separators=(",", ":")) + "\n").encode()

    def _append(self, data: bytes) -> bool:
        """One whole line, or nothing (a torn piece is cut back)."""
        try:
            written = os.write(self._fd, data)
        except OSError as exc:
            self._why = errno.errorcode.get(exc.errno or 0, str(exc))
            return False
        if written == len(data):
            return True
        self._why = "short write (disk full?)"
        try:  # with O_APPEND the offset is the end of what was just written
            os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_CUR) - written)
        except OSError:
            pass
        return False


class _ToStructlog(logging.Handler):
    """Warnings of libraries (stdlib logging: asyncio, watchdog, apscheduler) into the event log."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a library's bad format string
            message = str(record.msg)
        fields: dict[str, Any] = {"logger": record.name, "message": message}
        if record.exc_info and record.exc_info[1] is not None:
            fields["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
            fields["exc_info"] = record.exc_info
        method = log.error if record.levelno >= logging.ERROR else log.warning
        method("library_log", **fields)


def loop_exception_handler(loop: Any, context: dict[str, Any]) -> None:
    """The event loop's errors (an exception in a callback) as rate-limited events, not stderr tracebacks."""
    exc = context.get("exception")
    fields: dict[str, Any] = {"message": context.get("message")}
    if isinstance(exc, BaseException):
        fields["error"] = f"{type(exc).__name__}: {exc}"
        fields["exc_info"] = exc
    log.error("event_loop_error", **fields)


def configure(path: Path | None, level: str = "info", console: bool = False,
              limit: RateLimit | None = None) -> None:
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        limit or RateLimit(),  # before the traceback is formatted: a suppressed line costs nothing
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _Tee(path, sys.stderr if console else None),
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ToStructlog)]:
        root.removeHandler(handler)
    handler = _ToStructlog(logging.WARNING)
    root.addHandler(handler)
