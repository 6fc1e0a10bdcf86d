"""The control server's limits (issue 13, item 5), in-process: idle timeout, cap, reserve, idle ones giving way."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.control.client import Client
from supervisor.control.connections import Admission, Conn, Limits, admit, oldest_idle
from supervisor.control.framing import ControlError, encode
from supervisor.control.server import Command, ControlServer
from tests.conftest import wait_until
from tests.control_fixtures import serving


def serve(path: Path, limits: Limits) -> Iterator[ControlServer]:
    async def echo(args: dict) -> dict:
        return {"echo": args.get("value")}

    async def status(args: dict) -> dict:
        return {"units": []}

    with serving(path, {"echo": Command(echo, frozenset({"value"})), "status": Command(status)}, limits=limits) as srv:
        yield srv


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "s.sock"


def idle_client(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


def reply_of(sock: socket.socket) -> dict | None:
    """The one message the server sends unasked (before closing), or None at a bare close."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    if len(data) < 4:
        return None
    (size,) = struct.unpack(">I", data[:4])
    return json.loads(data[4:4 + size])


def test_admission_policy() -> None:
    limits = Limits(connections=2, reserve=1)
    assert admit(0, 0, limits) is Admission.NORMAL and admit(1, 0, limits) is Admission.NORMAL
    assert admit(2, 0, limits) is Admission.RESERVE
    assert admit(2, 1, limits) is Admission.REFUSED
    a, b, busy = Conn(Admission.NORMAL), Conn(Admission.NORMAL), Conn(Admission.NORMAL)
    for conn, since in ((a, 10.0), (b, 5.0)):
        conn.writer, conn.idle_since = object(), since  # type: ignore[assignment]
    busy.writer = object()  # type: ignore[assignment]
    assert oldest_idle([a, b, busy], now=11.0, after=0.5) is b
    assert oldest_idle([a, b, busy], now=5.2, after=0.5) is None  # nobody idle long enough


def test_an_idle_connection_is_told_and_closed(sock_path: Path) -> None:
    for _srv in serve(sock_path, Limits(idle_timeout=0.3)):
        sock = idle_client(sock_path)
        closed = reply_of(sock)
        sock.close()
        assert closed == {"ok": False, "error": "closed: no request within 0.3 s"}
        with Client(sock_path) as client:  # a busy client is never idle
            assert client.call("echo", value=1) == {"echo": 1}


def test_beyond_the_cap_the_reserve_serves_status_only_then_connections_are_refused(sock_path: Path) -> None:
    for srv in serve(sock_path, Limits(connections=2, reserve=1, evict_after=600)):
        held = [idle_client(sock_path) for _ in range(2)]
        wait_until(lambda: srv.table.open == 2, 10, what="two connections served")
        with Client(sock_path) as client:  # on the reserve
            assert client.call("status") == {"units": []}
            with pytest.raises(ControlError, match="its limit.*only ping, shutdown, status, stop are answered"):
                client.call("echo", value=1)
        reserve = idle_client(sock_path)
        wait_until(lambda: srv.table.open == 3, 10, what="the reserve taken")
        extra = idle_client(sock_path)
        refused = reply_of(extra)
        extra.close()
        assert refused is not None and "serving 3 connections, its limit" in refused["error"]
        for sock in [*held, reserve]:
            sock.close()
        wait_until(lambda: srv.table.open == 0, 10, what="the connections to end")
        with Client(sock_path) as client:
            assert client.call("echo", value=2) == {"echo": 2}


def test_at_the_cap_the_longest_idle_connection_gives_way(sock_path: Path) -> None:
    for srv in serve(sock_path, Limits(connections=2, reserve=0, evict_after=0.0)):
        first = idle_client(sock_path)
        wait_until(lambda: [c.idle_since for c in srv.table.conns] != [None], 10, what="the first connection")
        second = idle_client(sock_path)
        wait_until(lambda: len([c for c in srv.table.conns if c.idle_since is not None]) == 2, 10,
                   what="the second connection")
        with Client(sock_path) as client:
            assert client.call("echo", value=3) == {"echo": 3}
        closed = reply_of(first)
        assert closed is not None and "idle while agentd needed the connection" in closed["error"]
        assert srv.table.evictions == 1
        second.sendall(encode({"cmd": "echo", "args": {"value": 4}}))  # the younger one still works
        second.settimeout(10)
        assert b'"echo":4' in second.recv(65536)
        second.close()
        first.close()
