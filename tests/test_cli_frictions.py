"""Smaller frictions: `check` warns about shells, Ctrl-C during `stop`, `--help` examples, the man page."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import click
import pexpect
import pytest

from supervisor import __version__
from supervisor.cli import manpage
from supervisor.cli.app import cli
from supervisor.config.unit_warnings import Interpreter, interactive_interpreter
from tests.conftest import AGENTD, Project, alive, clean_env, wait_until

REPO = Path(__file__).resolve().parent.parent


def shell_unit(project: Project, name: str, argv: list[str], extra: str = "") -> None:
    project.unit(name, f"[agent]\ncommand = {json.dumps(argv)}\n{extra}\n[restart]\nstop_timeout = 7\n")


# -- check: shells and REPLs ------------------------------------------------------------------------

def test_check_warns_about_interactive_shells_and_repls(project: Project) -> None:
    shell_unit(project, "sh1", ["bash"])
    shell_unit(project, "sh2", ["/usr/bin/env", "zsh", "-i"], extra='wakeup_via = "none"\n[checkpoint]\nenabled = false')
    shell_unit(project, "repl", ["python3"])
    shell_unit(project, "script", ["bash", "-c", "exec python -m supervisor.fakeagent"])
    shell_unit(project, "quiet", ["python3"], extra='wakeup_via = "file"\n[checkpoint]\nenabled = false')
    shell_unit(project, "declared", ["python3"], extra='talks_to = "shell"')
    out = project.agentd("check").stdout  # warnings do not fail the check
    warns = {}
    for line in out.splitlines():
        if line.startswith("warn   "):
            name, text = line[7:].split(": ", 1)
            warns.setdefault(name, []).append(text)
    # every shell or REPL gets a warning unless it is declared as one (talks_to = "shell")
    assert set(warns) == {"sh1", "sh2", "repl", "quiet"}, out
    term, typed = warns["sh1"]
    assert "ignores SIGTERM" in term and "stop_timeout (7 s)" in term
    assert 'the wakeup briefing (wakeup_via = "first-message")' in typed and "checkpoint prompts" in typed
    assert 'talks_to = "shell"' in typed and "would execute them as commands" in typed
    assert len(warns["sh2"]) == 2 and "ignores SIGTERM" in warns["sh2"][0] and "types warnings" in warns["sh2"][1]
    assert len(warns["repl"]) == 1 and "an interactive REPL" in warns["repl"][0]
    assert warns["quiet"] == [w for w in warns["quiet"] if "types warnings into it" in w] and warns["quiet"]


@pytest.mark.parametrize("argv,kind", [
    (["sh"], Interpreter.TERM_IGNORING_SHELL), (["bash", "--rcfile", "x"], Interpreter.TERM_IGNORING_SHELL),
    (["fish"], Interpreter.SHELL), (["python3.12", "-i", "x.py"], Interpreter.REPL), (["node"], Interpreter.REPL),
    (["env", "A=1", "-u", "B", "dash"], Interpreter.TERM_IGNORING_SHELL),
    (["bash", "run.sh"], None), (["sh", "-c", "x"], None), (["python", "-m", "x"], None), (["node", "a.js"], None),
    (["codex"], None), (["claude", "--model", "x"], None),
])
def test_which_commands_are_interactive_interpreters(argv: list[str], kind: Interpreter | None) -> None:
    found = interactive_interpreter(argv)
    assert (found.kind if found else None) is kind


@pytest.mark.parametrize("argv", [["bash", "--norc", "-i"], ["sh", "-i"]])
def test_an_interactive_shell_does_ignore_sigterm(argv: list[str]) -> None:
    """What the check's warning claims, on this machine's shells, in a real PTY."""
    assert interactive_interpreter(argv) is not None
    child = pexpect.spawn(argv[0], argv[1:], env={"PATH": os.environ["PATH"], "PS1": "ready> ", "TERM": "dumb"},
                          encoding="utf-8", timeout=30)
    try:
        child.expect("ready> ")
        child.kill(signal.SIGTERM)
        child.sendline("echo still-$((40+2))")
        child.expect("still-42")
        assert child.isalive()
    finally:
        child.close(force=True)


def test_check_warns_when_the_running_daemon_may_not_stop_in_time(project: Project) -> None:
    project.fake_unit("slowstop", cycle=True)  # checkpoint 300 + grace 2 (fake_unit), stop_timeout 3
    project.agentd("start", env=clean_env(TIMEOUT_STOP_USEC="90000000"))
    project.wait_state("slowstop", "running")
    out = project.agentd("check").stdout  # run WITHOUT the variable: read from the daemon's environment
    assert "stopping may take 320 s" in out and "the running daemon's environment" in out and "allows 90 s" in out
    project.agentd("stop", "--now")
    assert "stopping may take" not in project.agentd("check").stdout


# -- Ctrl-C during stop ----------------------------------------------------------------------------------

def test_ctrl_c_during_stop_says_the_daemon_goes_on(project: Project, tmp_path: Path) -> None:
    project.fake_unit("slow", "--on-checkpoint", "slow:120", cycle=True)
    project.agentd("start")
    project.wait_state("slow", "running")
    # a unit that has not taken its wakeup yet is stopped at once (nothing to checkpoint): wait for it
    wait_until(lambda: project.unit_status("slow")["wakeup"] not in (None, "pending", "typing"), 60,
               what="the wakeup delivered")
    err_path = tmp_path / "stop.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([*AGENTD, "--project", str(project.root), "stop"], env=clean_env(), stdout=err,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: "checkpointing slow first" in err_path.read_text(), 60, what="stop to say what it waits for")
        wait_until(lambda: (r := project.unit_status("slow")) is not None and r["state"] == "checkpointing", 60,
                   what="the checkpoint")  # (a status answered while the stop begins may not list it yet)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    out = err_path.read_text()
    assert "Aborted!" not in out
    assert "goes on stopping every unit, then itself" in out and "`agentd stop --now` skips the checkpoints" in out
    daemon = project.daemon_pid()
    assert daemon is not None and alive(daemon)  # still at its checkpoint
    assert project.unit_status("slow")["state"] in ("checkpointing", "stopping")
    project.agentd("stop", "--now")
    assert not alive(daemon)


# -- --help examples and the man page ------------------------------------------------------------------------

def _commands(group: click.Group, ctx: click.Context, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += _commands(command, click.Context(command, info_name=name, parent=ctx), (*path, name))
        found.append(((*path, name), command))
    return found


#: Commands whose examples come with a change on another branch (the `logs` command is being rewritten).
PENDING = {("logs",)}


def test_every_command_has_examples_in_its_help() -> None:
    ctx = click.Context(cli, info_name="agentd")
    missing = [" ".join(path) for path, command in _commands(cli, ctx)
               if not command.hidden and path not in PENDING and "Examples" not in (command.epilog or "")]
    assert missing == []
    shown = subprocess.run([*AGENTD, "stop", "--help"], capture_output=True, text=True, timeout=60, env=clean_env())
    assert "Examples:\n    agentd stop " in shown.stdout


def test_the_man_page_is_in_step_with_the_commands() -> None:
    shipped = (REPO / "docs" / "agentd.1").read_text()
    assert shipped == manpage.render(cli, __version__), "regenerate: python -m supervisor.cli.manpage > docs/agentd.1"
    ctx = click.Context(cli, info_name="agentd")
    for path, command in _commands(cli, ctx):
        if not isinstance(command, click.Group) and not command.hidden:
            assert f'.SS "{manpage.roff(" ".join(path))}"' in shipped, path


def test_the_man_page_renders_without_warnings(tmp_path: Path) -> None:
    result = subprocess.run(["man", "--warnings", "-l", str(REPO / "docs" / "agentd.1")], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8"})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "agentd export systemd [OPTIONS] UNIT" in result.stdout and "TIMEOUT_STOP_USEC" in result.stdout
    assert str(REPO) not in (REPO / "docs" / "agentd.1").read_text()


# -- the status note ------------------------------------------------------------------------------------------

def test_the_status_note_never_shows_empty_parts() -> None:
    from supervisor.cli.render import status_note

    assert status_note({"violations": 2, "queued_sends": 2, "activity": "", "reason": None}) == \
        "2 queued; 2 violation(s)"
    assert status_note({"activity": "waiting for the turn to end", "next_restart_in": 4.2}) == \
        "waiting for the turn to end; restart in 4s"
    row = {"schedule": {"start": "2026-12-01T22:00:00+00:00", "stop": None}, "reason": "scheduled stop",
           "last_checkpoint": {"trigger": "threshold", "flush": "verified", "ratio": 0.0123}}
    # the ratio is the wakeup's size against the context before, and says so (issue 27 §2)
    assert status_note(row) == ("scheduled stop; next start 2026-12-01 22:00:00; "
                                "last cycle: threshold, notes verified, wakeup 1.2% of the context before")
    # what to do comes first: a failed unit's reason, a blocking screen
    failed = {"state": "failed", "reason": "too many restarts", "scope": "watched, not enforced (no landlock)"}
    assert status_note(failed) == "too many restarts; scope: watched, not enforced (no landlock)"
    blocked = {"state": "running", "scope": "watched, not enforced (no landlock)", "activity": None,
               "blocked": {"screen": "login", "todo": "run codex login", "freeze": "blocked_screen",
                           "action": "notify", "after": 120}}
    assert status_note(blocked).startswith("blocked: login: run codex login; [freeze] blocked_screen = notify after 120s")
    assert status_note({}) == ""


# -- a decision tagged constraint -----------------------------------------------------------------------------

def test_a_decision_tagged_constraint_says_where_hard_constraints_live(project: Project) -> None:
    """Issue 27 §2: `--tag constraint` reads like a hard constraint; it is not one."""
    project.agentd("init")
    tagged = project.agentd("decide", "never touch the wire format", "--why", "because clients pin it, so no", "--tag",
                            "constraint")
    assert ".agent/constraints.md" in tagged.stderr and "not a hard constraint" in tagged.stderr
    assert "never touch the wire format" in tagged.stdout  # recorded all the same
    plain = project.agentd("decide", "cache tokens", "--why", "because parsing is slow, so we keep them", "--tag", "arch")
    assert "constraints.md" not in plain.stderr


# -- other supervisors' words --------------------------------------------------------------------------------

@pytest.mark.parametrize(("alias", "command"), [("ls", "status"), ("list", "status"), ("ps", "status"), ("monit", "web")])
def test_pm2_and_ps_habits_reach_our_commands(alias: str, command: str) -> None:
    """Issue 27 §2: `agentd ls` suggested `logs`, `monit` suggested `init`."""
    from click.testing import CliRunner

    from supervisor.cli.app import cli

    got = CliRunner().invoke(cli, [alias, "--help"])
    assert got.exit_code == 0, got.output
    assert got.output.split("\n", 2)[2] == CliRunner().invoke(cli, [command, "--help"]).output.split("\n", 2)[2]
    assert CliRunner().invoke(cli, ["lss"]).exit_code != 0  # no alias swallows a typo


def test_the_fast_status_path_knows_the_aliases() -> None:
    from supervisor.cli import fast

    assert fast.parse(["ls", "web"]) == fast.parse(["status", "web"]) is not None
    assert fast.parse(["list", "--json"]) == fast.parse(["status", "--json"]) is not None
