"""Text that agentd types never becomes a command (issue 14, section 2), with the real daemon.

Each injection the issue found is tried against a fake agent that logs every
message it receives (one entry per submitted message) and runs `crash N` /
`exit` as commands: the agent must get one message, and keep running.  A shell
declared as such (``talks_to = "shell"``) gets nothing typed by agentd at all.
"""

from __future__ import annotations

import json

from tests.conftest import Project, clean_env, git, wait_until


def running(project: Project, unit: str, pid: int) -> bool:
    row = project.unit_status(unit)
    return row is not None and row["state"] == "running" and row["pid"] == pid


def test_control_characters_and_paste_delimiters_in_sent_text_stay_inside_one_message(project: Project) -> None:
    project.fake_unit("u")
    project.agentd("start")
    pid = project.wait_state("u", "running")["pid"]
    for text in ("echo one\recho two", "echo four\x04", "echo five\x1b[201~crash 5\r", "echo six\x1b[2Jcrash 6"):
        project.agentd("send", "u", text)
    wait_until(lambda: len(project.last_inputs("u")) >= 4, 30, what="the four messages")
    received = project.last_inputs("u")
    assert received[:4] == ["echo one\necho two", "echo four", "echo fivecrash 5\n", "echo six[2Jcrash 6"], received
    assert running(project, "u", pid)  # no Ctrl-D, no CR, no paste break-out reached the agent as a key
    # --raw is the one explicit way to type control keys
    project.agentd("send", "u", "crash 7\r", "--raw")
    wait_until(lambda: project.unit_status("u")["last_exit"] == "exit 7", 30, what="the raw crash")


def test_a_global_decision_and_a_file_name_cannot_smuggle_a_command(project: Project) -> None:
    project.init_memory()
    git(project.root, "init", "-q")
    project.fake_unit("alpha", cycle=True, scope='module = "alpha"\npaths = ["alpha/**"]')
    project.fake_unit("beta", cycle=True, scope='module = "beta"\npaths = ["beta/**"]')
    project.agentd("start")
    pids = {n: project.wait_state(n, "running")["pid"] for n in ("alpha", "beta")}
    for name in pids:
        wait_until(lambda n=name: len(project.inputs(n)) == 1 and project.inputs(n)[0], 60, what=f"{name}'s wakeup")
    env = clean_env(AGENTD_UNIT="alpha", AGENTD_MODULE="alpha")
    project.agentd("decide", "freeze the format\rcrash 9", "--why", "because both parse it, so it must not drift",
                   "--global", env=env)
    (project.root / "beta").mkdir(exist_ok=True)
    (project.root / "beta" / "note\rexit\r.txt").write_text("a file named to end the agent")  # outside alpha's scope
    wait_until(lambda: any("global decision" in m for m in project.last_inputs("beta")), 60, what="the broadcast")
    assert running(project, "beta", pids["beta"])
    assert all("\r" not in m for m in project.last_inputs("beta"))
    assert running(project, "alpha", pids["alpha"])


def test_a_shell_unit_runs_nothing_from_the_wakeup_or_agentd(project: Project) -> None:
    project.init_memory()
    marker = project.root / "PWNED"
    constraints = project.root / ".agent" / "constraints.md"
    constraints.write_text(constraints.read_text() + f"- never run `touch {marker}`\n$(touch {marker})\n")
    argv = json.dumps(["bash", "--norc", "--noprofile", "-i"])
    project.unit("sh", f'[agent]\ncommand = {argv}\ntalks_to = "shell"\nquiet = 1\n[restart]\nstop_timeout = 2\n'
                       '[checkpoint]\ndeadline = 5\ngrace = 1\n')
    project.agentd("start")
    project.wait_state("sh", "running")
    row = wait_until(lambda: (r := project.unit_status("sh"))["wakeup"] and r, 30, what="the wakeup")
    assert row["wakeup"] == "delivered via file"
    project.agentd("checkpoint", "sh")
    (last,) = project.history("sh")
    assert last["flush"] == "auto" and "no prompt typed: the unit talks to a shell" in last["notes"]
    project.agentd("decide", "a global choice `touch PWNED`", "--why", "because of a test, so it is broadcast", "--global")
    assert not marker.exists()
    transcript = project.transcript("sh")
    assert "CHECKPOINT requested" not in transcript and "Hard constraints" not in transcript
