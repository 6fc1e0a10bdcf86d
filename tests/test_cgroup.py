"""Containment with real processes: a cgroup v2 per session, and the subreaper fallback.

Each scenario starts an agent-like shell through ``Session.spawn`` with the
containment's child step, including a ``setsid`` grandchild started more than
2 s in (the case the recorded tree used to miss, issue 13 item 6), and checks
that every process is found and ended.  The subreaper mode changes the process
that enables it, so those scenarios run in a child Python process.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from supervisor.session.cgroup import CgroupUnavailable, Group, find_parent, own_cgroup, project_key
from supervisor.session.containment import (
    CgroupContainment,
    Limits,
    Member,
    Mode,
    is_child_subreaper,
)
from supervisor.session.subreaper import discover
from supervisor.session.process import ProcessRecord
from supervisor.session.pty import Session, SpawnError

from .conftest import processes_of, wait_until

REPO = Path(__file__).resolve().parent.parent
#: A shell that ignores hangups (so a crashed daemon's PTY closing does not end it), with a child at once and
#: a setsid grandchild 2.5 s later whose parent then exits (an orphan in a session of its own).
LATE_SETSID = "trap '' HUP; sleep 3000 & (sleep 2.5; setsid sleep 3001 &) & wait"


def _env(root: Path, member: Member) -> dict[str, str]:
    return dict(os.environ, AGENTD_ROOT=str(root), AGENTD_UNIT=member.unit, AGENTD_SESSION=member.session_id)


def _spawn(containment: CgroupContainment, member: Member, root: Path, script: str) -> Session:
    session = Session(member.unit, ["sh", "-c", script], env=_env(root, member), cwd=root, rows=24, cols=80,
                      transcript_dir=root / "transcripts", redact_env={}, session_id=member.session_id)
    step = containment.child_step(member)
    session.spawn([step] if step else [])
    containment.started(member, session.pid, session.create_time)
    return session


def _by_cmd(procs: list[psutil.Process], *cmd: str) -> psutil.Process | None:
    for proc in procs:
        try:
            if proc.cmdline() == list(cmd):
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.fixture
def containment(tmp_path: Path):
    c = discover(tmp_path)
    sessions: list[Session] = []
    yield c, sessions
    for member in list(c.members.values()):
        asyncio.run(c.kill(member))
        c.release(member)
    for session in sessions:
        wait_until(lambda: session.reap() is not None, timeout=10, what="the leader's exit")
        session.close()
    asyncio.run(c.cleanup_leftovers())
    c.close()
    for proc in processes_of(tmp_path):
        proc.kill()


def test_discovery_picks_a_root_owned_parent_on_this_machine(tmp_path: Path) -> None:
    parent = find_parent(tmp_path)
    assert parent.how == "root"  # root, in the root group of the hierarchy: no delegation to use
    assert parent.path == parent.mount / "agentd" / project_key(tmp_path)
    assert (parent.path / "cgroup.procs").exists()
    parent.path.rmdir()


def test_a_late_setsid_grandchild_is_in_the_group_and_ends_with_it(containment, tmp_path: Path) -> None:
    c, sessions = containment
    assert c.mode is Mode.CGROUP
    member = c.add("web", "20261201T000000-aaaaaa")
    session = _spawn(c, member, tmp_path, LATE_SETSID)
    sessions.append(session)
    late = wait_until(lambda: _by_cmd(c.processes(member), "sleep", "3001"), timeout=20, what="the late grandchild")
    procs = c.processes(member)
    child = _by_cmd(procs, "sleep", "3000")
    assert child is not None and session.pid in [p.pid for p in procs]
    assert os.getsid(late.pid) != os.getsid(session.pid)  # it escaped the agent's session ...
    assert late.ppid() != session.pid  # ... and its parent: a tree walk from the leader misses it
    for proc in (late, child, psutil.Process(session.pid)):
        assert member.group.contains(proc.pid), f"{proc.pid} is not in {member.group.path}"
    records = [ProcessRecord(p.pid, p.create_time()) for p in procs]

    ended = asyncio.run(c.end(member, timeout=2.0))

    assert ended.empty
    assert [r.pid for r in records if r.alive() is not None] == []
    assert c.processes(member) == []
    wait_until(lambda: session.reap() is not None, timeout=10, what="the leader's exit")
    c.release(member)
    assert not member.group.path.exists()


def test_end_escalates_to_sigkill_for_a_tree_that_ignores_sigterm(containment, tmp_path: Path) -> None:
    c, sessions = containment
    member = c.add("stubborn", "20261201T000000-abcdef")
    session = _spawn(c, member, tmp_path, "trap '' TERM; sleep 3008 & wait")
    sessions.append(session)
    child = wait_until(lambda: _by_cmd(c.processes(member), "sleep", "3008"), timeout=20, what="the child")

    ended = asyncio.run(c.end(member, timeout=0.5))

    assert ended.empty
    assert set(ended.killed) == {session.pid, child.pid}  # both ignored SIGTERM (inherited) and needed SIGKILL
    assert c.processes(member) == []


def test_kill_without_cgroup_kill_freezes_and_kills_until_empty(containment, tmp_path: Path) -> None:
    c, sessions = containment
    member = c.add("forker", "20261201T000000-bbbbbb")
    sessions.append(_spawn(c, member, tmp_path, "trap '' TERM; while :; do sh -c 'sleep 3005' & sleep 0.05; done"))
    wait_until(lambda: len(c.processes(member)) >= 5, timeout=20, what="a few forked children")
    records = [ProcessRecord(p.pid, p.create_time()) for p in c.processes(member)]

    assert asyncio.run(member.group.kill(5.0, use_kill_file=False))

    assert not member.group.populated()
    assert [r.pid for r in records if r.alive() is not None] == []
    assert (member.group.path / "cgroup.freeze").read_text().strip() == "0"  # thawed again


def test_usage_reports_the_group_cpu_and_memory(containment, tmp_path: Path) -> None:
    c, sessions = containment
    member = c.add("busy", "20261201T000000-cccccc")
    burn = f"{sys.executable} -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n'; sleep 3006"
    sessions.append(_spawn(c, member, tmp_path, burn))
    wait_until(lambda: _by_cmd(c.processes(member), "sleep", "3006"), timeout=30, what="the burner to finish")
    usage = c.usage(member)
    # The burner has exited: its CPU time is still the group's (cpu.stat counts every process that ran in it).
    assert usage.cpu_seconds >= 0.5
    assert usage.memory_bytes > 0
    has_memory = "memory" in (member.group.path.parent / "cgroup.controllers").read_text().split()
    assert usage.memory_source == ("memory.current" if has_memory else "rss")


def test_limits_are_applied_or_reported_unavailable(containment, tmp_path: Path) -> None:
    c, _ = containment
    mount_controllers = (c.parent.mount / "cgroup.controllers").read_text().split()
    member = c.add("limited", "20261201T000000-dddddd", Limits(memory_max=256 << 20, cpu_weight=50))
    for controller, filename, value in (("memory", "memory.max", str(256 << 20)), ("cpu", "cpu.weight", "50")):
        if controller in mount_controllers:
            assert (member.group.path / filename).read_text().strip() == value
            assert f"{filename}={value}" in member.limits_applied
        else:  # this machine: only hugetlb in the v2 root
            assert any(f"the {controller} controller is not available" in r for r in member.limits_unavailable)
            assert not (member.group.path / filename).exists()


def test_a_failed_join_fails_the_spawn_so_nothing_runs_outside(containment, tmp_path: Path) -> None:
    c, _ = containment
    member = c.add("web", "20261201T000000-eeeeee")
    step = c.child_step(member)
    member.group.path.rmdir()  # the group vanishes between preparation and fork
    session = Session("web", ["sh", "-c", "touch ran; sleep 3007"], env=_env(tmp_path, member), cwd=tmp_path,
                      rows=24, cols=80, transcript_dir=tmp_path / "transcripts", redact_env={})
    with pytest.raises(SpawnError, match="cannot join cgroup"):
        session.spawn([step])
    assert step.fd == -1  # the parent's descriptor is closed either way
    assert not (tmp_path / "ran").exists()


CRASHING_DAEMON = textwrap.dedent("""
    import asyncio, json, os, sys, time
    from pathlib import Path
    from supervisor.session.subreaper import discover
    from supervisor.session.pty import Session
    root, mode, script = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    c = discover(root, use_cgroup=mode == "cgroup")
    m = c.add("web", "20261201T000000-ffffff")
    env = dict(os.environ, AGENTD_ROOT=str(root), AGENTD_UNIT="web", AGENTD_SESSION=m.session_id)
    s = Session("web", ["sh", "-c", script], env=env, cwd=root, rows=24, cols=80,
                transcript_dir=root / "transcripts", redact_env={}, session_id=m.session_id)
    step = c.child_step(m)
    s.spawn([step] if step else [])
    c.started(m, s.pid, s.create_time)
    def cmd(p):
        try:
            return p.cmdline()
        except Exception:  # gone meanwhile
            return []

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        procs = [(p, cmd(p)) for p in c.processes(m)]
        if any(argv == ["sleep", "3001"] for _, argv in procs):
            break
        time.sleep(0.05)
    print(json.dumps({"mode": c.mode.value, "group": str(m.group.path) if m.group else None,
                      "procs": [[p.pid, p.create_time()] for p, argv in procs if argv]}), flush=True)
    time.sleep(600)
""")

CLEANUP = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    from supervisor.session.subreaper import discover
    c = discover(Path(sys.argv[1]), use_cgroup=sys.argv[2] == "cgroup")
    print(json.dumps({"mode": c.mode.value, "removed": asyncio.run(c.cleanup_leftovers())}), flush=True)
""")


def _python(script: str, *args: str, **kwargs) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, env=env, text=True, **kwargs)


@pytest.mark.parametrize("mode", ["cgroup", "subreaper"])
def test_leftovers_of_a_crashed_daemon_are_ended(tmp_path: Path, mode: str) -> None:
    daemon = _python(CRASHING_DAEMON, str(tmp_path), mode, LATE_SETSID, stdout=subprocess.PIPE)
    try:
        line = daemon.stdout.readline()
        assert line, "the daemon printed nothing"
        state = json.loads(line)
        assert state["mode"] == mode
        records = [ProcessRecord(pid, ctime) for pid, ctime in state["procs"]]
        assert len(records) >= 3  # sh, sleep 3000, sleep 3001 (and maybe the subshell, about to exit)
        daemon.kill()  # the crash
        daemon.wait(timeout=10)
        left = [r for r in records if r.alive() is not None]
        assert len(left) >= 3  # left behind: the shell ignores the hangup, and the orphan

        cleanup = _python(CLEANUP, str(tmp_path), mode, stdout=subprocess.PIPE)
        out, _ = cleanup.communicate(timeout=60)
        result = json.loads(out)

        assert result["mode"] == mode
        assert result["removed"], "the cleanup found nothing"
        wait_until(lambda: not [r for r in records if r.alive() is not None], timeout=10, what="the leftovers to end")
        if mode == "cgroup":
            assert result["removed"] == ["web@20261201T000000-ffffff"]
            assert not Path(state["group"]).exists()
    finally:
        daemon.kill()
        daemon.wait(timeout=10)
        for proc in processes_of(tmp_path):
            proc.kill()
        if mode == "cgroup":
            c = discover(tmp_path)
            asyncio.run(c.cleanup_leftovers())
            c.close()


SUBREAPER = textwrap.dedent("""
    import asyncio, json, os, sys, time
    from pathlib import Path
    from supervisor.session.containment import is_child_subreaper
    from supervisor.session.subreaper import discover
    from supervisor.session.process import ProcessRecord
    from supervisor.session.pty import Session
    root = Path(sys.argv[1])
    c = discover(root, use_cgroup=False)
    out = {"mode": c.mode.value, "subreaper": is_child_subreaper(), "detail": c.detail}

    def spawn(sid, script):
        m = c.add("web", sid)
        env = dict(os.environ, AGENTD_ROOT=str(root), AGENTD_UNIT="web", AGENTD_SESSION=sid)
        s = Session("web", ["sh", "-c", script], env=env, cwd=root, rows=24, cols=80,
                    transcript_dir=root / "transcripts", redact_env={}, session_id=sid)
        s.spawn()
        c.started(m, s.pid, s.create_time)
        return m, s

    def cmd(p):
        try:
            return " ".join(p.cmdline())
        except Exception:  # gone meanwhile
            return ""

    def cmds(m):
        return sorted(cmd(p) for p in c.processes(m))

    # one: a child, then after 2.5 s two orphans in sessions of their own, one with its environment wiped
    # (but for AGENTD_ROOT, so that the test can end it should this script fail)
    m1, s1 = spawn("s1", "trap '' HUP; sleep 3000 & (sleep 2.5; setsid sleep 3001 & env -i AGENTD_ROOT=$AGENTD_ROOT setsid sleep 3003 &) & wait")
    # two: an orphan carrying its own session's marker
    m2, s2 = spawn("s2", "(setsid sleep 3004 &); sleep 3010")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not {"sleep 3001", "sleep 3003"} <= set(cmds(m1)):
        time.sleep(0.05)
    procs = c.processes(m1)
    out["one"] = cmds(m1)
    out["two"] = cmds(m2)
    out["adopted"] = sorted(cmd(p) for p in procs if p.ppid() == os.getpid())
    records = [ProcessRecord(p.pid, p.create_time()) for p in procs]
    ended = asyncio.run(c.end(m1, 2.0))
    out["empty"] = ended.empty
    out["alive_after"] = [r.pid for r in records if r.alive() is not None]
    out["reaped"] = len(c.reap_orphans())
    out["two_after"] = cmds(m2)
    asyncio.run(c.end(m2, 2.0))
    for s in (s1, s2):
        deadline = time.monotonic() + 30  # the test's own wait ends this script first; never hang without it
        while s.reap() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        s.close()
    out["zombies"] = [p.pid for p in __import__("psutil").Process().children() if p.status() == "zombie"]
    print(json.dumps(out), flush=True)
""")


def test_subreaper_mode_finds_and_ends_a_late_setsid_orphan(tmp_path: Path) -> None:
    proc = _python(SUBREAPER, str(tmp_path), stdout=subprocess.PIPE)
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        proc.kill()
        for leftover in processes_of(tmp_path):
            leftover.kill()
    result = json.loads(out)
    assert result["mode"] == "subreaper" and result["subreaper"]
    assert "disabled by the settings" in result["detail"]
    assert {"sleep 3000", "sleep 3001", "sleep 3003"} <= set(result["one"])
    assert "sleep 3004" not in result["one"]  # another session's orphan, told apart by its AGENTD_SESSION
    assert {"sleep 3001", "sleep 3003"} <= set(result["adopted"])  # reparented to the daemon, not to init
    assert result["empty"] and result["alive_after"] == []
    assert "sleep 3004" in result["two_after"]  # ending one session left the other's alone
    assert result["zombies"] == []
    assert not is_child_subreaper()  # the test runner itself was never changed


def test_a_delegated_group_is_used_before_the_root(tmp_path: Path) -> None:
    mount = find_parent(tmp_path).mount
    (mount / "agentd" / project_key(tmp_path)).rmdir()
    service = mount / f"agentd-test-{secrets.token_hex(4)}.service"
    service.mkdir()
    probe = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        from supervisor.session.cgroup import find_parent, own_cgroup
        p = find_parent(Path(sys.argv[1]))
        print(json.dumps({"how": p.how, "path": str(p.path), "own": own_cgroup()}))
    """)

    def run_inside() -> dict[str, str]:
        def join() -> None:
            with open(service / "cgroup.procs", "w") as f:
                f.write("0")

        env = dict(os.environ, PYTHONPATH=str(REPO))
        out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=REPO, env=env, text=True,
                             capture_output=True, preexec_fn=join, timeout=60, check=True)
        return json.loads(out.stdout)

    try:
        plain = run_inside()  # a group that is not marked as delegated: root mode, at the mount
        assert plain["how"] == "root" and plain["own"] == "/" + service.name
        Path(plain["path"]).rmdir()
        os.setxattr(service, "trusted.delegate", b"1")  # what systemd sets for Delegate=yes
        marked = run_inside()
        assert marked["how"] == "delegated"
        assert marked["path"] == str(service / "agentd" / project_key(tmp_path))
    finally:
        for sub in Group(service, mount).subgroups():
            sub.rmdir()


def test_unavailable_names_the_reason(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="is not a cgroup v2 directory"):
        find_parent(tmp_path, given=tmp_path / "not-a-cgroup")
    assert not (tmp_path / "not-a-cgroup").exists()
    assert own_cgroup("12:pids:/x\n0::/system.slice/agentd.service\n") == "/system.slice/agentd.service"
