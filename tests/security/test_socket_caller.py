"""The control socket knows which unit is calling (issue 25 §2), with the real daemon and a fenced agent.

Agent ``a`` (the fake agent under Landlock) runs tests/security/hostile_caller.py,
which asks the daemon for everything a unit must not have: another unit's
anything, and every command of the operator's, from its own tree and from
processes made to look like someone else's (orphans, a child placed in ``b``'s
cgroup, forged ``AGENTD_*`` variables, ``/proc/DAEMON/root``).  Each refusal
must name the caller's unit and the command; afterwards nothing has changed:
``b`` runs the same process, nothing was typed into it, no task reached it, no
dashboard token was handed out, the daemon still runs.  The test process is
the operator (outside every unit) and keeps every right.

Each test runs in both containment modes (``cgroup``: root here; ``subreaper``:
forced with ``AGENTD_CONTAINMENT``), as tests/test_containment_daemon.py does.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import AGENTD, Project, clean_env, read_reply, wait_until

HOSTILE = Path(__file__).with_name("hostile_caller.py")
MODES = ("cgroup", "subreaper")


def _env(mode: str) -> dict[str, str]:
    return clean_env(AGENTD_CONTAINMENT="auto" if mode == "cgroup" else "subreaper")


def _results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run_hostile(project: Project, mode: str) -> tuple[list[dict], dict, dict]:
    """Units ``a`` and ``b`` running; ``a``'s agent runs the hostile script.  (results, a's row, b's row)."""
    results = project.root.parent / "hostile-results.jsonl"
    results.touch()
    for name in ("a", "b"):
        project.fake_unit(name, writable=(str(results),))
    project.agentd("start", env=_env(mode))
    a, b = project.wait_state("a", "running"), project.wait_state("b", "running")
    assert a["scope"].startswith("fenced") and project.status()["daemon"]["containment"]["mode"] == mode
    daemon = project.daemon_pid()
    assert "token=" in project.agentd("web").stdout  # the dashboard is served: its token is there to be had
    project.agentd("send", "a", f"run python {HOSTILE} {results} b {b['session']} {daemon}")
    wait_until(lambda: any(r["case"] == "done" for r in _results(results)), 120, what="the hostile script to finish")
    return _results(results), a, b


def _refused(reply: dict | None, cmd: str) -> bool:
    return bool(reply) and reply.get("ok") is False and "unit 'a'" in reply["error"] and repr(cmd) in reply["error"]


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_is_refused_everything_but_its_own_units_and_nothing_changes(project: Project, mode: str) -> None:
    found, a, b = _run_hostile(project, mode)
    forbidden = [r for r in found if r["case"] == "forbidden"]
    assert len(forbidden) == 25
    for r in forbidden:
        assert _refused(r.get("reply"), r["cmd"]), r
    assert {r["cmd"] for r in forbidden} == {"send", "queue", "stop", "start", "restart", "checkpoint", "reset-failed",
                                             "status", "agent-event", "attach", "reload", "web", "broadcast", "shutdown"}
    assert all("only the operator may" in r["reply"]["error"] for r in forbidden
               if r["cmd"] not in ("status", "agent-event"))
    # what a unit may do: ping, its own status, its own agent events (the unit and session come from the kernel)
    allowed = {r["cmd"]: r["reply"] for r in found if r["case"] == "allowed"}
    assert all(reply["ok"] for reply in allowed.values()), allowed
    assert [u["unit"] for u in allowed["status"]["result"]["units"]] == ["a"]
    assert "meanings" in allowed["agent-event"]["result"]  # heard for a's current session (not "ignored")

    # orphans: one that kept a's session is a's; one that also left it (setsid) is no unit's: ping only
    orphan = {r["cmd"]: r["reply"] for r in found if r["case"] == "orphan" and "cmd" in r}
    assert [u["unit"] for u in orphan["status"]["result"]["units"]] == ["a"]
    assert _refused(orphan["send"], "send") and _refused(orphan["agent-event"], "agent-event")
    stray = {r["cmd"]: r["reply"] for r in found if r["case"] == "setsid-orphan" and "cmd" in r}
    assert stray["ping"]["ok"]
    for cmd in ("status", "send", "agent-event"):
        assert not stray[cmd]["ok"] and "no unit claims" in stray[cmd]["error"] and "may only ping" in stray[cmd]["error"]
    adopted = {r["case"]: r for r in found if "adopted_by_daemon" in r}
    assert adopted["orphan"]["adopted_by_daemon"] and adopted["setsid-orphan"]["adopted_by_daemon"], adopted
    assert adopted["setsid-orphan"]["own_session"] and not adopted["setsid-child"]["adopted_by_daemon"]
    child = {r["cmd"]: r["reply"] for r in found if r["case"] == "setsid-child" and "cmd" in r}
    assert [u["unit"] for u in child["status"]["result"]["units"]] == ["a"]  # its parent still ties it to a

    if mode == "cgroup":  # the kernel let the agent start a child in b's group: it is still a's, by ancestry
        (moved,) = [r for r in found if r["case"] == "clone3-cgroup"]
        assert moved.get("group", "").split("/")[-1] == f"b@{b['session']}", moved
        clone3 = {r["cmd"]: r["reply"] for r in found if r["case"] == "clone3"}
        assert [u["unit"] for u in clone3["status"]["result"]["units"]] == ["a"]
        assert _refused(clone3["agent-event"], "agent-event")

    # agentd itself, run with a forged AGENTD_UNIT / AGENTD_SESSION: still a
    cli = {r["case"]: r for r in found if r["case"].startswith(("forged-", "cli-"))}
    assert "permission denied: unit 'a' may run 'agent-event' only for itself, not for 'b'" in cli["forged-notify"]["stderr"]
    assert [u["unit"] for u in json.loads(cli["forged-status"]["stdout"])["units"]] == ["a"]
    # `agentd task` inside a unit is refused before it reaches the socket (it would rewrite .agent/);
    # the raw `queue` request it sends is refused by the socket above
    assert cli["cli-task"]["code"] != 0 and "read-only inside a unit" in cli["cli-task"]["stderr"]
    # the daemon's descriptors stay out of reach (Landlock refuses ptrace-class access to it)
    descriptors = {r["case"]: r for r in found if r["case"] in ("proc-fd", "pidfd_getfd", "via-proc-root")}
    proc_fd = descriptors["proc-fd"]  # the names may be listed; no descriptor is opened or even read
    assert proc_fd["open"] and set(proc_fd["open"].values()) == {13} and set(proc_fd["readlink"].values()) == {13}, proc_fd
    assert descriptors["pidfd_getfd"]["results"] == [-1], descriptors  # EPERM for every descriptor
    via_root = descriptors["via-proc-root"]
    assert "error" in via_root or _refused(via_root["reply"], "send"), via_root

    # nothing changed: b runs the same process, was typed nothing and told nothing, the daemon runs
    assert project.unit_status("b")["pid"] == b["pid"] and project.unit_status("b")["state"] == "running"
    assert project.unit_status("a")["pid"] == a["pid"]
    assert not any("FROM-A-" in m for s in project.inputs("b") for m in s), project.inputs("b")
    assert not any("FROM-A-" in m for m in project.last_inputs("a")[1:])  # a's own: only the operator's run
    token = (project.state / "web-token").read_text().strip()
    assert len(token) >= 20 and token not in json.dumps(found)
    assert not any("url" in json.dumps(r.get("reply", {}).get("result") or {}) for r in found)
    refused = project.events("control_refused")
    assert any(e.get("caller_unit") == "a" and e.get("cmd") == "shutdown" for e in refused), refused[-3:]

    # the operator (this process, outside every unit) keeps every right
    project.agentd("send", "b", "echo operator-was-here")
    wait_until(lambda: "echo operator-was-here" in project.last_inputs("b"), 30, what="the operator's send")
    assert {u["unit"] for u in project.status()["units"]} == {"a", "b"}
    assert f"token={token}" in project.agentd("web").stdout  # still served: the agent's `web --stop` was refused
    project.agentd("web", "--stop")
    project.agentd("stop", "b")
    assert project.unit_status("b")["state"] == "inactive"


def test_an_agent_of_another_daemon_is_a_stray_to_this_one(project: Project, tmp_path: Path) -> None:
    """A second daemon's socket (another project of the same user): a's agent reaches it, with no rights there."""
    other = Project(tmp_path / "other")
    try:
        other.fake_unit("c")
        other.agentd("start")
        other.wait_state("c", "running")
        results = project.root.parent / "hostile-results.jsonl"
        results.touch()
        probe = project.root.parent / "probe.py"
        probe.write_text(PROBE)
        project.fake_unit("a", writable=(str(results),))
        project.agentd("start")
        project.wait_state("a", "running")
        sock = other.state / "agentd.sock"
        project.agentd("send", "a", f"run python {probe} {sock} {results}")
        found = wait_until(lambda: (r := _results(results)) and len(r) == 3 and r, 60, what="the probe's answers")
        ping, status, send = (r["reply"] for r in found)
        assert ping["ok"]
        for reply in (status, send):
            assert not reply["ok"] and "an agent of another agentd daemon" in reply["error"], reply
        assert other.unit_status("c")["state"] == "running" and not any("FROM-A" in m for m in other.last_inputs("c"))
        # and the operator of both is still the operator of each
        assert other.agentd("send", "c", "echo hi").returncode == 0
    finally:
        other.cleanup()


PROBE = """
import json, socket, struct, sys
sock_path, results = sys.argv[1], sys.argv[2]
for cmd, args in (("ping", {}), ("status", {}), ("send", {"unit": "c", "text": "FROM-A"})):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock_path)
        body = json.dumps({"cmd": cmd, "args": args}).encode()
        s.sendall(struct.pack(">I", len(body)) + body)
        size = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
        reply = json.loads(s.recv(size, socket.MSG_WAITALL))
    with open(results, "a") as f:
        f.write(json.dumps({"case": cmd, "reply": reply}) + "\\n")
"""


def test_a_deep_frame_and_other_bad_json_are_protocol_errors_and_the_daemon_serves_on(project: Project) -> None:
    project.fake_unit("u")
    project.agentd("start")
    project.wait_state("u", "running")
    path = project.state / "agentd.sock"
    for body, why in ((b"[" * 100_000, "nested"), (b'{"cmd": "ping", "args": {"n": ' + b"9" * 5000 + b"}}", "integer"),
                      (b'{"cmd": "ping", "args": {"n": NaN}}', "NaN"), (b'{"cmd": "ping", "x": "\\ud800"}', "surrogate"),
                      (b'{"cmd": "ping", "x": 1e999}', "finite")):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(path))
            sock.sendall(len(body).to_bytes(4, "big") + body)
            reply = read_reply(sock)
        assert reply["ok"] is False and reply["error"].startswith("protocol error:") and why in reply["error"], reply
    assert not project.events("control_connection_failed") and project.unit_status("u")["state"] == "running"
    assert subprocess.run([*AGENTD, "--root", str(project.root), "status"], env=clean_env(), capture_output=True,
                          timeout=60).returncode == 0
