"""The real daemon with real PTYs, signals, sockets and the fake agent."""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from supervisor.control.client import Client
from supervisor.fakeagent import flood_payload
from tests.conftest import Project, alive, clean_env, processes_of, raw_request, stays, wait_until


def test_start_status_stop_ends_every_process(project: Project) -> None:
    project.fake_unit("worker", "--spawn-grandchild", "--spawn-setsid-grandchild")
    project.fake_unit("stubborn", "--ignore-sigterm", stop_timeout=1)
    project.agentd("start")
    worker = project.wait_state("worker", "running")
    stubborn = project.wait_state("stubborn", "running")
    assert alive(worker["pid"]) and alive(stubborn["pid"])
    kids = project.grandchildren("worker", 2)
    sids = {os.getsid(pid) for pid in kids}
    assert len(sids) == 2, "one grandchild must have escaped into its own session"
    daemon = project.daemon_pid()
    assert daemon and alive(daemon)
    # the human table and the LSB exit code
    table = project.agentd("status")
    assert re.search(r"worker\s+running\s+%d" % worker["pid"], table.stdout)
    everything = [worker["pid"], stubborn["pid"], *kids]

    project.agentd("stop", "--now")  # no checkpoint: straight to TERM, then KILL

    for pid in everything + [daemon]:
        assert not alive(pid), f"pid {pid} survived agentd stop"
    assert processes_of(project.root) == []
    assert not (project.state / "agentd.sock").exists()
    assert not (project.state / "agentd.pid").exists()
    timeouts = [e for e in project.events("stop_timeout") if e["unit"] == "stubborn"]
    assert timeouts, "the SIGTERM-ignoring agent must be killed after its stop timeout"
    assert project.agentd("status", check=False).returncode == 3


def test_crash_loop_backs_off_then_fails_and_reset_failed_restarts(project: Project) -> None:
    project.fake_unit(
        "crashy", "--crash-after", "0", "--exit-code", "3",
        restart="initial_delay = 0.2\nmultiplier = 2\nburst = 4\ninterval = 120",
    )
    project.agentd("start")
    row = project.wait_state("crashy", "failed", timeout=60)
    assert "start limit" in row["reason"] and "exit 3" in row["reason"]
    assert row["last_exit"] == "exit 3"
    delays = [e["delay"] for e in project.events("unit_state") if e["unit"] == "crashy" and e["new"] == "backoff"]
    assert delays == [0.2, 0.4, 0.8]
    assert row["restarts"] == 3
    assert "failed" in project.agentd("status").stdout

    runs_before = len([e for e in project.events("unit_state") if e["unit"] == "crashy" and e["new"] == "running"])
    project.agentd("reset-failed", "crashy")
    wait_until(
        lambda: len([e for e in project.events("unit_state") if e["unit"] == "crashy" and e["new"] == "running"]) > runs_before,
        30, what="a new session after reset-failed",
    )


def test_commanded_stop_is_not_a_crash(project: Project) -> None:
    project.fake_unit("always", restart='policy = "always"\ninitial_delay = 0.1')
    project.agentd("start")
    pid = project.wait_state("always", "running")["pid"]
    project.agentd("stop", "always")
    row = project.unit_status("always")
    assert row["state"] == "inactive" and row["reason"] == "stop command"
    assert not alive(pid)
    # a restart after 0.1 s would have happened many times over in this window
    assert stays(lambda: project.unit_status("always")["state"] == "inactive", 2.0)
    assert not [e for e in project.events("unit_state") if e["unit"] == "always" and e["new"] == "backoff"]
    # an exit the agent chose itself *is* restarted under policy = always
    project.agentd("start", "always")
    project.wait_state("always", "running")
    project.agentd("send", "always", "exit")
    wait_until(lambda: [e for e in project.events("unit_state") if e["unit"] == "always" and e["new"] == "backoff"], 30,
               what="a backoff after the agent exited by itself")


BAD_UNITS = {
    "typo": ('[agent]\ncommand = ["python"]\ncomand = 1\n', "[agent] comand"),
    "syntax": ('[agent\ncommand = ["python"]\n', "not valid TOML"),
    "enum": ('[agent]\ncommand = ["python"]\n[restart]\npolicy = "sometimes"\n', "[restart] policy"),
    "nocmd": ('[agent]\nkind = "generic"\n', "[agent] command: is required"),
    "notfound": ('[agent]\ncommand = ["no-such-agent-binary"]\n', "not found on PATH"),
    "Bad-Name": ('[agent]\ncommand = ["python"]\n', "not valid"),
}


def test_malformed_units_are_reported_and_the_others_run(project: Project) -> None:
    project.fake_unit("good")
    for name, (text, _) in BAD_UNITS.items():
        project.unit(name, text)
    started = project.agentd("start", check=False)
    # the daemon runs the good unit, and start says which files it refused, with exit 1
    assert started.returncode == 1 and "agentd started" in started.stdout
    assert all("refused: " in started.stderr and f"{name}.toml" in started.stderr for name in BAD_UNITS)
    project.wait_state("good", "running")
    status = project.status()
    assert [row["unit"] for row in status["units"]] == ["good"]
    for name, (_, fragment) in BAD_UNITS.items():
        matching = [e for e in status["errors"] if f"{name}.toml" in e]
        assert matching and fragment in matching[0], (name, status["errors"])
    table = project.agentd("status").stdout
    assert "error:" in table and "typo.toml" in table
    # the offline check command reports the same, with a non-zero exit
    check = project.agentd("check", check=False)
    assert check.returncode == 1 and "typo.toml" in check.stdout + check.stderr

    # a unit that turns malformed on reload keeps running as it was
    pid = project.unit_status("good")["pid"]
    project.unit("good", '[agent]\ncommand = ["python"]\nbogus = true\n')
    report = project.agentd("reload", check=False)
    assert report.returncode == 1 and "refused: " in report.stderr and "good.toml" in report.stderr
    row = project.unit_status("good")
    assert row["state"] == "running" and row["pid"] == pid
    # the reload says so of every unit, with why: kept on its old definition, or never loaded (issue 27 §2)
    lines = report.stdout.splitlines()
    assert any(ln.startswith("good: kept on its old definition: ") and "bogus" in ln for ln in lines), report.stdout
    assert any(ln.startswith("typo: not loaded: ") for ln in lines), report.stdout
    assert "kept: -" in report.stdout  # "kept" is for units whose file loads unchanged
    # a unit whose file does not load is "not loaded", with why, not "no such unit"
    typo = project.agentd("start", "typo", check=False)
    assert typo.returncode != 0 and "unit 'typo' is not loaded: " in typo.stderr and "no such unit" not in typo.stderr


def test_reload_keeps_restarts_starts_and_stops(project: Project) -> None:
    project.fake_unit("same")
    project.fake_unit("changed")
    project.fake_unit("removed")
    project.agentd("start")
    pids = {name: project.wait_state(name, "running")["pid"] for name in ("same", "changed", "removed")}
    project.fake_unit("changed", "--banner", "changed banner")
    project.fake_unit("added")
    (project.root / "units" / "removed.toml").unlink()
    out = project.agentd("reload").stdout
    assert "started: added" in out and "stopped: removed" in out
    assert "restarted: changed" in out and "kept: same" in out
    assert project.unit_status("same")["pid"] == pids["same"]
    changed = project.wait_state("changed", "running")
    assert changed["pid"] != pids["changed"] and not alive(pids["changed"])
    assert project.unit_status("removed") is None and not alive(pids["removed"])
    project.wait_state("added", "running")
    wait_until(lambda: "changed banner" in project.transcript("changed", changed["session"]), 20, what="the new banner")


def test_daemon_killed_then_started_again_ends_old_agents(project: Project) -> None:
    project.fake_unit("survivor", "--ignore-sighup", "--spawn-setsid-grandchild")
    project.agentd("start")
    row = project.wait_state("survivor", "running")
    kid = project.grandchildren("survivor", 1)[0]
    old = [psutil.Process(row["pid"]), psutil.Process(kid)]
    # nothing to wait for: the grandchild was born inside the session's cgroup (or is found by its environment)
    daemon = project.daemon_pid()
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not alive(daemon), 10, what="the daemon to die")
    assert (project.state / "agentd.sock").exists(), "precondition: a stale socket is left behind"
    assert all(p.is_running() for p in old), "precondition: the SIGHUP-ignoring agent outlived the daemon"

    project.agentd("start")
    new = project.wait_state("survivor", "running")
    assert new["pid"] != row["pid"]
    wait_until(lambda: not any(alive(p.pid, p.create_time()) for p in old), 30, what="the old agent tree to be ended")
    ended = project.events("containment_leftovers_ended")
    assert ended and any(name.startswith(f"survivor@{row['session']}") for name in ended[0]["ended"]), ended


def _nobody_connect(sock_path: Path, payload: bytes) -> subprocess.CompletedProcess[str]:
    code = (
        "import socket,struct,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        "try:\n s.connect(sys.argv[1])\n"
        "except PermissionError as e:\n print('EACCES'); sys.exit(0)\n"
        "try:\n s.sendall(bytes.fromhex(sys.argv[2]))\n"
        "except BrokenPipeError:\n pass  # refused before reading: the reply is still readable\n"
        "h=s.recv(4)\n"
        "n=struct.unpack('>I',h)[0]\n"
        "b=b''\n"
        "while len(b)<n: b+=s.recv(n-len(b))\n"
        "print(b.decode())\n"
    )
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", code,
         str(sock_path), payload.hex()],
        capture_output=True, text=True, timeout=30,
    )


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to act as a second uid (tests/test_control.py proves the "
                           "refusal as any user)")
def test_control_socket_is_owner_only_and_survives_bad_requests(project: Project) -> None:
    from supervisor.control.framing import MAX_MESSAGE, encode

    # A state directory that a second uid could reach if agentd let it (pytest's tmp is 0700).
    base = Path(tempfile.mkdtemp(prefix="agentd-sock-"))
    os.chmod(base, 0o711)
    state = base / "state"
    env = clean_env(AGENTD_STATE_DIR=str(state))
    project.state_override = state
    try:
        project.fake_unit("agent")
        project.agentd("start", env=env)
        sock = state / "agentd.sock"
        assert sock.stat().st_mode & 0o777 == 0o600
        assert state.stat().st_mode & 0o777 == 0o700
        ping = encode({"cmd": "ping"})
        # The file modes stop uid 65534 at connect().
        assert _nobody_connect(sock, ping).stdout.strip() == "EACCES"
        # With the modes opened up by hand, SO_PEERCRED still refuses it.
        os.chmod(state, 0o711)
        os.chmod(sock, 0o666)
        reply = _nobody_connect(sock, ping)
        assert "permission denied: uid 65534" in reply.stdout, reply
        os.chmod(sock, 0o600)
        os.chmod(state, 0o700)

        assert "unknown command" in raw_request(sock, encode({"cmd": "__class__"}))["error"]
        assert "exceeds" in raw_request(sock, struct.pack(">I", MAX_MESSAGE + 1) + b"x" * 1024)["error"]
        assert raw_request(sock, ping)["ok"]
        assert project.agentd("status", "--json", env=env).returncode == 0
        refused = [e for e in project.events("control_refused")]
        assert refused and refused[0]["peer_uid"] == 65534
    finally:
        project.agentd("stop", env=env, check=False)
        shutil.rmtree(base, ignore_errors=True)


SECRET_KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
SECRET_TOKEN = "ghx-token-value-9f8e7d6c5b4a"
SECRET_BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.signature123"


def test_secrets_never_reach_the_state_directory(project: Project) -> None:
    project.unit(
        "leaky",
        f"""
[agent]
command = ["python", "-m", "supervisor.fakeagent", "--print-env", "OPENAI_API_KEY", "--print-env", "SERVICE_TOKEN"]
env = {{ OPENAI_API_KEY = "{SECRET_KEY}", SERVICE_TOKEN = "{SECRET_TOKEN}" }}
""",
    )
    project.agentd("start")
    project.wait_state("leaky", "running")
    project.agentd("send", "leaky", f"echo Authorization: Bearer {SECRET_BEARER} and {SECRET_KEY[:20]}XYZxyz0123456789abc")
    wait_until(lambda: "[REDACTED]" in project.transcript("leaky") and project.transcript("leaky").count("fake>") >= 2, 30,
               what="the echoed line")
    project.agentd("stop")
    files = [p for p in project.state.rglob("*") if p.is_file()]
    assert any(p.suffix == ".log" and "transcripts" in p.parts for p in files)
    for path in files:
        data = path.read_bytes()
        for secret in (SECRET_KEY, SECRET_TOKEN, SECRET_BEARER, SECRET_KEY[:20]):
            assert secret.encode() not in data, f"{secret[:12]}... leaked into {path}"


def test_flood_arrives_byte_for_byte_while_status_answers(project: Project) -> None:
    size = 24 * 1024 * 1024
    project.fake_unit("flood")
    project.agentd("start")
    project.wait_state("flood", "running")
    wait_until(lambda: project.transcript("flood").endswith("fake> "), 20, what="the first prompt")
    log_files = lambda: sorted((project.state / "transcripts" / "flood").glob("*.log"))  # noqa: E731
    before = project.unit_status("flood")["transcript_bytes"]
    project.agentd("send", "flood", f"flood {size}")
    during: list[int] = []  # what status said while the flood was still arriving

    with Client(project.state / "agentd.sock", timeout=30) as client:
        def flood_done() -> bool:
            seen = client.call("status", units=["flood"])["units"][0]["transcript_bytes"] or 0
            if before < seen < size:
                during.append(seen)
            return seen >= size and log_files()[-1].read_bytes().endswith(b"fake> ")

        wait_until(flood_done, 120, interval=0.01, what="the whole flood in the transcript")
    # status answered again and again while the flood went through, each time with more of it:
    # a loop blocked by the flood would answer only before or after it
    assert len(set(during)) >= 3 and during == sorted(during), during
    raw = log_files()[-1].read_bytes()
    expected = flood_payload(size).replace(b"\n", b"\r\n")  # the PTY's onlcr
    start = raw.index(b"00000000 the quick")
    assert raw[start:start + len(expected)] == expected
    assert raw[start + len(expected):] == b"fake> "
