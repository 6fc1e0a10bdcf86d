"""The CLI people expect (issue 17): logs --all/--daemon, --json, --version, colours, widths,
progress, "did you mean", shell completion.  Real daemon, fake-agent units, real terminals (pexpect)."""

from __future__ import annotations

import itertools
import json
import re
import sys
import time

import pexpect
import pytest

from supervisor.cli.logs import human_event
from supervisor.cli.style import fit
from tests.conftest import AGENTD, Project, clean_env, wait_until

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def on_terminal(project: Project, *args: str, columns: int = 200, **env: str) -> str:
    """Run agentd with a terminal as its output; what it printed."""
    child = pexpect.spawn(AGENTD[0], [*AGENTD[1:], "--root", str(project.root), *args], cwd=str(project.root),
                          env=clean_env(COLUMNS=str(columns), TERM="xterm", **env), dimensions=(40, columns),
                          timeout=60, encoding="utf-8")
    child.expect(pexpect.EOF)
    child.close()
    return child.before


@pytest.fixture
def running(project: Project) -> Project:
    for name in ("web", "api"):
        project.fake_unit(name)
    project.agentd("start")
    for name in ("web", "api"):
        project.wait_state(name, "running")
        project.agentd("send", name, "work 3")
    wait_until(lambda: "Reading" in project.transcript("web") and "Reading" in project.transcript("api"), 20,
               what="both units printing")
    return project


def test_version(project: Project) -> None:
    from supervisor import __version__

    assert project.agentd("--version").stdout.strip() == f"agentd {__version__}"


def test_unknown_unit_names_say_did_you_mean(running: Project) -> None:
    for args in (("logs", "wbe"), ("history", "wbe"), ("send", "wbe", "hi"), ("stop", "wbe")):
        result = running.agentd(*args, check=False)
        assert result.returncode != 0, args
        assert "no such unit 'wbe'; did you mean 'web'?" in result.stderr, (args, result.stderr)
    result = running.agentd("history", "nosuch", check=False)
    assert result.returncode == 1 and "no such unit 'nosuch'" in result.stderr and "did you mean" not in result.stderr


def _seen_when_sent(project: Project, child: pexpect.spawn, unit: str) -> None:
    """Send ``echo marker-N`` to ``unit`` until ``agentd logs -f`` in ``child`` shows it with the unit's prefix."""
    deadline = time.monotonic() + 60
    for n in itertools.count():
        project.agentd("send", unit, f"echo marker-from-{unit}-{n}")
        try:
            child.expect(rf"(^|\n){unit} \| marker-from-{unit}-\d+\r?\n", timeout=5)
            return
        except pexpect.TIMEOUT:
            assert time.monotonic() < deadline, f"agentd logs -f never showed {unit}'s output: {child.before!r}"


def test_logs_all_prefixes_every_unit_and_follows(running: Project) -> None:
    lines = running.agentd("logs", "--all", "-n", "3").stdout.splitlines()
    assert any(line.startswith("api | ") for line in lines) and any(line.startswith("web | ") for line in lines)
    assert "\x1b[" not in "".join(lines)  # piped: no colour
    coloured = on_terminal(running, "logs", "--all", "-n", "2")
    assert "\x1b[" in coloured and "api |" in ANSI.sub("", coloured)
    assert "\x1b[" not in on_terminal(running, "logs", "--all", "-n", "2", NO_COLOR="1")
    child = pexpect.spawn(AGENTD[0], [*AGENTD[1:], "--root", str(running.root), "logs", "--all", "-n", "0", "-f"],
                          env=clean_env(NO_COLOR="1"), timeout=20, encoding="utf-8")
    try:
        # `-n 0 -f` shows nothing until it follows, so nothing says when it started: the first marker may be
        # written before it does (then it is old output, rightly not shown); each try sends a new one
        _seen_when_sent(running, child, "api")
        _seen_when_sent(running, child, "web")  # interleaved: both units in one stream
    finally:
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()


def test_logs_daemon_in_human_form(running: Project) -> None:
    out = running.agentd("logs", "--daemon", "-n", "200").stdout
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} info +unit_state unit=web old=starting new=running", out, re.M), out
    raw = running.agentd("logs", "--daemon", "-n", "5", "--json").stdout.splitlines()
    assert all(json.loads(line)["event"] for line in raw)


def test_json_on_the_listing_commands(running: Project) -> None:
    running.agentd("decide", "use the fake agent", "--why", "because it is fast, so tests are quick", "--global")
    (running.root / "README.md").write_text("hello\n")
    running.agentd("fact", "add", "units live in units/", "--source", "README.md:1", "--module", "global")
    checks = {
        ("logs", "web", "-n", "3", "--json"): lambda r: r["unit"] == "web" and "line" in r,
        ("log", "--json"): lambda r: r["decision"] == "use the fake agent" and r["module"] == "global",
        ("fact", "list", "--json"): lambda r: r["text"] == "units live in units/",
        ("snapshot", "list", "--json"): lambda r: r["decision"] == "use the fake agent",
        ("recall", "fake", "--json"): lambda r: r["kind"] in ("decision", "fact"),
        ("violations", "--json"): lambda r: True,
        ("history", "web", "--json"): lambda r: True,
    }
    for args, ok in checks.items():
        out = running.agentd(*args).stdout
        records = [json.loads(line) for line in out.splitlines()]
        assert all(ok(r) for r in records), (args, out)
        if args[0] not in ("violations", "history"):
            assert records, args
    status = json.loads(running.agentd("status", "--json").stdout)
    assert {r["unit"] for r in status["units"]} == {"web", "api"}


def test_status_colours_on_a_terminal_only_and_fits_its_width(running: Project) -> None:
    piped = running.agentd("status").stdout
    assert "\x1b[" not in piped and "LAST EXIT" in piped
    wide = on_terminal(running, "status", columns=200)
    assert "\x1b[32m" in wide  # running in green
    assert "\x1b[" not in on_terminal(running, "status", NO_COLOR="1")
    narrow = ANSI.sub("", on_terminal(running, "status", columns=70))
    table = [line for line in narrow.splitlines() if line.strip() and not line.startswith("agentd ")]
    assert table and max(len(line.rstrip("\r")) for line in table) <= 70, narrow
    assert "CONTEXT" in narrow and "LAST EXIT" not in narrow


def test_stop_says_what_it_waits_for(project: Project) -> None:
    project.fake_unit("slow", "--on-checkpoint", "slow:1", cycle=True)
    project.agentd("start")
    project.wait_state("slow", "running")
    wait_until(lambda: project.unit_status("slow")["wakeup"] not in (None, "pending", "typing"), 30,
               what="the wakeup delivered")
    result = project.agentd("stop", "slow")
    assert "slow: checkpoint prompt typed; waiting for the agent to write its notes (up to 300 s; --now skips)" \
        in result.stderr, result.stderr
    assert "slow: checkpoint verified" in result.stderr and "slow: stopped" in result.stderr


def test_shell_completion_completes_unit_names(project: Project) -> None:
    project.fake_unit("web")
    project.fake_unit("worker")
    project.fake_unit("api")
    env = clean_env(_AGENTD_COMPLETE="bash_complete", COMP_WORDS=f"agentd --project {project.root} logs w", COMP_CWORD="4")
    import subprocess

    out = subprocess.run([sys.executable, "-m", "supervisor"], env=env, capture_output=True, text=True, cwd="/").stdout
    assert out.split() == ["plain,web", "plain,worker"]


def test_pure_helpers() -> None:
    line = human_event({"timestamp": "2026-01-02T03:04:05.678901Z", "level": "warning", "event": "stalled",
                        "unit": "web", "silent_for": 901.5, "note": "two words"}, colour=False)
    assert line == '2026-01-02 03:04:05.678 warning stalled unit=web note="two words" silent_for=901.5'
    table = fit(["A", "NOTE"], [["x", "y" * 100]], 40)
    assert max(len(line) for line in table.splitlines()) <= 40 and table.splitlines()[-1].endswith("…")
    assert fit(["A", "NOTE"], [["x", "y" * 100]], None).endswith("y" * 100)
