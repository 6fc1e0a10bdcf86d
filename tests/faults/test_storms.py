"""Issue 31: storms.  Many units at once, for a long time; the cycle's own crash loop; a memory it cannot write.

* **30 crash-looping units stopped at once**, in one command and in two
  concurrent batches of 15: every unit ends ``inactive`` (the stop wins over
  the restart in flight), the daemon stays alive, and no unit raised (before:
  the daemon died of ``IllegalTransition: inactive -> backoff`` in three runs
  of three, or 8 units of 30 never stopped);
* **a cycle storm** (every session's wakeup and its answer already cross
  ``checkpoint_at``) is named in status, with what to change, and backed off
  instead of cycling dozens of times a minute;
* **a read-only ``.agent/``** at a checkpoint: the session (the only place its
  notes live) is kept and named, never replaced;
* **a SIGSTOPped agent** is named, not left looking busy and healthy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from bench.storm import UNIT
from tests.conftest import AGENTD, Project, clean_env, stays, wait_until

from .conftest import NsProject, final_checks

UNITS = [f"c{i:02d}" for i in range(1, 31)]
CRASH_LOOP = UNIT.format(python="python")  # the storm soak's unit: crashes 1 s after each start, restarts at once
#: What the daemon logs when handling a unit raised (none of them may appear).
RAISED = ("unit_error", "operation_failed", "task_failed", "tick_failed", "unit_fault_failed", "dependents_failed")


def _raised(project: Project) -> list[dict]:
    return [e for e in project.events() if e.get("event") in RAISED or e.get("level") == "critical"]


@pytest.mark.parametrize("batches", [1, 2])
def test_thirty_crash_looping_units_stopped_at_once_all_end_inactive(project: Project, batches: int) -> None:
    for name in UNITS:
        project.unit(name, CRASH_LOOP)
    project.agentd("start")
    # every unit has crashed and restarted: the stop lands in the middle of their restarts
    wait_until(lambda: all(r["restarts"] >= 2 for r in project.status()["units"]), 180, 0.5,
               "every unit to be restarting")
    size = len(UNITS) // batches
    stops = [subprocess.Popen([*AGENTD, "--root", str(project.root), "stop", "--now", *UNITS[i:i + size]],
                              env=clean_env(), cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(0, len(UNITS), size)]
    for proc in stops:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    rows = {r["unit"]: r for r in project.status()["units"]}  # the daemon answers: it is alive
    assert {n: r["state"] for n, r in rows.items() if r["state"] != "inactive"} == {}
    assert all(r["reason"] == "stop command" for r in rows.values()), [r["reason"] for r in rows.values()]
    assert stays(lambda: all(r["state"] == "inactive" for r in project.status()["units"]), 3, 0.5), \
        "a unit restarted after its stop"
    assert not _raised(project), _raised(project)[:3]
    # nothing of the 30 loops' hundreds of sessions is left in the daemon (before: PTY masters with no session)
    assert project.status()["daemon"]["open_sessions"] == 0
    assert _pty_masters(project.daemon_pid()) == 0
    final_checks(project, UNITS)


def _pty_masters(pid: int | None) -> int:
    assert pid is not None
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return sum(1 for link in links if link in ("/dev/ptmx", "/dev/pts/ptmx"))


def test_the_event_index_keeps_a_reader_for_the_newest_transcripts_only(tmp_path) -> None:
    """Issue 31 §3: each restart is a new transcript; the index kept a reader per transcript for good."""
    from supervisor.eventindex.transcripts import Marks

    marks = Marks()
    for n in range(Marks.KEPT + 50):
        marks.get(tmp_path / f"s{n}.txt")
    assert len(marks._known) == Marks.KEPT
    marks.add(tmp_path / "s0.txt", 10, 1.5)  # one dropped long ago: read again from its start
    assert marks.get(tmp_path / "s0.txt") == [(10, 1.5)]


def test_a_cycle_storm_is_named_and_backed_off(project: Project) -> None:
    """A window so small that the wakeup alone crosses checkpoint_at: named, with what to change."""
    project.init_memory()
    project.fake_unit("tiny", cycle=True, context="window = 300")
    project.agentd("start")
    row = wait_until(lambda: (r := project.unit_status("tiny")) and (r.get("frozen") or {}).get("state") == "cycle_storm"
                     and r, 90, what="the cycle storm to be named")
    frozen = row["frozen"]
    assert frozen["action"].startswith("back off") and "first turn after" in frozen["detail"]
    assert "[context] window" in frozen["detail"] and "[wakeup] budget" in frozen["detail"]
    assert "cycle_storm" in project.agentd("status").stdout
    cycles = [r for r in project.history("tiny") if r["trigger"] in ("threshold", "hard_limit")]
    assert len(cycles) <= 1  # before: 27 "verified" cycles a minute, nothing said
    assert stays(lambda: len([r for r in project.history("tiny") if r["trigger"] in ("threshold", "hard_limit")])
                 == len(cycles), 8, 1.0), "it kept cycling"
    assert [r["trigger"] for r in project.history("tiny")].count("freeze: cycle_storm") == 1
    final_checks(project, ["tiny"])


def test_a_read_only_memory_at_checkpoint_keeps_the_session(ns_project: NsProject) -> None:
    project = ns_project
    project.init_memory()
    project.fake_unit("keeper", cycle=True)
    project.agentd("start")
    before = wait_until(lambda: (r := project.unit_status("keeper")) and r["state"] == "running"
                        and r["wakeup"] not in (None, "pending") and r["turn"] == "idle" and r, 60,
                        what="the unit, idle after its wakeup")
    agent = project.root / ".agent"
    project.ns.run("mount", "--bind", str(agent), str(agent))
    project.ns.run("mount", "-o", "remount,bind,ro", str(agent))
    result = project.agentd("checkpoint", "keeper", check=False, timeout=120)
    record = json.loads(project.agentd("history", "keeper", "--json").stdout.splitlines()[-1])
    assert record["flush"] == "failed" and record["outcome"].startswith("kept the session"), record
    assert result.returncode == 1, (result.stdout, result.stderr)  # the checkpoint did not do its job
    row = project.unit_status("keeper")
    assert row["state"] == "running" and row["pid"] == before["pid"] and row["session"] == before["session"]
    assert row["frozen"]["state"] == "memory_unwritable" and "Read-only file system" in row["frozen"]["detail"]
    project.ns.run("mount", "-o", "remount,bind,rw", str(agent))
    final_checks(project, ["keeper"])


def test_a_sigstopped_agent_is_named_and_a_stop_does_not_wait_for_it(project: Project) -> None:
    project.init_memory()
    project.fake_unit("frozen", cycle=True, freeze="after = 1", stop_timeout=2)
    project.agentd("start")
    row = wait_until(lambda: (r := project.unit_status("frozen")) and r["state"] == "running"
                     and r["wakeup"] not in (None, "pending") and r, 60, what="the unit to run")
    os.kill(row["pid"], signal.SIGSTOP)
    row = wait_until(lambda: (r := project.unit_status("frozen")) and (r.get("frozen") or {}).get("state")
                     == "stopped_process" and r, 30, what="the stopped process to be named")
    assert "SIGSTOP" in row["frozen"]["detail"] and "stopped_process" in project.agentd("status").stdout
    stop = project.agentd("stop", "frozen", timeout=120)
    assert "frozen: stopped without a checkpoint: the agent cannot take a turn: its process is stopped" \
        in stop.stderr, stop.stderr
    assert "no checkpoint" in project.unit_status("frozen")["reason"]
    final_checks(project, ["frozen"])


# ------------------------------------------------------------------ issue 27 §1: a stop with a stuck unit
LOGIN_SCREEN = ("import sys, time\n"
                "sys.stdout.write('Welcome to Agent 1.0\\r\\n\\r\\n Select login method:\\r\\n\\r\\n'\n"
                "                 ' > 1. Account with subscription\\r\\n   2. API key\\r\\n')\n"
                "sys.stdout.flush()\n"
                "time.sleep(100000)\n")


def test_a_stop_with_a_stuck_unit_ends_within_the_budget_names_it_and_respawns_nothing(project: Project) -> None:
    project.init_memory()
    project.unit("stuck", f"""
[agent]
command = ["python", "-c", {json.dumps(LOGIN_SCREEN)}]
prompt = "fake> $"
[restart]
stop_timeout = 3
[freeze]
after = 1
[wakeup]
on_start = false
""")  # (a wakeup would wait for a prompt that never shows; the screen is named once nothing is delivered)
    project.fake_unit("healthy", "--on-checkpoint", "slow:3", cycle=True)
    project.agentd("start", env=clean_env(TIMEOUT_STOP_USEC=str(40_000_000)))  # TimeoutStopSec=40
    wait_until(lambda: ((project.unit_status("stuck") or {}).get("frozen") or {}).get("state") == "blocked_screen",
               60, what="the login screen to be named")
    wait_until(lambda: (r := project.unit_status("healthy")) and r["turn"] == "idle"
               and r["wakeup"] not in (None, "pending"), 60, what="the healthy unit, idle after its wakeup")
    sessions = len(project.inputs("healthy"))
    # a cycle is under way in the healthy unit when the stop arrives (the one that respawned during stops)
    checkpoint = subprocess.Popen([*AGENTD, "--root", str(project.root), "checkpoint", "healthy"], env=clean_env(),
                                  cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: project.unit_status("healthy")["state"] == "checkpointing", 30, what="the cycle to begin")
    began = time.monotonic()
    stop = project.agentd("stop", timeout=120)
    took = time.monotonic() - began
    checkpoint.communicate(timeout=60)
    assert took < 40, f"the stop took {took:.0f} s, past TimeoutStopSec=40"
    assert "stopped without a checkpoint: the agent cannot take a turn: blocked: login" in stop.stderr, stop.stderr
    assert "stuck:" in stop.stderr
    assert len(project.inputs("healthy")) == sessions, "the healthy unit respawned during the stop"
    assert [e for e in project.events("stop_without_checkpoint", "stuck")]
    assert not [e for e in project.events("unit_state", "healthy")
                if e.get("new") == "starting" and e["timestamp"] > _stop_began(project)]
    assert not _raised(project)


def _stop_began(project: Project) -> str:
    return next(e["timestamp"] for e in project.events("daemon_stopping"))



def test_a_daemon_stop_keeps_to_one_budget_when_an_agent_takes_too_long(project: Project) -> None:
    """Issue 27 §1: one budget for the whole stop (TimeoutStopSec=30), not each unit's 300 s checkpoint deadline."""
    project.init_memory()
    for name in ("slow1", "slow2"):
        project.fake_unit(name, "--on-checkpoint", "slow:300", cycle=True)
    project.agentd("start", env=clean_env(TIMEOUT_STOP_USEC=str(30_000_000)))
    for name in ("slow1", "slow2"):
        wait_until(lambda n=name: (r := project.unit_status(n)) and r["turn"] == "idle"
                   and r["wakeup"] not in (None, "pending"), 60, what=f"{name}, idle after its wakeup")
    budget = project.status()["daemon"]["stop_budget"]
    assert budget["seconds"] == 15 and "TIMEOUT_STOP_USEC" in budget["source"]
    began = time.monotonic()
    stop = project.agentd("stop", timeout=120)
    took = time.monotonic() - began
    assert took < 30, f"the stop took {took:.0f} s, past TimeoutStopSec=30"
    assert "up to 15 s in all: the daemon's stop budget" in stop.stderr, stop.stderr
    for name in ("slow1", "slow2"):
        (cycle,) = [r for r in project.history(name) if r["trigger"] == "stop" and r["flush"] != "skipped"]
        assert cycle["flush"] == "auto" and cycle["outcome"] == "stopped", cycle  # an [auto] note, not lost
    assert not _raised(project)
