"""The control protocol in-process: framing, command table, limits."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from supervisor.control.client import Client
from supervisor.control.framing import MAX_MESSAGE, ControlError, encode
from supervisor.control.server import Command
from tests.conftest import raw_request
from tests.control_fixtures import serving as control_serving


async def _echo(args: dict) -> dict:
    return {"echo": args.get("value")}


async def _boom(args: dict) -> None:
    raise RuntimeError("kaput")


@contextmanager
def serving(path: Path, **options: int) -> Iterator[Path]:
    """A ControlServer (echo, boom) on its own loop thread; closed at the end."""
    with control_serving(path, {"echo": Command(_echo, frozenset({"value"})), "boom": Command(_boom)}, **options):
        yield path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Path]:
    with serving(tmp_path / "state" / "s.sock") as path:
        yield path


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


def test_a_peer_of_another_uid_is_refused_before_any_command(tmp_path: Path) -> None:
    """The SO_PEERCRED check, as any user: a server that serves only another uid refuses us."""
    ours = os.getuid()
    with serving(tmp_path / "a" / "s.sock", owner_uid=ours + 1) as path:
        reply = raw_request(path, encode({"cmd": "echo", "args": {"value": 1}}))
        assert reply == {"ok": False, "error": f"permission denied: uid {ours} is not the daemon's owner"}
        with Client(path) as client, pytest.raises(ControlError, match=f"permission denied: uid {ours}"):
            client.call("echo", value=2)
    # the owner's same request is served: what was refused above was the uid, nothing else
    with serving(tmp_path / "b" / "s.sock", owner_uid=ours) as path:
        assert raw_request(path, encode({"cmd": "echo", "args": {"value": 1}})) == {"ok": True, "result": {"echo": 1}}
