"""Issue 15 section 3: one task per module, notes that carry their module, briefings that keep modules apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from supervisor.cli.app import cli
from supervisor.continuity.wakeup import build_wakeup
from supervisor.memory import (
    AgentPaths,
    append_note,
    engram,
    memory_fingerprint,
    promote,
    record_decision,
    snapshots,
    update_task_state,
    write_auto_checkpoint,
)
from supervisor.memory import facts
from supervisor.memory.task import read_task

from .conftest import T0, git

WHY = "because it must be decided, so we decide"
UNITS = {
    "api": '[agent]\ncommand = ["true"]\n[scope]\nmodule = "api"\npaths = ["src/api/**"]\n',
    "web": '[agent]\ncommand = ["true"]\n[scope]\nmodule = "web"\npaths = ["src/web/**"]\n',
}


@pytest.fixture
def two_modules(repo: Path) -> Path:
    for module in ("api", "web"):
        (repo / "src" / module).mkdir()
        (repo / "src" / module / "main.py").write_text(f"{module} = 1\n")
    git(repo, "add", "src")
    git(repo, "commit", "-q", "-m", "modules")
    (repo / "units").mkdir()
    for name, text in UNITS.items():
        (repo / "units" / f"{name}.toml").write_text(text)
    return repo


def _run(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(cli, ["--root", str(repo), *args], env={"AGENTD_MODULE": None, "AGENTD_UNIT": None, "AGENTD_SCOPE": None,
                                                                         "AGENTD_CONFIG": None, **(env or {})},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_task_for_one_unit_leaves_the_others_and_the_global_task_alone(two_modules: Path):
    repo = two_modules
    paths = AgentPaths(repo)
    update_task_state(paths, "(not started)", task="Ship 1.0 by Friday")  # the global task, in current-task.md
    _run(repo, "task", "web", "Restyle the login page")
    out = _run(repo, "task", "api", "Add rate limiting to the API")
    assert ".agent/tasks/api.md: task replaced" in out
    assert read_task(paths, "api").body == "Add rate limiting to the API"
    assert read_task(paths, "web").body == "Restyle the login page"
    assert read_task(paths).body == "Ship 1.0 by Friday"
    web = build_wakeup(repo, "web", ["src/web/**"]).text
    task = web.split("## Current task")[1].split("## ")[0]
    assert "[web] Restyle the login page" in task and "[global] Ship 1.0 by Friday" in task
    assert "rate limiting" not in web  # not api's task, nor api's task-switch decision
    api = build_wakeup(repo, "api", ["src/api/**"]).text
    assert "[api] Add rate limiting to the API" in api and "Restyle" not in api
    # an agent sets its own state at interruption without naming a file
    out = _run(repo, "task-state", "limiter written; next: tests", env={"AGENTD_UNIT": "api"})
    assert ".agent/tasks/api.md: State at interruption: limiter written; next: tests" in out
    assert "[api] State at interruption: limiter written; next: tests" in build_wakeup(repo, "api").text
    assert "limiter written" not in build_wakeup(repo, "web").text


def test_notes_carry_their_module_and_stay_in_it(two_modules: Path):
    repo = two_modules
    paths = AgentPaths(repo)
    _run(repo, "note", "the API pool holds 10 connections", "--confirmed", env={"AGENTD_MODULE": "api"})
    append_note(repo, "web guesses the CSS is cached", "hypothesis", module="web", now=T0)
    append_note(repo, "CI runs on every push", "confirmed", now=T0)  # global
    write_auto_checkpoint(repo, "web", "deadline passed", "tail", now=T0)  # web's [auto] line
    text = paths.engram.read_text()
    assert "[confirmed] [@api] the API pool holds 10 connections" in text
    assert "[auto] [@web] agent did not confirm" in text
    api = build_wakeup(repo, "api", ["src/api/**"]).text
    assert "the API pool holds 10 connections" in api and "CI runs on every push" in api
    assert "CSS" not in api and "did not confirm" not in api  # never another module's notes
    web = build_wakeup(repo, "web", ["src/web/**"]).text
    assert "did not confirm" in web.split("## Engram: hypotheses")[1] and "API pool" not in web
    assert [n.text for n in engram.recent(paths, 10, "api")] == ["the API pool holds 10 connections", "CI runs on every push"]
    # promote --module api: api's and global notes become api's facts; web's stay in the engram
    new = promote(repo, "api", now=T0)
    assert sorted(f.text for f in new) == ["CI runs on every push", "the API pool holds 10 connections"]
    assert {f.module for f in facts.load(paths, "api")} == {"api"}
    left = [n for n in engram.all_notes(paths.engram)]
    assert {(n.module, n.kind) for n in left} == {("web", "hypothesis"), ("web", "auto")}


def test_the_module_task_file_is_part_of_the_checkpoint_fingerprint(plain: Path):
    paths = AgentPaths(plain)
    before = memory_fingerprint(plain, "core")
    update_task_state(paths, "parser half done", module="core")
    after = memory_fingerprint(plain, "core")
    assert after != before
    update_task_state(paths, "web stuff", module="web")
    assert memory_fingerprint(plain, "core") == after  # another module's task is not this checkpoint's


def test_snapshot_diff_only_compares_where_both_scopes_look(two_modules: Path):
    repo = two_modules
    paths = AgentPaths(repo)
    # an agent's own decide with $AGENTD_MODULE only: the whole project is hashed
    first = record_decision(repo, "api decides", WHY, module="api", now=T0)
    assert "src/web/main.py" in snapshots.load_id(paths, first.snapshot)["files"]
    # then `agentd task api ...` hashes only the unit's scope
    _run(repo, "task", "api", "Next api task")
    second = snapshots.load_id(paths, snapshots.list_ids(paths)[-1])
    assert second["previous"] == first.snapshot
    assert second["changed"]["removed"] == []  # web's files still exist: they are not "removed"
    (repo / "src" / "api" / "main.py").unlink()
    (repo / "src" / "api" / "new.py").write_text("n = 1\n")
    third = record_decision(repo, "api again", WHY, module="api", scope_paths=["src/api/**"])
    changed = snapshots.load_id(paths, third.snapshot)["changed"]
    assert changed == {"added": ["src/api/new.py"], "modified": [], "removed": ["src/api/main.py"]}
    # the briefing shows the module's own latest snapshot, even when a global decision is newer
    record_decision(repo, "global choice", WHY, scope_paths=["src/web/**"])
    api = build_wakeup(repo, "api", ["src/api/**"]).text.split("## Snapshot of the latest decision")[1]
    assert api.split("\n")[1].startswith(f"{third.snapshot} at ") and "src/web" not in api.split("## Module")[0]


def test_the_old_single_task_file_is_read_as_the_global_task(plain: Path):
    paths = AgentPaths(plain)
    paths.current_task.write_text("# Current task\n\nPort the parser.\n\nState at interruption: lexer done\n")
    w = build_wakeup(plain, "core").text
    assert "[global] State at interruption: lexer done" in w and "[global] Port the parser." in w
    assert "no task for module core" not in w
    rec = record_decision(plain, "x", WHY, module="core", now=T0)
    assert snapshots.load_id(paths, rec.snapshot)["task_head"] == "Port the parser."  # no module file: the global task
    paths.current_task.write_text("# Current task\n\n(describe the current task here)\n\nState at interruption: (not set)\n")
    assert "no task for module core: `agentd task UNIT TEXT` writes .agent/tasks/core.md" in build_wakeup(plain, "core").text


def test_an_agents_own_command_takes_its_module_and_scope_from_its_session(tmp_path: Path) -> None:
    """``$AGENTD_SCOPE`` (set by the daemon with ``$AGENTD_MODULE``) spares loading the unit file."""
    from supervisor.config.target import MemoryTarget, memory_target
    from supervisor.config.unitfile import UnitFileError
    from supervisor.config.units import UnitLoadError

    nowhere = tmp_path / "units"  # no unit file: the session's variables say it all
    env = {"AGENTD_UNIT": "api", "AGENTD_MODULE": "api", "AGENTD_SCOPE": '{"module": "api", "paths": ["src/api/"]}'}
    assert memory_target(nowhere, env) == MemoryTarget("api", ("src/api/",), "api")
    assert memory_target(nowhere, env, scope=["docs/"]) == MemoryTarget("api", ("docs/",), "api")
    # another module than the session's (the agent set AGENTD_MODULE itself): the unit's scope is not its own
    other = {**env, "AGENTD_MODULE": "web"}
    assert memory_target(nowhere, other) == MemoryTarget("web", (), None)
    # no or a broken AGENTD_SCOPE: the unit file is read, as before, and a missing one is an error
    for broken in ({**env, "AGENTD_SCOPE": "{"}, {k: v for k, v in env.items() if k != "AGENTD_SCOPE"}):
        with pytest.raises((UnitLoadError, UnitFileError, ValueError)):
            memory_target(nowhere, {k: v for k, v in broken.items() if k != "AGENTD_MODULE"})
