"""The control socket's framing under bad input (issue 25 §2): every pathology is a ProtocolError, never a crash.

A 100,000-deep frame used to raise ``RecursionError`` in the daemon.  The
named pathologies are checked one by one, then hypothesis throws arbitrary
bytes and arbitrary JSON at :func:`decode`, arbitrary chunking at
:class:`FrameDecoder`, and arbitrary frames at a real server, which must
answer each one and go on serving.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.control.framing import (FRAME_HEADER, MAX_DEPTH, MAX_DIGITS, MAX_FRAME, FrameDecoder, ProtocolError,
                                        decode, encode, frame)
from supervisor.control.server import Command
from tests.conftest import read_reply
from tests.control_fixtures import serving

PATHOLOGIES = [
    (b"[" * 100_000, "nested more than 32 deep"),
    (b'{"a":' + b"[" * 32 + b"1" + b"]" * 32 + b"}", "nested more than 32 deep"),  # 33 deep
    (b'{"a": ' + b"9" * 5000 + b"}", f"more than {MAX_DIGITS} digits"),
    (b'{"a": -' + b"9" * 21 + b"}", f"more than {MAX_DIGITS} digits"),
    (b'{"a": NaN}', "NaN is not JSON"),
    (b'{"a": -Infinity}', "-Infinity is not JSON"),
    (b'{"a": 1e999}', "not finite"),
    (b'{"a": "\\ud800"}', "lone surrogate"),
    (b'{"\\udfff": 1}', "lone surrogate"),
    (b'{"a": ["x", {"b": "\\uDBFF"}]}', "lone surrogate"),  # upper case, nested
    (b'{"a": "\\ud83d\\ude00 \\udc00"}', "lone surrogate"),  # a pair, then a lone one
    (b'{"a": "\xed\xa0\x80"}', "not UTF-8"),  # a surrogate encoded in the bytes themselves
    (b"\xff\xfe{\x00}\x00", "not UTF-8"),  # UTF-16 is not taken for JSON
    (b"[1, 2]", "must be a JSON object"),
    (b"", "not JSON"),
]


@pytest.mark.parametrize(("body", "why"), PATHOLOGIES, ids=[w for _, w in PATHOLOGIES])
def test_each_pathology_is_a_protocol_error_that_says_what(body: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why.replace("(", r"\(")):
        decode(body)


def test_what_a_request_needs_still_decodes() -> None:
    nested: object = 1
    for _ in range(MAX_DEPTH - 2):  # with the message and its args: exactly MAX_DEPTH deep
        nested = [nested]
    message = {"cmd": "send", "args": {"unit": "web", "text": "héllo ✓ 🦀", "n": -(10 ** 19), "f": 1.5e300,
                                       "deep": nested}}
    assert decode(json.dumps(message).encode()) == message
    assert decode(json.dumps(message, ensure_ascii=False).encode()) == message


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
                    | st.text(), lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_decode_to_an_object_or_a_protocol_error(body: bytes) -> None:
    try:
        assert isinstance(decode(body), dict)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_arbitrary_json_round_trips_or_is_refused_for_a_named_reason(value: object) -> None:
    body = json.dumps({"v": value}).encode()
    try:
        assert decode(body) == json.loads(body)
    except ProtocolError as exc:
        assert any(w in str(exc) for w in ("digits", "not JSON", "not finite", "surrogate", "deep")), exc


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=1), st.binary(max_size=300)), max_size=8),
       st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20))
def test_frames_come_out_whole_however_the_bytes_are_cut(frames: list[tuple[bytes, bytes]], cuts: list[int]) -> None:
    data = b"".join(frame(kind, payload) for kind, payload in frames)
    decoder, out, at, i = FrameDecoder(), [], 0, 0
    while at < len(data):
        step = cuts[i % len(cuts)]
        out += decoder.feed(data[at:at + step])
        at, i = at + step, i + 1
    assert out == frames


def test_a_frame_header_beyond_the_limit_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameDecoder().feed(FRAME_HEADER.pack(b"i", MAX_FRAME + 1))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    async def echo(args: dict) -> dict:
        return {"echo": args.get("value")}

    path = tmp_path_factory.mktemp("fuzz") / "s.sock"
    with serving(path, {"echo": Command(echo, frozenset({"value"}))}):
        yield path


def _send(path: Path, data: bytes) -> dict | None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # a short frame: the server sees the end, not an idle client
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            return read_reply(sock)
        except AssertionError:  # closed without a reply: a frame cut short
            return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=600), JSON.map(lambda v: json.dumps({"cmd": "echo", "args": {"value": v}}).encode()),
                 st.sampled_from([b for b, _ in PATHOLOGIES])))
def test_the_server_answers_every_frame_and_serves_on(server: Path, body: bytes) -> None:
    reply = _send(server, struct.pack(">I", len(body)) + body)
    assert reply is not None and isinstance(reply.get("ok"), bool)
    if not reply["ok"]:
        assert reply["error"].startswith(("protocol error:", "unknown command", "args must be", "echo: unknown")), reply
    assert _send(server, encode({"cmd": "echo", "args": {"value": 1}})) == {"ok": True, "result": {"echo": 1}}
