"""``agentd notify`` (what the agents' hooks run on every turn) starts without click or any command module.

:mod:`supervisor.cli.notify` answers the plain form itself; anything else goes
to the click command, and both forward through one function.
"""

from __future__ import annotations

import subprocess

import pytest

from supervisor.cli.notify import parse
from tests.conftest import AGENTD, Project, clean_env, wait_until


@pytest.mark.parametrize(("argv", "env_unit", "expected"), [
    (["--unit", "web", "{}"], None, ("web", "{}")),
    (["--unit=web"], None, ("web", None)),
    (["{}"], "api", ("api", "{}")),
    ([], "api", ("api", None)),
    (["--unit", "web", "{}", "{}"], None, None),  # two payloads: click's error
    (["--help"], "api", None),
    (["{}"], None, None),  # no unit: click's "Missing option"
])
def test_the_plain_forms_are_answered_and_the_rest_goes_to_click(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                                                  env_unit: str | None, expected: object) -> None:
    monkeypatch.delenv("AGENTD_UNIT", raising=False)
    if env_unit:
        monkeypatch.setenv("AGENTD_UNIT", env_unit)
    assert parse(argv) == expected


def _notify(project: Project, *args: str, stdin: str = "", importtime: bool = False) -> subprocess.CompletedProcess[str]:
    socket = project.state / "agentd.sock"
    return subprocess.run([AGENTD[0], *(["-X", "importtime"] if importtime else []), *AGENTD[1:], "notify", *args],
                          input=stdin, capture_output=True, text=True, timeout=60,
                          env=clean_env(AGENTD_SOCKET=str(socket), AGENTD_UNIT="alpha"), cwd=project.root)


def test_notify_reaches_the_daemon_without_click_and_never_fails_the_agent(project: Project) -> None:
    project.fake_unit("alpha")
    project.agentd("start")
    project.wait_state("alpha", "running")

    done = _notify(project, stdin='{"hook_event_name": "Stop"}', importtime=True)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "supervisor.cli.notify" in imported
    assert not {"click", "supervisor.cli.app", "pydantic"} & imported, sorted(imported)
    wait_until(lambda: any(e.get("type") == "Stop" for e in project.events("agent_event", "alpha")), 30,
               what="the daemon to log the hook's event")

    # what goes wrong is said on stderr, and the agent's hook still succeeds
    wrong = _notify(project, "--unit", "nosuch", '{"type": "agent-turn-complete"}')
    assert wrong.returncode == 0 and "no such unit 'nosuch'" in wrong.stderr, wrong.stderr
    bad = _notify(project, "[1]")
    assert bad.returncode == 0 and "payload is not a JSON object" in bad.stderr, bad.stderr
    # a form the fast path leaves alone is click's, with the same outcome
    slow = _notify(project, "--unit", "alpha", "--", '{"type": "agent-turn-complete"}')
    assert slow.returncode == 0, slow.stderr
    wait_until(lambda: any(e.get("type") == "agent-turn-complete" for e in project.events("agent_event", "alpha")), 30,
               what="the click path's event")
