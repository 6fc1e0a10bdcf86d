"""agentd's own verdict, and being told: the checks run fenced, contained and timed out; [notify] gets JSON.

The checks run code the agent wrote (its tests, its scripts), so they are
attacked here as a hostile agent would: writing outside the checkout, leaving
a process behind that outlives the timeout, printing a secret, reaching for
the daemon's socket through the environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from supervisor.config.notify import NotifySection
from supervisor.plan.checks import CheckSetup, run_checks
from supervisor.plan.notify import Announcer
from supervisor.session.subreaper import discover
from supervisor.session.fence import availability
from tests.conftest import alive, wait_until

SECRET = "sk-proj-" + "Qx7" * 12


@pytest.fixture
def containment(tmp_path: Path):
    c = discover(tmp_path)
    yield c
    for member in list(getattr(c, "members", {}).values()):
        asyncio.run(c.kill(member))
        c.release(member)
    asyncio.run(c.cleanup_leftovers())
    c.close()


def run(setup: CheckSetup, tmp: Path, commands: list[str], timeout: float = 30.0) -> list[dict]:
    def materialize(dest: Path) -> None:
        (dest / "src").mkdir()
        (dest / "src" / "calc.py").write_text("x = 2\n")

    return asyncio.run(run_checks(setup, materialize, commands, tmp / "work", tmp / "logs" / "t-1.log", timeout,
                                  {"AGENTD_PLAN": "night", "AGENTD_TASK": "t", "AGENTD_ATTEMPT": "1"}))


def setup_for(tmp: Path, containment: object = None) -> CheckSetup:
    env = {"PATH": os.environ["PATH"], "OPENAI_API_KEY": SECRET, "AGENTD_SOCKET": str(tmp / "agentd.sock"),
           "AGENTD_ROOT": str(tmp)}
    return CheckSetup("api", env, containment)


@pytest.mark.skipif(not availability().available, reason="the kernel offers no Landlock")
def test_a_check_sees_its_clean_tree_and_can_write_nothing_else(tmp_path: Path, containment: object) -> None:
    project = tmp_path / "project"
    project.mkdir()
    results = run(setup_for(tmp_path, containment), tmp_path, [
        f"cat src/calc.py && touch built.o && echo $AGENTD_PLAN/$AGENTD_TASK/$AGENTD_ATTEMPT sock=$AGENTD_SOCKET"
        f" && (echo hacked > {project}/planted || echo refused) && echo $OPENAI_API_KEY {SECRET}"])
    [result] = results
    assert result["ok"] and result["exit"] == 0 and result["fenced"]
    lines = result["tail"].splitlines()
    assert lines[0] == "x = 2" and lines[1] == "night/t/1 sock=" and "Permission denied" in result["tail"]
    assert lines[-2] == "refused" and SECRET not in result["tail"] and "[REDACTED]" in lines[-1]
    assert not (project / "planted").exists()
    log = (tmp_path / "logs" / "t-1.log").read_text()
    assert log.startswith("$ cat src/calc.py") and SECRET not in log and "[exit 0," in log
    assert not list((tmp_path / "work").iterdir())  # the checkout is gone


def test_the_first_failure_stops_the_checks_and_its_tail_is_kept(tmp_path: Path) -> None:
    results = run(setup_for(tmp_path), tmp_path, ["echo one", "seq 1 5000; echo 'assert 1 == 2'; exit 3", "echo never"])
    assert [r["ok"] for r in results] == [True, False]
    assert results[1]["exit"] == 3 and results[1]["tail"].endswith("5000\nassert 1 == 2\n")
    assert len(results[1]["tail"]) <= 4000


def test_a_timeout_ends_everything_the_check_started(tmp_path: Path, containment: object) -> None:
    command = (f"{sys.executable} -c \"import subprocess; p = subprocess.Popen(['sleep', '300'], "
               "start_new_session=True); print('grandchild', p.pid, flush=True)\"; sleep 300")
    began = time.monotonic()
    [result] = run(setup_for(tmp_path, containment), tmp_path, [command], timeout=2.0)
    assert result["timed_out"] and result["exit"] is None and not result["ok"]
    assert time.monotonic() - began < 30
    pid = int(result["tail"].split("grandchild ")[1].split()[0])
    wait_until(lambda: not alive(pid), 10, what="the setsid grandchild to be ended with its check")


def test_notify_gets_each_event_as_json_on_stdin_and_a_stuck_command_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    good = NotifySection(command=(sys.executable, "-c", f"import sys; open({str(log)!r}, 'a').write(sys.stdin.read())"),
                         events=("task_parked", "plan_ended"))
    stuck = NotifySection(command=(sys.executable, "-c", "import time; time.sleep(60)"), timeout=0.5)

    async def scene() -> Announcer:
        tasks: list[asyncio.Task] = []
        announcer = Announcer(lambda coro: tasks.append(asyncio.ensure_future(coro)), settings_notify=good)
        queue = announcer.subscribe()
        for event in ("task_done", "task_parked", "plan_ended"):
            announcer.announce({"event": event, "plan": "night", "task": "t1", "time": "2026-12-04T07:00:00Z",
                                "reason": f"unit failed: Error: invalid key {SECRET}"}, stuck)
        await asyncio.sleep(0)
        assert [queue.get_nowait()["event"] for _ in range(3)] == ["task_done", "task_parked", "plan_ended"]
        await wait_for(lambda: log.exists() and log.read_text().count("\n") == 2)
        await wait_for(lambda: announcer.failures >= 3)  # each stuck run killed at its timeout, the next one ran
        for task in tasks:
            task.cancel()
        return announcer

    announcer = asyncio.run(scene())
    got = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in got] == ["task_parked", "plan_ended"]  # its events only, in order
    assert got[0] == {"event": "task_parked", "plan": "night", "task": "t1", "time": "2026-12-04T07:00:00Z",
                      "reason": "unit failed: Error: invalid key [REDACTED]"}
    assert announcer.counts[("night", "task_done")] == 1
    assert not [p for p in psutil.Process().children(recursive=True) if "time.sleep(60)" in " ".join(p.cmdline())]


async def wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.skipif(not availability().available, reason="the kernel offers no Landlock")
def test_a_check_is_its_unit_to_the_socket_never_the_operator(tmp_path: Path, containment: object) -> None:
    """A check runs the agent's code with AGENTD_UNIT and AGENTD_SESSION=check-... in a <unit>@check-... group:
    the socket (this process plays the daemon: the check is its child) names it and what it starts by
    ancestry, as that unit's check session or a stray, never the operator."""
    from supervisor.control.access import Kind
    from supervisor.daemon.confinement import Confinement

    setup = CheckSetup("api", {"PATH": os.environ["PATH"]}, containment)
    probe = (f"{sys.executable} -c \"import subprocess, time; subprocess.Popen(['sleep', '30'], "
             "start_new_session=True); time.sleep(30)\"")
    seen: dict[str, object] = {}

    async def scene() -> None:
        confinement = Confinement(containment, asyncio.ensure_future)
        checks = asyncio.ensure_future(run_checks(setup, lambda dest: None, [probe], tmp_path / "work",
                                                  tmp_path / "logs" / "t-1.log", 60.0, {}))
        deadline = time.monotonic() + 30
        while "child" not in seen:  # the check, then the setsid child it started
            assert time.monotonic() < deadline and not checks.done(), "the check and its child never showed"
            for member in list(containment.members.values()):
                if member.session_id.startswith("check-") and member.leader is not None:
                    leader = psutil.Process(member.leader.pid)
                    seen["check"] = confinement.caller(leader.pid)
                    for kid in leader.children(recursive=True):
                        seen["child"] = confinement.caller(kid.pid)
            await asyncio.sleep(0.05)
        checks.cancel()
        try:
            await checks
        except asyncio.CancelledError:
            pass

    asyncio.run(scene())
    for who in (seen["check"], seen["child"]):
        assert who.kind is not Kind.OPERATOR, who
        assert who.kind is Kind.STRAY or (who.unit == "api" and str(who.session).startswith("check-")), who


@pytest.mark.skipif(not availability().available, reason="the kernel offers no Landlock")
def test_a_check_sees_no_inbox_no_token_and_no_unit_terminal(tmp_path: Path, containment: object) -> None:
    """Its view hides agentd's state (every unit's inbox, the dashboard token, with which a check could drive
    the dashboard as the operator) and gives it a devpts of its own; the fence refuses the writes anyway."""
    from supervisor.session.mountview import view_mode

    state = tmp_path / "state"
    for unit in ("api", "web"):
        (state / "inbox" / unit).mkdir(parents=True)
    (state / "web-token").write_text("TOKEN-" + "z" * 30 + "\n")
    setup = CheckSetup("api", {"PATH": os.environ["PATH"]}, containment, hidden=state)
    [result] = run(setup, tmp_path, [
        f"for d in api web; do (echo x > {state}/inbox/$d/0123456789abcdef.req) 2>/dev/null && echo inbox-$d-written; done;"
        f" cat {state}/web-token 2>/dev/null || echo no-token; ls /dev/pts | tr '\\n' ' '; echo"])
    assert result["ok"], result
    assert "written" not in result["tail"] and "TOKEN-" not in result["tail"] and "no-token" in result["tail"]
    if view_mode().available:
        assert result["tail"].strip().endswith("ptmx")  # a devpts of its own: no unit's terminal in it
    assert not list(state.glob("inbox/*/*.req"))
