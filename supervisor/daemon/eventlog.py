"""structlog set-up: every daemon event as a JSON line in the state directory.

In the foreground with ``log_format = "console"`` the same events are also
printed, pretty, to stderr.  Secrets are redacted
(:func:`~supervisor.session.redact.redact_text`, every shape of
:mod:`supervisor.session.shapes`): each string value before the event is
encoded (JSON escaping would split a multi-line key block or a key with escape
codes inside), then the whole line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import structlog

from ..session.redact import redact_text

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


class _Tee:
    """Final processor: JSON to the log file, optionally pretty to a console."""

    def __init__(self, path: Path | None, console: TextIO | None) -> None:
        self._fd = -1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._console = console
        self._pretty = structlog.dev.ConsoleRenderer(colors=bool(console and console.isatty()))

    def __call__(self, logger: Any, method: str, event: dict[str, Any]) -> str:
        event = {key: _redacted(value) for key, value in event.items()}
        if self._fd >= 0:
            line = redact_text(json.dumps(event, default=str, separators=(",", ":"))) + "\n"
            os.write(self._fd, line.encode())
        if self._console is not None:
            text = redact_text(self._pretty(logger, method, dict(event)))
            self._console.write(text + "\n")
            self._console.flush()
        raise structlog.DropEvent


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


def configure(path: Path | None, level: str = "info", console: bool = False) -> None:
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
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
