"""Who may run which control command (issue 25 §2): the pure decision, the daemon's table, and the server.

The server tests use a real socket and a fake :class:`Callers` (the real one,
the daemon's process-tree lookup, is proved in tests/test_control_callers.py
and, with a fenced agent, in tests/security/test_socket_caller.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from supervisor.control.access import ANYONE, OPERATOR, Caller, Kind, Own, Refused, permit
from supervisor.control.framing import encode
from supervisor.control.server import Command
from tests.conftest import REPO, raw_request
from tests.control_fixtures import serving as control_serving

UNIT = Caller.of_unit("web", "s1", pid=42)
STRAY = Caller.stray(43, "an orphan that left its session")
OPERATOR_PEER = Caller.operator(44)


# ---------------------------------------------------------------- the decision (pure)
def test_the_operator_runs_anything_with_the_arguments_it_gave() -> None:
    for access in (OPERATOR, ANYONE, Own("unit"), Own(unit=None, units="units")):
        assert permit("send", access, OPERATOR_PEER, {"unit": "api", "text": "hi"}) == {"unit": "api", "text": "hi"}


def test_a_unit_runs_an_own_unit_command_only_for_itself_and_the_kernel_names_it() -> None:
    own = Own("unit", session="session")
    assert permit("agent-event", own, UNIT, {"event": {}}) == {"event": {}, "unit": "web", "session": "s1"}
    assert permit("agent-event", own, UNIT, {"unit": "web", "session": "s1"}) == {"unit": "web", "session": "s1"}
    given = {"unit": "web"}
    permit("agent-event", own, UNIT, given)
    assert given == {"unit": "web"}  # the request is not changed in place
    with pytest.raises(Refused, match=r"^permission denied: unit 'web' may run 'agent-event' only for itself, not for 'api'$"):
        permit("agent-event", own, UNIT, {"unit": "api"})
    with pytest.raises(Refused, match="only for its own session \\(s1\\), not for 's0'"):
        permit("agent-event", own, UNIT, {"unit": "web", "session": "s0"})
    with pytest.raises(Refused, match="not for \\['web'\\]"):
        permit("agent-event", own, UNIT, {"unit": ["web"]})  # only a name equal to its own passes


def test_a_unit_list_argument_becomes_the_callers_own_unit() -> None:
    status = Own(unit=None, units="units")
    for given in (None, [], ["web"], ["web", "web"]):
        args = {} if given is None else {"units": given}
        assert permit("status", status, UNIT, args) == {"units": ["web"]}
    with pytest.raises(Refused, match="may run 'status' only for itself, not for 'api', 'db'"):
        permit("status", status, UNIT, {"units": ["web", "api", "db"]})
    with pytest.raises(Refused, match="not for 'api'"):
        permit("status", status, UNIT, {"units": "api"})


def test_a_unit_may_not_run_the_operators_commands_and_the_error_names_both() -> None:
    with pytest.raises(Refused) as err:
        permit("shutdown", OPERATOR, UNIT, {})
    assert str(err.value) == ("permission denied: unit 'web' may not run 'shutdown': only the operator may, from outside "
                              "every unit (the caller runs inside that unit's session)")
    assert permit("ping", ANYONE, UNIT, {}) == {}


def test_a_stray_may_only_ping() -> None:
    assert permit("ping", ANYONE, STRAY, {}) == {}
    for access in (OPERATOR, Own("unit"), Own(unit=None, units="units")):
        with pytest.raises(Refused) as err:
            permit("status", access, STRAY, {"unit": "web"})
        assert "no unit claims (pid 43: an orphan that left its session)" in str(err.value)
        assert "may only ping" in str(err.value)


# ---------------------------------------------------------------- the daemon's table
def test_the_daemons_table_gives_a_unit_ping_and_its_own_status_and_agent_events_only() -> None:
    from supervisor.daemon.commands import command_table

    async def attach(*_: Any) -> None:
        return None

    table = command_table(object(), attach)  # type: ignore[arg-type]
    declared = {name: command.who for name, command in table.items()}
    assert declared.pop("ping") is ANYONE
    assert declared.pop("status") == Own(unit=None, units="units")
    assert declared.pop("agent-event") == Own("unit", session="session")
    assert set(declared) == {"start", "stop", "restart", "checkpoint", "broadcast", "queue", "reset-failed", "reload",
                             "web", "send", "shutdown", "attach"}
    assert all(who is OPERATOR for who in declared.values())
    assert Command(attach).who is OPERATOR  # a new command is the operator's until declared otherwise


# ---------------------------------------------------------------- the server, with a fake Callers
class FakeCallers:
    def __init__(self, answer: Callable[[int], Caller]) -> None:
        self.answer = answer
        self.asked: list[int] = []

    def caller(self, pid: int) -> Caller:
        self.asked.append(pid)
        return self.answer(pid)


@contextmanager
def serving(path: Path, callers: FakeCallers) -> Iterator[list[tuple[str, dict]]]:
    """A server whose handlers record (command, args); on a loop thread of its own."""
    calls: list[tuple[str, dict]] = []

    def handler(name: str) -> Callable[[dict], Any]:
        async def run(args: dict) -> dict:
            calls.append((name, args))
            return {"ran": name}
        return run

    async def stream(args: dict, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        calls.append(("attach", args))
        writer.close()

    table = {"ping": Command(handler("ping"), who=ANYONE),
             "status": Command(handler("status"), frozenset({"units"}), who=Own(unit=None, units="units")),
             "agent-event": Command(handler("agent-event"), frozenset({"unit", "session", "event"}),
                                    who=Own("unit", session="session")),
             "send": Command(handler("send"), frozenset({"unit", "text"})),
             "attach": Command(stream, frozenset({"unit"}), stream=True)}
    with control_serving(path, table, callers=callers):
        yield calls


def _ask(path: Path, cmd: str, **args: Any) -> dict:
    """One request on a connection of its own; the reply as it came."""
    return raw_request(path, encode({"cmd": cmd, "args": args}))


def test_the_server_binds_a_units_arguments_and_refuses_the_rest(tmp_path: Path) -> None:
    callers = FakeCallers(lambda pid: Caller.of_unit("web", "s1", pid))
    path = tmp_path / "s.sock"
    with serving(path, callers) as calls:
        assert _ask(path, "status")["ok"] and _ask(path, "agent-event", event={})["ok"]
        refused = [_ask(path, "send", unit="web", text="x"), _ask(path, "status", units=["api"]),
                   _ask(path, "agent-event", unit="api", event={}), _ask(path, "attach", unit="web")]
    assert calls == [("status", {"units": ["web"]}), ("agent-event", {"event": {}, "unit": "web", "session": "s1"})]
    assert [r["ok"] for r in refused] == [False] * 4
    assert "unit 'web' may not run 'send'" in refused[0]["error"] and "unit 'web' may not run 'attach'" in refused[3]["error"]
    assert set(callers.asked) == {os.getpid()}  # the kernel's pid of this process, asked once per connection


def test_a_stray_gets_ping_and_the_operator_everything(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with serving(path, FakeCallers(lambda pid: Caller.stray(pid, "a setsid orphan"))) as calls:
        assert _ask(path, "ping")["ok"]
        assert "may only ping" in _ask(path, "status")["error"]
    assert calls == [("ping", {})]
    with serving(path, FakeCallers(lambda pid: Caller.operator(pid))) as calls:
        assert _ask(path, "send", unit="api", text="hi")["ok"] and _ask(path, "status", units=["api", "db"])["ok"]
    assert calls == [("send", {"unit": "api", "text": "hi"}), ("status", {"units": ["api", "db"]})]


CLIENT = """
import json, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = json.dumps({"cmd": "send", "args": {"unit": "api", "text": "hi"}}).encode()
s.sendall(struct.pack(">I", len(body)) + body)
time.sleep(60)
"""


def test_a_caller_that_ends_before_it_is_told_apart_is_refused(tmp_path: Path) -> None:
    """The lookup answered "operator" for the pid, but the process that connected was gone by then: refused.

    (Its pid could have been given to anyone meanwhile; the pidfd says the connecting process is gone.)
    """
    path = tmp_path / "s.sock"
    started: dict[int, subprocess.Popen[str]] = {}
    registered = threading.Event()

    def end_it_then_answer(pid: int) -> Caller:
        if pid == os.getpid():
            return Caller.operator(pid)
        assert registered.wait(30)
        started[pid].kill()
        started[pid].wait(10)  # reaped: the pid is free for anyone now
        return Caller.operator(pid)

    callers = FakeCallers(end_it_then_answer)
    with serving(path, callers) as calls:
        proc = subprocess.Popen([sys.executable, "-c", CLIENT, str(path)], cwd=REPO)
        started[proc.pid] = proc
        registered.set()
        try:
            proc.wait(30)
        finally:
            proc.kill()
        assert _ask(path, "ping")["ok"]  # the server goes on
    assert callers.asked[0] == proc.pid
    assert calls == [("ping", {})]  # the send never ran


def test_a_peer_that_cannot_be_looked_up_is_refused_with_the_reason(tmp_path: Path) -> None:
    def gone(pid: int) -> Caller:
        raise ProcessLookupError(pid)

    path = tmp_path / "s.sock"
    with serving(path, FakeCallers(gone)) as calls:
        reply = _ask(path, "ping")
    assert reply == {"ok": False, "error": f"permission denied: the calling process (pid {os.getpid()}) "
                                           "ended before agentd could tell which unit it is in"}
    assert calls == []
    def broken(pid: int) -> Caller:
        raise KeyError(pid)

    with serving(path, FakeCallers(broken)) as calls:
        reply = _ask(path, "ping")
    assert reply == {"ok": False, "error": f"permission denied: agentd could not tell which unit pid {os.getpid()} is "
                                           f"in (KeyError: {os.getpid()})"}
    assert calls == []
    assert json.dumps(Caller.of_unit("a", "s").log_fields()) == \
        '{"caller": "unit", "caller_unit": "a", "caller_session": "s", "caller_pid": 0}'
    assert Caller.operator().kind is Kind.OPERATOR


NAMESPACED_SERVER = """
import asyncio, sys
from pathlib import Path
from supervisor.control.access import ANYONE, Caller
from supervisor.control.server import Command, ControlServer

class Everyone:
    def caller(self, pid):
        return Caller.operator(pid)

async def main():
    async def ping(args):
        return {}
    server = ControlServer(Path(sys.argv[1]), {"ping": Command(ping, who=ANYONE)}, callers=Everyone())
    await server.start()
    print("serving", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def test_a_peer_the_daemons_pid_namespace_cannot_see_is_refused(tmp_path: Path) -> None:
    """The server in a pid namespace of its own, the client (this test) outside it: SO_PEERCRED says pid 0."""
    path = tmp_path / "ns" / "s.sock"
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c", NAMESPACED_SERVER, str(path)]
    try:
        server = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        pytest.skip("no unshare(1) on this machine")
    try:
        assert server.stdout is not None
        if server.stdout.readline() != "serving\n":
            pytest.skip(f"no pid namespace here: {server.stderr.read() if server.stderr else ''}")
        reply = _ask(path, "ping")
    finally:
        server.kill()
        server.wait(10)
    assert reply == {"ok": False, "error": "permission denied: the calling process is not visible from agentd's pid "
                                           "namespace, so its unit cannot be told"}
