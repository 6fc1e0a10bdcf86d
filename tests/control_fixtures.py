"""A :class:`ControlServer` on an event loop of its own, for the in-process control-socket tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from supervisor.control.server import Command, ControlServer
from tests.conftest import wait_until


@contextmanager
def serving(path: Path, commands: Mapping[str, Command], **options: Any) -> Iterator[ControlServer]:
    """Serve ``commands`` on ``path`` (``options``: ControlServer's) until the block ends and its connections close."""
    loop = asyncio.new_event_loop()
    srv = ControlServer(path, commands, **options)
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(srv.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield srv
    finally:
        asyncio.run_coroutine_threadsafe(srv.close(), loop).result(10)
        wait_until(lambda: srv.table.open == 0, 10, what="the connections to end")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
