"""The live stream: raw listeners see output at once, viewers only what is redacted, however slow the agent.

A real process in a real PTY (:class:`~supervisor.session.pty.Session`)
prints the first half of a key, then waits for a line on stdin before it
prints the rest.  The screen and turn detection (raw listeners) get the half
at once; the transcript and viewers (output listeners) get nothing of it
while the agent waits, and ``[REDACTED]`` once the key ends.  The attach
server, on a real socket, relays the redacted stream unless asked for raw.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from supervisor.control import attach as proto
from supervisor.control.framing import FrameDecoder
from supervisor.session.pty import Session
from tests.conftest import wait_until_async

HALF, REST = "sk-proj-Q7vB2mX9kL4p", "T8wR1nZ6yH3jF5dS0aGcE"
KEY = (HALF + REST).encode()
SCRIPT = (
    "import os, sys, termios\n"
    "mode = termios.tcgetattr(0)\n"
    "mode[3] &= ~termios.ECHO\n"  # like a TUI: typed keys are not echoed by the terminal
    "termios.tcsetattr(0, termios.TCSANOW, mode)\n"
    f"os.write(1, b'ready\\r\\nkey: {HALF}')\n"
    "sys.stdin.readline()\n"
    f"os.write(1, b'{REST} done\\r\\n')\n"
    "sys.stdin.readline()\n"
)
TIMEOUT = 20.0


async def stays(predicate: Any, seconds: float) -> bool:
    """True if ``predicate`` holds for the whole window (asserting an absence)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        await asyncio.sleep(0.05)
    return True


def start(tmp_path: Path) -> Session:
    session = Session("leaky", [sys.executable, "-c", SCRIPT], env=dict(os.environ), cwd=tmp_path, rows=24, cols=80,
                      transcript_dir=tmp_path / "t", redact_env={})
    session.spawn()
    session.attach(asyncio.get_running_loop())
    return session


async def finish(session: Session) -> None:
    session.signal_tree(9)
    await wait_until_async(lambda: session.reap() is not None, TIMEOUT, what="the agent to exit")
    session.close()


def test_raw_listeners_see_a_half_key_at_once_viewers_never(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = start(tmp_path)
        raw: list[bytes] = []
        shown: list[bytes] = []
        session.add_listener(raw.append)
        session.add_output_listener(shown.append)
        try:
            await wait_until_async(lambda: HALF.encode() in b"".join(raw), TIMEOUT, what="the half key on the raw listener")
            await wait_until_async(lambda: b"ready" in b"".join(shown), TIMEOUT, what="the first line on the output listener")
            # a second and more without output: the half key stays held (no quiet flush)
            assert await stays(lambda: b"sk-" not in b"".join(shown) and b"sk-" not in session.transcript.log_path.read_bytes(), 1.5)
            assert session.transcript.pending == len(HALF)
            session.send(b"go\r")
            await wait_until_async(lambda: b"done" in b"".join(shown), TIMEOUT, what="the rest")
            out = b"".join(shown)
            assert out.endswith(b"key: [REDACTED] done\r\r\n") and KEY[:8] not in out and REST.encode() not in out
            assert session.transcript.log_path.read_bytes() == out  # viewers see exactly what the .log got
        finally:
            await finish(session)

    asyncio.run(scenario())


class _Target:
    """The daemon as the attach server sees it: one unit with one session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def current_session(self, unit: str) -> Session:
        return self.session

    async def wait_session(self, unit: str, previous: Any, timeout: float) -> None:
        return None

    def person_input(self, unit: str) -> None:
        pass

    def viewer_attached(self, unit: str, delta: int) -> int:
        return 1


async def _view(session: Session, args: dict[str, Any]) -> tuple[asyncio.Future[None], socket.socket]:
    """Run the attach server on one end of a socket pair; the other end is the viewer's."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_unix_connection(sock=theirs)
    server = asyncio.ensure_future(proto.serve_attach(_Target(session), args, reader, writer))  # type: ignore[arg-type]
    ours.setblocking(False)
    return server, ours


def test_the_attach_server_relays_the_redacted_stream_unless_raw_is_asked(tmp_path: Path) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        session = start(tmp_path)
        raw_seen: list[bytes] = []
        session.add_listener(raw_seen.append)
        views = {}
        try:
            await wait_until_async(lambda: HALF.encode() in b"".join(raw_seen), TIMEOUT, what="the half key")
            for raw in (False, True):
                views[raw] = await _view(session, {"unit": "leaky", "read_only": True, "raw": raw})
            session.send(b"go\r")
            outputs: dict[bool, bytes] = {False: b"", True: b""}

            async def pump(raw: bool) -> None:
                _, sock = views[raw]
                decoder = FrameDecoder()
                reply_skipped = False
                buf = b""
                while b"done" not in outputs[raw]:
                    data = await loop.sock_recv(sock, 65536)
                    if not data:
                        return
                    if not reply_skipped:  # the JSON reply (length-prefixed) comes first
                        buf += data
                        if len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                            continue
                        size = int.from_bytes(buf[:4], "big")
                        data, reply_skipped = buf[4 + size:], True
                    for kind, payload in decoder.feed(data):
                        if kind == proto.OUTPUT:
                            outputs[raw] += payload

            await asyncio.wait_for(asyncio.gather(pump(False), pump(True)), TIMEOUT)
            assert b"[REDACTED]" in outputs[False] and REST.encode() not in outputs[False]
            assert HALF[:8].encode() not in outputs[False]
            assert REST.encode() in outputs[True]  # --raw: the bytes as the agent wrote them
        finally:
            for server, sock in views.values():
                sock.close()
                server.cancel()
            await finish(session)

    asyncio.run(scenario())
