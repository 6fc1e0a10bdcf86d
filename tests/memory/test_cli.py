"""The CLI end to end (click's CliRunner over the real library and real files)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from supervisor.cli.app import cli

WHY = "because the parser is slow, so we cache tokens"


@pytest.fixture
def run(repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AGENTD_MODULE", raising=False)
    monkeypatch.delenv("AGENTD_UNIT", raising=False)
    monkeypatch.delenv("AGENTD_CONFIG", raising=False)
    monkeypatch.chdir(repo)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0, env: dict[str, str] | None = None):
        result = runner.invoke(cli, ["--root", str(repo), *args], env=env, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    return invoke


def test_session(run, repo: Path):
    assert "already complete" in run("init")
    out = run("decide", "cache tokens", "--why", WHY, "--tag", "arch", "--files", "src/core/a.py", "--module", "core",
              "--scope", "src/core")
    assert ".agent/decisions-core.log: [" in out
    sid = re.search(r"snapshot: (snapshot-[0-9A-Z]{26})$", out.strip()).group(1)
    err = run("decide", "cache tokens", "--why", "it is faster", code=1)
    assert "because <cause>, so <conclusion>" in err
    run("note", "tokens are bytes", "--confirmed")
    assert "say whether" in run("note", "x", code=2)
    run("fact", "add", "--module", "core", "one is one", "--source", "src/core/a.py:1")
    assert "1 fact(s), 0 stale" in run("fact", "check")
    assert "cache tokens" in run("recall", "cache", "--module", "core")
    assert "no match" in run("recall", "nothing-like-this", code=1)
    shown = run("snapshot", "show", sid)
    assert "decision: cache tokens" in shown and "src/core/a.py" in shown
    assert run("snapshot", "show", sid[:20], "--file", "src/core/a.py") == "one = 1\ntwo = 2\nthree = 3\n"
    assert "no such snapshot" in run("snapshot", "show", "snapshot-009", code=1)
    w = run("wakeup", "--module", "core", "--scope", "src/core")
    assert "cache tokens" in w and "tokens are bytes" in w and "one is one" in w
    assert run("wakeup", "--module", "core", "--scope", "src/core") == w
    assert "0 error(s)" in run("doctor")
    with open(repo / ".agent" / "decisions-core.log", "a") as fh:
        fh.write("not a decision\n")
    assert ".agent/decisions-core.log:2" in run("doctor", code=1)
    assert "promoted 1 note(s)" in run("promote", "--module", "core")
    promoted = re.search(r"(F-[0-9a-z]{8}) \[valid\] \(core\) tokens are bytes", run("fact", "list")).group(1)
    assert promoted in run("fact", "invalidate", promoted.upper(), "--why", "a changed")


def test_module_from_env_and_unit(run, repo: Path):
    run("decide", "from env", "--why", WHY, env={"AGENTD_MODULE": "ui"})
    assert (repo / ".agent" / "decisions-ui.log").read_text().count("from env") == 1
    (repo / "units").mkdir()
    (repo / "units" / "parser.toml").write_text(
        '[agent]\ncommand = ["true"]\n[scope]\nmodule = "core"\npaths = ["src/core/**"]\n[wakeup]\nbudget = 900\n'
    )
    out = run("decide", "from unit", "--why", WHY, env={"AGENTD_UNIT": "parser"})
    assert "decisions-core.log" in out
    shown = run("snapshot", "show", out.strip().rsplit("snapshot: ", 1)[1])
    assert "src/core/a.py" in shown and "src/ui.ts" not in shown
    w = run("wakeup", "parser")
    assert "budget 900 tokens" in w and "from unit" in w and "src/core/b.py" in w
    (repo / "units" / "shell.toml").write_text(
        '[agent]\ncommand = ["true"]\n[wakeup]\ncommand = ["bash", "-c", "echo hand-written wakeup; tail -1 .agent/decisions-core.log"]\n'
    )
    out = run("wakeup", "shell")
    assert out.startswith("hand-written wakeup\n") and "from unit" in out
    assert "unit 'nope'" in run("wakeup", "nope", code=1)
