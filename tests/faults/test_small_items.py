"""Issue 31 §5, the smaller faults, each through the real daemon.

* a graceful stop of an agent whose prompt never shows does not wait out the
  wakeup's 60 s ready timeout, and says why it did not checkpoint;
* "Permission denied: '<path>'" lines the last session printed, quoted back in
  the wakeup and echoed by the terminal, are no kernel violation of the new
  session (before: recorded again, one with a whole quoted line as its path);
* ``send -`` takes the text from stdin, past the command line's ~128 KiB.

(The read-only ``.agent/``, the SIGSTOPped agent, ``checkpoint``'s exit code:
``test_storms.py``; ``requires`` on a missing unit and a unit file that no
longer loads: ``test_unit_files.py``; the task text: ``tests/memory/test_task_text.py``.)
"""

from __future__ import annotations

import json
import subprocess
import time

from tests.conftest import AGENTD, Project, clean_env, wait_until

from .conftest import final_checks


def test_a_graceful_stop_never_waits_for_a_wakeup_the_agent_cannot_take(project: Project) -> None:
    project.init_memory()
    project.fake_unit("mute", "--prompt", "other> ", cycle=True)  # the unit waits for "fake> ": never shown
    project.agentd("start")
    wait_until(lambda: (r := project.unit_status("mute")) and r["state"] == "running" and r["wakeup"] == "pending",
               60, what="the wakeup waiting for a prompt that never shows")
    began = time.monotonic()
    stop = project.agentd("stop", "mute", timeout=120)
    took = time.monotonic() - began
    assert "mute: stopped without a checkpoint: the agent cannot take a turn: it has not taken its wakeup yet" \
        in stop.stderr, stop.stderr
    assert took < 60, f"the stop took {took:.0f} s: it waited for the wakeup's ready timeout"
    assert project.unit_status("mute")["state"] == "inactive"
    final_checks(project, ["mute"])


def _violations(project: Project) -> list[dict]:
    out = project.agentd("violations", "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_refusals_quoted_back_in_the_wakeup_are_not_violations_of_the_new_session(project: Project) -> None:
    project.init_memory()
    (project.root / "src").mkdir()
    outside = project.root / "outside.txt"
    project.fake_unit("fenced", cycle=True, scope='paths = ["src/**"]\nfence = "on"')
    project.agentd("start")
    first = wait_until(lambda: (r := project.unit_status("fenced")) and r["turn"] == "idle"
                       and r["wakeup"] not in (None, "pending") and r, 60, what="the fenced unit, idle")
    assert (first.get("scope") or "").startswith("fenced"), first
    project.agentd("send", "fenced", f"write {outside} hello")
    wait_until(lambda: [v for v in _violations(project) if v.get("path") == "outside.txt"], 30,
               what="the kernel's refusal")
    project.agentd("checkpoint", "fenced", timeout=120)
    second = wait_until(lambda: (r := project.unit_status("fenced")) and r["session"] != first["session"]
                        and r["wakeup"] not in (None, "pending") and r["turn"] == "idle" and r, 60,
                        what="the fresh session, idle after its wakeup")
    assert "Permission denied" in project.agentd("wakeup", "fenced").stdout  # the wakeup quotes the refusal
    assert "Permission denied" in project.transcript("fenced", second["session"])  # and the terminal echoed it
    project.agentd("send", "fenced", "echo still here")
    wait_until(lambda: "still here" in project.transcript("fenced", second["session"]), 30, what="the echo")
    found = _violations(project)
    assert len(found) == 1 and found[0]["path"] == "outside.txt" and found[0]["certainty"] == "kernel", found
    assert not outside.exists()
    final_checks(project, ["fenced"])


def test_send_takes_the_text_from_stdin(project: Project) -> None:
    project.fake_unit("reader")
    project.agentd("start")
    wait_until(lambda: (r := project.unit_status("reader")) and r["turn"] == "idle", 60, what="the prompt")
    text = "echo " + "x" * 200_000  # past what one argument may hold (MAX_ARG_STRLEN: 128 KiB)
    sent = subprocess.run([*AGENTD, "--root", str(project.root), "send", "reader", "-"], input=text, text=True,
                          capture_output=True, env=clean_env(), cwd=project.root, timeout=120)
    assert sent.returncode == 0 and "200005 bytes" in sent.stdout, sent.stdout + sent.stderr
    wait_until(lambda: any(len(m) == len(text) for m in project.last_inputs("reader")), 60,
               what="the agent to receive the whole text")
    empty = subprocess.run([*AGENTD, "--root", str(project.root), "send", "reader", "-"], input="", text=True,
                           capture_output=True, env=clean_env(), cwd=project.root, timeout=60)
    assert empty.returncode == 1 and "stdin is empty" in empty.stderr
    final_checks(project, ["reader"])


def test_restart_now_never_says_now_skips_and_says_what_it_waits_for(project: Project) -> None:
    """Issue 27 §1: `restart --now` printed the fresh agent's wait as "waiting ... (--now skips)"."""
    project.init_memory()
    project.fake_unit("quick", "--banner", "warming up", cycle=True)
    project.agentd("start")
    wait_until(lambda: (r := project.unit_status("quick")) and r["turn"] == "idle"
               and r["wakeup"] not in (None, "pending"), 60, what="the unit, idle after its wakeup")
    restart = project.agentd("restart", "--now", "quick", timeout=120)
    assert "--now skips" not in restart.stderr, restart.stderr
    assert "waiting for the turn to end" not in restart.stderr, restart.stderr  # not a checkpoint's wait
    assert "quick: running" in restart.stdout
    final_checks(project, ["quick"])
