"""Slow streams parked on one timer per loop (supervisor/session/parking.py), with real PTYs."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from supervisor.session.parking import COALESCE_BYTES, INTERVAL, STREAMING, Parking, parking_of, slow_stream
from supervisor.session.pty import Session
from tests.conftest import wait_until_async

TIMEOUT = 30.0
# 100-byte lines, 4 every 20 ms (20 KB/s, the bench's stream), for 1 s; then quiet until killed
STREAM = ("import sys, time\n"
          "for i in range(50):\n"
          "    sys.stdout.write(''.join(f'{i * 4 + j:09d} ' + 'x' * 89 + '\\n' for j in range(4)))\n"
          "    sys.stdout.flush()\n"
          "    time.sleep(0.02)\n"
          "sys.stdout.write('DONE\\n'); sys.stdout.flush()\n"
          "time.sleep(60)\n")


def test_policy() -> None:
    assert slow_stream(2000, INTERVAL)  # 2 KB per interval, read an interval after the last: a slow stream
    assert not slow_stream(COALESCE_BYTES, INTERVAL)  # a full share or more: never held back
    assert not slow_stream(2000, 2 * INTERVAL)  # the first output after a quiet spell goes on at once
    assert not slow_stream(500, 0.01)  # faster than 4 KB per interval, however small the read
    # the echo of what agentd typed, and the answer after it, are a turn beginning or ending: never held back
    assert not slow_stream(2000, INTERVAL, since_input=0.05)
    assert not slow_stream(2000, INTERVAL, since_input=STREAMING - 0.001)
    assert slow_stream(2000, INTERVAL, since_input=STREAMING)


def _session(tmp_path: Path, code: str) -> Session:
    session = Session("park", [sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                      rows=24, cols=100, transcript_dir=tmp_path / "transcripts", redact_env={})
    session.spawn()
    return session


def test_a_slow_stream_is_parked_read_whole_and_handed_back(tmp_path: Path) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        session = _session(tmp_path, STREAM)
        seen = bytearray()
        session.add_listener(seen.extend)
        session.attach(loop)
        parking = parking_of(loop)
        try:
            await wait_until_async(lambda: session in parking, TIMEOUT, what="the stream to be parked")
            await wait_until_async(lambda: b"DONE" in seen, TIMEOUT, what="the end of the stream")
            await wait_until_async(lambda: session not in parking, TIMEOUT, what="the quiet PTY to be watched again")
            assert loop.remove_reader(session._fd)  # the loop's reader is back
            loop.add_reader(session._fd, session._on_readable)
        finally:
            session.signal_tree(signal.SIGKILL)
            await wait_until_async(lambda: session.reap() is not None, TIMEOUT, what="the child's exit")
            session.close()
        lines = [ln for ln in bytes(seen).split(b"\r\n") if ln and ln != b"DONE"]
        assert [int(ln[:9]) for ln in lines] == list(range(200))  # every line, in order
        log = b"".join(p.read_bytes() for p in (tmp_path / "transcripts").rglob("*.log"))
        assert log == bytes(seen)  # on disk, all of it

    asyncio.run(scenario())


def test_close_while_parked_unparks(tmp_path: Path) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        session = _session(tmp_path, STREAM)
        session.attach(loop)
        try:
            await wait_until_async(lambda: session in parking_of(loop), TIMEOUT, what="the stream to be parked")
        finally:
            session.signal_tree(signal.SIGKILL)
            await wait_until_async(lambda: session.reap() is not None, TIMEOUT, what="the child's exit")
            session.close()
        assert session not in parking_of(loop)

    asyncio.run(scenario())


class _Failing:
    def __init__(self) -> None:
        self.watched = False

    def poll_parked(self) -> bool:
        raise OSError("boom")

    def watch_again(self) -> None:
        self.watched = True


class _Slow:
    polls = 0

    def poll_parked(self) -> bool:
        self.polls += 1
        return self.polls < 3

    def watch_again(self) -> None:  # pragma: no cover - not called: it unparks itself
        raise AssertionError


def test_one_failing_session_does_not_stall_the_others() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        parking = Parking(loop, interval=0.01)
        failing, slow = _Failing(), _Slow()
        parking.park(failing)
        parking.park(slow)
        await wait_until_async(lambda: slow.polls >= 3, TIMEOUT, what="three polls of the slow session")
        assert failing.watched and failing not in parking and slow not in parking
        assert [str(e["exception"]) for e in errors] == ["boom"]

    asyncio.run(scenario())


# a prompt, one line read, its answer in two writes, then the prompt again
ANSWER = ("import sys, time\n"
          "sys.stdout.write('> '); sys.stdout.flush()\n"
          "line = sys.stdin.readline()\n"
          "sys.stdout.write('got ' + line); sys.stdout.flush(); time.sleep(0.002)\n"
          "sys.stdout.write('> '); sys.stdout.flush()\n"
          "time.sleep(60)\n")


def test_the_echo_and_answer_of_typed_input_are_never_parked(tmp_path: Path) -> None:
    """Typed moments after the prompt, the echo is a small read soon after the last: a slow stream by size and
    pace, but it is a turn beginning; parked, the answer's prompt would be seen 0.1 s late."""
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        session = _session(tmp_path, ANSWER)
        seen = bytearray()
        session.add_listener(seen.extend)
        parking = parking_of(loop)
        parked: list[bytes] = []
        real = parking.park

        def park(item: object) -> None:
            parked.append(bytes(seen))
            real(item)  # type: ignore[arg-type]

        parking.park = park  # type: ignore[method-assign]
        session.attach(loop)
        try:
            await wait_until_async(lambda: b"> " in seen, TIMEOUT, what="the prompt")
            session.send(b"hello\r")
            await wait_until_async(lambda: seen.count(b"> ") >= 2, TIMEOUT, what="the answer and the prompt again")
            assert b"got hello" in seen
            assert parked == []
        finally:
            session.signal_tree(signal.SIGKILL)
            await wait_until_async(lambda: session.reap() is not None, TIMEOUT, what="the child's exit")
            session.close()

    asyncio.run(scenario())
