"""The control protocol in-process: framing, command table, limits."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.control.client import Client
from supervisor.control.framing import MAX_MESSAGE, ControlError, encode
from supervisor.control.server import Command, ControlServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "state" / "s.sock"
    loop = asyncio.new_event_loop()

    async def echo(args: dict) -> dict:
        return {"echo": args.get("value")}

    async def boom(args: dict) -> None:
        raise RuntimeError("kaput")

    srv = ControlServer(path, {"echo": Command(echo, frozenset({"value"})), "boom": Command(boom)})
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(srv.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield path
    asyncio.run_coroutine_threadsafe(srv.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def raw_request(path: Path, payload: bytes) -> dict:
    import json

    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(payload)
        header = sock.recv(4)
        (size,) = struct.unpack(">I", header)
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
        return json.loads(body)


def test_socket_and_directory_are_owner_only(server: Path) -> None:
    assert server.stat().st_mode & 0o777 == 0o600
    assert server.parent.stat().st_mode & 0o777 == 0o700


def test_round_trip_and_several_requests_per_connection(server: Path) -> None:
    with Client(server) as client:
        assert client.call("echo", value=1) == {"echo": 1}
        assert client.call("echo", value="two") == {"echo": "two"}


def test_unknown_command_and_argument_are_errors(server: Path) -> None:
    with Client(server) as client:
        with pytest.raises(ControlError, match=r"unknown command 'getattr'.*known commands: boom, echo"):
            client.call("getattr")
        with pytest.raises(ControlError, match=r"unknown argument.*'nope'"):
            client.call("echo", nope=1)
        with pytest.raises(ControlError, match="boom failed: RuntimeError: kaput"):
            client.call("boom")
        assert client.call("echo", value=3) == {"echo": 3}  # the connection survives errors


def test_oversized_and_malformed_messages(server: Path) -> None:
    reply = raw_request(server, struct.pack(">I", MAX_MESSAGE + 1))
    assert not reply["ok"] and "exceeds" in reply["error"]
    reply = raw_request(server, struct.pack(">I", 5) + b"nope!")
    assert not reply["ok"] and "not JSON" in reply["error"]
    reply = raw_request(server, encode({"cmd": "echo", "args": [1]}))
    assert not reply["ok"] and "JSON object" in reply["error"]
    with Client(server) as client:  # still serving
        assert client.call("echo", value=4) == {"echo": 4}
