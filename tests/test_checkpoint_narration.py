"""``agentd checkpoint`` says what it waits for as it happens, as ``stop`` does (issue 27 §1: it printed
nothing for 40 s on a stuck agent)."""

from __future__ import annotations

import subprocess

from tests.conftest import AGENTD, Project, clean_env, wait_until


def test_checkpoint_narrates_each_wait_with_its_bound(project: Project) -> None:
    project.fake_unit("slow", "--on-checkpoint", "slow:5", cycle=True)
    project.agentd("start")
    project.wait_state("slow", "running")
    wait_until(lambda: project.unit_status("slow")["wakeup"] not in (None, "pending", "typing"), 60,
               what="the wakeup delivered")
    try:
        done = subprocess.run([*AGENTD, "--project", str(project.root), "checkpoint", "slow"], env=clean_env(),
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stdout + done.stderr
        err = done.stderr.splitlines()
        # first what it will do and its bound (the unit's [checkpoint] deadline and grace), before any wait
        assert err[0].startswith("checkpoint: slow: prompting for notes, verifying them on disk, then a fresh session "
                                 "(up to "), err
        assert "Ctrl-C stops waiting" in err[0]
        # then each step, without "--now skips" (checkpoint has no --now)
        assert any(line.startswith("slow: checkpoint prompt typed; waiting for the agent to write its notes (up to")
                   for line in err), err
        assert "slow: checkpoint verified (the agent wrote its notes)" in err, err
        assert not any("--now" in line for line in err), err
        assert done.stdout.startswith("STARTED") and "verified" in done.stdout  # the timeline, on stdout as before
    finally:
        project.agentd("stop", "--now")
