"""``--json`` has one convention (issue 27 §2, docs/json.md): one JSON object for a state, JSON Lines for
records.  Each command's help says which; docs/json.md lists every one; and what each prints parses so."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import click
import pytest

from supervisor.cli.app import cli
from tests.conftest import Project, wait_until

REPO = Path(__file__).resolve().parent.parent
OBJECT, LINES = "one JSON object", "JSON Lines"


def _with_json(group: click.Group, path: tuple[str, ...] = ()) -> dict[str, str]:
    """``{"plan status": help of its --json}`` for every command with a --json option."""
    found = {}
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found.update(_with_json(command, (*path, name)))
            continue
        for param in command.params if command else ():
            if isinstance(param, click.Option) and "--json" in param.opts:
                found[" ".join((*path, name))] = param.help or ""
    return found


def _documented() -> dict[str, str]:
    """docs/json.md's table: ``{"plan status": "one JSON object" | "JSON Lines"}``."""
    rows = re.findall(r"^\| `agentd ([a-z -]+?)(?: [A-Z]+)? --json` \| (one JSON object|JSON Lines)", 
                      (REPO / "docs" / "json.md").read_text(), re.M)
    return {re.sub(r" --\w+$", "", name): shape for name, shape in rows}


def test_every_json_option_says_its_shape_and_is_documented() -> None:
    helps = _with_json(cli)
    assert {"status", "history", "logs", "log", "report"} <= set(helps)  # the walk finds them
    documented = _documented()
    for command, text in helps.items():
        shape = OBJECT if text.startswith(OBJECT) else LINES if text.startswith(LINES) else None
        assert shape is not None, f"agentd {command} --json: its help must start with {OBJECT!r} or {LINES!r}"
        assert documented.get(command) == shape, f"agentd {command} --json: docs/json.md says {documented.get(command)}"
    assert set(documented) == set(helps)  # and no row for a command that has no --json


def _parse(shape: str, out: str) -> list[dict]:
    if shape == OBJECT:
        value = json.loads(out)
        assert isinstance(value, dict)
        return [value]
    records = [json.loads(line) for line in out.splitlines()]  # every line is one whole object
    assert all(isinstance(r, dict) for r in records)
    return records


@pytest.fixture
def busy(project: Project) -> Project:
    """A project with a running unit, a cycle in its history, a decision, a fact."""
    project.fake_unit("web", cycle=True)
    subprocess.run(["git", "init", "-q", str(project.root)], check=True, timeout=30)  # wip list needs a work tree
    project.agentd("init")
    project.agentd("start")
    project.wait_state("web", "running")
    project.agentd("checkpoint", "web")
    project.agentd("decide", "cache tokens", "--why", "because parsing is slow, so we keep them", "--global")
    (project.root / "retry.py").write_text("RETRIES = 3\n")
    project.agentd("fact", "add", "retries are capped at 3", "--source", "retry.py:1")
    yield project
    project.agentd("stop", "--now")


def test_what_each_command_prints_parses_as_its_help_says(busy: Project) -> None:
    helps = _with_json(cli)
    runs = {"status": ["status"], "report": ["report"], "plan status": ["plan", "status"],
            "history": ["history", "web"], "logs": ["logs", "web", "-n", "5"], "log": ["log", "--all"],
            "wip list": ["wip", "list"], "violations": ["violations"], "fact list": ["fact", "list"],
            "snapshot list": ["snapshot", "list"], "recall": ["recall", "--events", "tokens"]}
    # the daemon's indexer takes the decision at its next pass (up to 30 s after a quiet spell): wait for it,
    # so `recall` has something to print rather than "no match"
    wait_until(lambda: busy.agentd("recall", "--events", "tokens", check=False).returncode == 0, 90, interval=0.5,
               what="the decision in the event index")
    counts = {}
    for command, argv in runs.items():
        shape = OBJECT if helps[command].startswith(OBJECT) else LINES
        result = busy.agentd(*argv, "--json", check=False)
        assert result.returncode in (0, 3), (command, result.stderr)
        counts[command] = len(_parse(shape, result.stdout))
    # the records are there, one per line: a cycle, a decision, a fact, lines of the log
    assert counts["history"] >= 1 and counts["log"] >= 1 and counts["fact list"] >= 1 and counts["logs"] >= 1, counts
