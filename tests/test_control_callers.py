"""Which session a control-socket caller is in, from the process tree (issue 25 §2; supervisor/session/lineage.py).

Most cases run on a scripted process table (a ``read`` that answers
``/proc/PID/stat`` from a dict and can change the tree between two reads, the
races an agent would try); the parsing and the walk are also proved on real
processes.  The real daemon with a fenced agent: tests/security/test_socket_caller.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import psutil
import pytest

from supervisor.session import lineage
from supervisor.session.lineage import DAEMON_COMM, MAX_DEPTH, Stat, trace
from tests.conftest import REPO, wait_until

D = 100  # the daemon


def st(pid: int, ppid: int, sid: int, start: int = 1000, comm: str = "p") -> Stat:
    return Stat(pid, comm, "S", ppid, sid, start)


class Table:
    """A scripted /proc: ``changes[pid]`` runs once, just before ``pid`` is first read."""

    def __init__(self, *stats: Stat, changes: dict[int, Callable[[Table], None]] | None = None) -> None:
        self.stats = {s.pid: s for s in stats}
        self.changes = dict(changes or {})
        self.reads: list[int] = []

    def read(self, pid: int) -> Stat:
        self.reads.append(pid)
        change = self.changes.pop(pid, None)
        if change is not None:
            change(self)
        if pid not in self.stats:
            raise ProcessLookupError(pid)
        return self.stats[pid]


def base() -> list[Stat]:
    """init; the daemon (session 90, its shell's); session leader 200 (its own session) and its agent 201."""
    return [st(1, 0, 1), st(90, 1, 90, comm="bash"), st(D, 90, 90, comm=DAEMON_COMM),
            st(200, D, 200, start=2000, comm="codex"), st(201, 200, 200, comm="node")]


LEADERS = {200: 2000}  # the leader's start, in clock ticks


def where(table: Table, pid: int, leaders: dict[int, int] = LEADERS) -> tuple[str, int | None, str]:
    found = trace(pid, D, leaders, table.read)
    return found.kind, found.leader, found.why


def test_a_descendant_of_a_leader_is_its_session_even_in_a_session_of_its_own() -> None:
    table = Table(*base(), st(202, 201, 202), st(203, 202, 202))  # 202 called setsid; its parent 201 lives
    assert where(table, 201)[:2] == ("session", 200)
    assert where(table, 203)[:2] == ("session", 200)
    assert where(table, 200)[:2] == ("session", 200)


def test_an_orphan_is_its_sessions_by_session_id_and_a_setsid_orphan_is_no_ones() -> None:
    table = Table(*base(), st(300, D, 200), st(301, D, 301), st(302, 301, 301))
    assert where(table, 300)[:2] == ("session", 200)  # adopted by the daemon, still in the leader's session
    kind, leader, why = where(table, 302)
    assert (kind, leader) == ("stray", None) and "left its session" in why
    # the leader's pid given to another process: its session id proves nothing any more
    reused = Table(*base(), st(300, D, 200))
    reused.stats[200] = st(200, D, 200, start=5000)
    assert where(reused, 300)[0] == "stray" and where(reused, 201)[0] == "stray"


def test_the_daemons_helpers_and_their_children_are_strays_and_the_daemon_is_the_operator() -> None:
    table = Table(*base(), st(400, D, 90, comm="git"), st(401, 400, 90, comm="hook"))
    kind, _, why = where(table, 401)
    assert kind == "stray" and "daemon's own helper" in why
    assert where(table, D)[:1] == ("outside",)
    assert where(table, 90) == ("outside", None, "not a descendant of the daemon")


def test_an_agent_of_another_daemon_is_a_stray_unless_this_daemon_runs_in_its_session() -> None:
    other = [st(600, 1, 600, comm=DAEMON_COMM), st(601, 600, 601, comm="claude"), st(602, 601, 601),
             st(606, 600, 606), st(607, 606, 606)]
    table = Table(*base(), *other)
    kind, _, why = where(table, 602)
    assert kind == "stray" and why == "an agent of another agentd daemon (pid 600)"
    # this daemon was started by that daemon's agent 601 (an agent running agentd's own tests)
    inside = Table(*[s for s in base() if s.pid != D], st(D, 603, 603, comm=DAEMON_COMM), st(603, 601, 601),
                   *other, st(604, 603, 603))
    assert where(inside, 604) == ("outside", None, "this daemon runs in the same session of agentd daemon 600")
    assert where(inside, 602)[0] == "outside"  # the agent that started this daemon is its operator
    assert where(inside, 607)[0] == "stray"  # another session of that daemon is not
    # a process that only names itself like a daemon makes its own children strays, nobody else
    fake = Table(*base(), st(700, 1, 700, comm=DAEMON_COMM), st(701, 700, 700))
    assert where(fake, 701)[0] == "stray" and where(fake, 700)[0] == "outside"


def test_a_parent_that_dies_and_whose_pid_is_reused_mid_walk_is_never_followed() -> None:
    """701 dies while the walk reads it; its pid goes to an outside process; 700 is adopted by the daemon."""
    def reuse(t: Table) -> None:
        t.stats[701] = st(701, 1, 701, start=9999, comm="sshd")
        t.stats[700] = st(700, D, 200)

    table = Table(*base(), st(700, 701, 200), st(701, 201, 200), changes={701: reuse})
    assert where(table, 700)[:2] == ("session", 200)  # without the check: "outside", the operator's rights
    assert table.reads.count(700) >= 3  # read, read again (moved), and the new walk


def test_a_tree_that_keeps_changing_or_a_gone_peer_is_an_error_and_a_deep_one_is_stray() -> None:
    with pytest.raises(ProcessLookupError):
        trace(999, D, LEADERS, Table(*base()).read)

    def flip(t: Table) -> None:
        t.stats[201] = st(201, 200, 200, start=t.stats[201].start + 1)
        t.changes[200] = flip

    with pytest.raises(ProcessLookupError, match="kept changing"):
        trace(201, D, LEADERS, Table(*base(), changes={200: flip}).read)
    deep = [st(10_000 + i, 10_000 + i - 1, 10_000) for i in range(1, MAX_DEPTH + 50)]
    table = Table(*base(), st(10_000, D, 10_000), *deep)
    assert where(table, deep[-1].pid) == ("stray", None, f"more than {MAX_DEPTH} processes deep")


# ---------------------------------------------------------------- real processes
NAMED = textwrap.dedent("""
    import ctypes, sys, time
    ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
    print("named", flush=True)
    time.sleep(60)
""")


def test_read_stat_parses_a_name_with_parentheses_and_spaces() -> None:
    proc = subprocess.Popen([sys.executable, "-c", NAMED, "x) 9 (y z"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "named\n"
        found = lineage.read_stat(proc.pid)
        assert (found.comm, found.ppid, found.sid) == ("x) 9 (y z", os.getpid(), os.getsid(0))
        ticks = (psutil.Process(proc.pid).create_time() - psutil.boot_time()) * os.sysconf("SC_CLK_TCK")
        assert abs(found.start - ticks) < 2  # the 22nd field: the start, in clock ticks after boot
        proc.kill()
        wait_until(lambda: lineage.read_stat(proc.pid).state == "Z", 10, what="a zombie, not reaped yet")
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(ProcessLookupError):
        lineage.read_stat(proc.pid)


def test_a_real_tree_a_setsid_grandchild_included_is_traced_to_its_leader() -> None:
    leader = subprocess.Popen(["sh", "-c", "sleep 3001 & setsid sleep 3002 & wait"], start_new_session=True)
    try:
        kids = wait_until(lambda: (k := psutil.Process(leader.pid).children()) and len(k) == 2 and k, 10,
                          what="the two sleeps")
        leaders = {leader.pid: lineage.read_stat(leader.pid).start}
        for kid in kids:
            found = trace(kid.pid, os.getpid(), leaders)
            assert (found.kind, found.leader) == ("session", leader.pid), (kid.cmdline(), found)
        assert trace(os.getpid(), os.getpid(), leaders).why == "the daemon itself"
        assert trace(1, os.getpid(), leaders).kind == "outside"
        assert leader.pid in (lineage.children() or [])
        # the same tree, recorded with another start: not that session (a reused pid)
        assert trace(kids[0].pid, os.getpid(), {leader.pid: leaders[leader.pid] - 1}).kind == "stray"
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()
        for kid in psutil.process_iter():  # the setsid sleep has a group of its own
            try:
                if kid.cmdline() == ["sleep", "3002"]:
                    kid.kill()
            except psutil.Error:
                continue


def test_the_daemon_names_itself() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "from supervisor.session.lineage import mark_daemon; "
                             "mark_daemon(); print('ok', flush=True); import time; time.sleep(60)"],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ok\n"
        assert lineage.read_stat(proc.pid).comm == DAEMON_COMM == open(f"/proc/{proc.pid}/comm").read().strip()
    finally:
        proc.kill()
        proc.wait()
