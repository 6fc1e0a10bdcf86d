"""Every command finds its project the way git finds a repository (one rule, fast path and settings alike)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from supervisor.cli.context import _quick_paths
from supervisor.config.paths import discover_root, locate
from supervisor.config.settings import load_settings
from supervisor.config.units import parse_unit
from tests.conftest import AGENTD, Project, clean_env


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """agentd with NO --project: the project is whatever the command finds from ``cwd``."""
    return subprocess.run([*AGENTD, *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def nowhere(tmp_path: Path) -> Path:
    """A folder with no project at or above it."""
    folder = tmp_path / "empty"
    folder.mkdir()
    assert discover_root(folder) is None, f"a folder above {folder} looks like a project; the test needs none"
    return folder


# -- the rule ----------------------------------------------------------------------------------

@pytest.mark.parametrize("marker", ["units", ".agent", ".agentd"])
def test_the_nearest_folder_with_a_marker_is_the_root(tmp_path: Path, marker: str) -> None:
    (tmp_path / "app" / marker).mkdir(parents=True)
    deep = tmp_path / "app" / "src" / "api"
    deep.mkdir(parents=True)
    assert discover_root(deep) == tmp_path / "app"
    assert locate(None, None, {}, deep).project_root() == (tmp_path / "app").resolve()
    (tmp_path / "app" / "src" / "units.txt").write_text("a file is not a marker")
    assert discover_root(deep) == tmp_path / "app"


def test_precedence_flag_env_file_walk_cwd(tmp_path: Path) -> None:
    found = tmp_path / "found"
    (found / "units").mkdir(parents=True)
    (found / "etc").mkdir()
    sub = found / "sub"
    sub.mkdir()
    assert locate(None, None, {}, sub).project_root() == found.resolve()
    # the settings file of the found project names another root
    (found / "etc" / "agentd.toml").write_text('project_root = "../elsewhere"\n')
    where = locate(None, None, {}, sub)
    assert where.config == found / "etc" / "agentd.toml"
    assert where.project_root("../elsewhere") == (tmp_path / "elsewhere").resolve()
    # the environment beats the file, the flag beats the environment
    env = {"AGENTD_PROJECT": str(tmp_path / "from-env")}
    assert locate(None, None, env, sub).project_root("../elsewhere") == (tmp_path / "from-env").resolve()
    assert locate(None, None, {"AGENTD_PROJECT_ROOT": "rel"}, sub).project_root() == (sub / "rel").resolve()
    assert locate(tmp_path / "flag", None, env, sub).project_root() == (tmp_path / "flag").resolve()



def test_without_a_project_anywhere_the_working_directory(nowhere: Path) -> None:
    where = locate(None, None, {}, nowhere)
    assert where.project_root() == nowhere.resolve() and where.config is None
    assert "no units/, .agent/ or .agentd/" in where.root_source()


def test_the_fast_path_and_the_settings_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's stdlib path and pydantic's settings find the same root, state directory and socket."""
    for key in ("AGENTD_PROJECT", "AGENTD_PROJECT_ROOT", "AGENTD_CONFIG", "AGENTD_STATE_DIR", "AGENTD_UNIT",
                "AGENTD_MODULE", "AGENTD_ROOT", "AGENTD_SOCKET", "AGENTD_SESSION", "AGENTD_SCOPE"):
        monkeypatch.delenv(key, raising=False)
    app = tmp_path / "app"
    (app / "units").mkdir(parents=True)
    (app / "etc").mkdir()
    (app / "etc" / "agentd.toml").write_text('state_dir = "run"\n')
    sub = app / "src" / "api"
    sub.mkdir(parents=True)
    other = tmp_path / "other"
    (other / ".agent").mkdir(parents=True)
    cases = [(sub, None, {}), (sub, other, {}), (tmp_path, None, {"AGENTD_PROJECT": str(app)}),
             (sub, None, {"AGENTD_PROJECT_ROOT": str(other)})]
    for cwd, flag, env in cases:
        monkeypatch.chdir(cwd)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        fast = _quick_paths(None, flag)
        full = load_settings(None, project_root=flag)
        assert fast is not None, f"fast path refused {cwd} {flag} {env}"
        assert (fast.project_root, fast.state_path, fast.socket_path) == \
            (full.project_root, full.state_path, full.socket_path), (cwd, flag, env)
        for key in env:
            monkeypatch.delenv(key)
    monkeypatch.chdir(sub)
    assert load_settings().state_path == app.resolve() / "run"  # etc/agentd.toml of the FOUND project


# -- the commands, as a user runs them -------------------------------------------------------------

def test_commands_from_a_subfolder_reach_the_running_project(project: Project) -> None:
    project.fake_unit("api")
    project.agentd("start")
    project.wait_state("api", "running")
    sub = project.root / "src" / "api"
    sub.mkdir(parents=True)
    status = run(sub, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "api" in status.stdout and "running" in status.stdout
    daemons_before = project.daemon_pid()
    again = run(sub, "start")
    assert again.returncode == 0, again.stderr
    assert project.daemon_pid() == daemons_before
    assert not (sub / ".agentd").exists() and not (sub / ".agent").exists()
    assert not (sub / "units").exists()
    # the memory too: a decision made at the root is found from the subfolder
    project.agentd("init")
    project.agentd("decide", "cache the parsed tokens", "--why", "because parsing is slow, so we keep them")
    recall = run(sub, "recall", "parsed", "tokens")
    assert recall.returncode == 0 and "cache the parsed tokens" in recall.stdout, recall.stdout + recall.stderr
    stopped = run(sub, "stop", "--now")
    assert stopped.returncode == 0 and "agentd stopped" in stopped.stdout


def test_start_in_an_empty_folder_refuses_and_creates_nothing(nowhere: Path) -> None:
    result = run(nowhere, "start")
    assert result.returncode == 1
    assert "agentd init" in result.stderr and "units/demo.toml" in result.stderr
    assert str(nowhere) in result.stderr and "--project" in result.stderr
    assert list(nowhere.iterdir()) == []
    fg = run(nowhere, "start", "--foreground")
    assert fg.returncode == 1 and "agentd init" in fg.stderr
    assert list(nowhere.iterdir()) == []


def test_start_with_only_examples_says_so(nowhere: Path) -> None:
    (nowhere / "units").mkdir()
    (nowhere / "units" / "codex.example.toml").write_text('[agent]\ncommand = ["codex"]\n')
    result = run(nowhere, "start")
    assert result.returncode == 1 and "only examples" in result.stderr and "codex.example.toml" in result.stderr
    assert not (nowhere / ".agentd").exists()


def test_check_without_units_says_so_and_fails(nowhere: Path) -> None:
    result = run(nowhere, "check")
    assert result.returncode == 1
    assert "no units/ folder" in result.stdout and "agentd init" in result.stdout


def test_init_creates_what_is_missing_and_the_example_is_a_valid_unit(nowhere: Path) -> None:
    first = run(nowhere, "init")
    assert first.returncode == 0, first.stderr
    example = nowhere / "units" / "example.toml"
    assert (nowhere / ".agent" / "engram.md").is_file() and example.is_file()
    assert "units/example.toml" in first.stdout
    spec = parse_unit(example, project_root=nowhere)
    assert spec.unit.enabled is False and spec.agent.command[:3] == ("python", "-m", "supervisor.fakeagent")
    check = run(nowhere, "check")
    assert check.returncode == 0 and "ok     example" in check.stdout, check.stdout
    assert "warn" not in check.stdout
    # idempotent, never overwrites
    example.write_text(example.read_text() + "# mine\n")
    again = run(nowhere, "init")
    assert again.returncode == 0 and "already complete" in again.stdout and "example.toml" not in again.stdout
    assert example.read_text().endswith("# mine\n")


def test_init_leaves_an_existing_units_folder_alone(project: Project) -> None:
    project.fake_unit("mine")
    out = project.agentd("init").stdout
    assert "example" not in out
    assert sorted(p.name for p in (project.root / "units").iterdir()) == ["mine.toml"]


def test_project_from_the_environment_and_the_root_alias(project: Project, nowhere: Path) -> None:
    project.fake_unit("api")
    check = run(nowhere, "check", env=clean_env(AGENTD_PROJECT=str(project.root)))
    assert check.returncode == 0 and "ok     api" in check.stdout
    for flag in ("--project", "--root"):
        result = run(nowhere, flag, str(project.root), "check")
        assert result.returncode == 0 and "ok     api" in result.stdout
    assert list(nowhere.iterdir()) == []


def test_the_fast_path_knows_every_setting() -> None:
    """quickpaths.SETTINGS_FIELDS is what decides which AGENTD_* variables need the full settings."""
    from supervisor.cli.quickpaths import SETTINGS_FIELDS
    from supervisor.config.settings import Settings

    assert set(SETTINGS_FIELDS) == set(Settings.model_fields)


def test_an_agents_own_variables_keep_the_fast_path_and_a_setting_does_not(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("AGENTD_")]:
        monkeypatch.delenv(key)
    (tmp_path / "units").mkdir()
    monkeypatch.chdir(tmp_path)
    agent = {"AGENTD_UNIT": "api", "AGENTD_MODULE": "api", "AGENTD_SESSION": "s1", "AGENTD_ROOT": str(tmp_path),
             "AGENTD_SOCKET": str(tmp_path / "x.sock"), "AGENTD_SCOPE": '{"module": "api", "paths": ["src/api/"]}',
             "AGENTD_SYNC": "after-decision"}
    for key, value in agent.items():
        monkeypatch.setenv(key, value)
    fast = _quick_paths(None, None)
    assert fast is not None and (fast.project_root, fast.state_path) == (load_settings().project_root,
                                                                         load_settings().state_path)
    for key, value in (("AGENTD_STATE_DIR", "elsewhere"), ("AGENTD_WEB__PORT", "9")):
        monkeypatch.setenv(key, value)
        assert _quick_paths(None, None) is None, key  # a setting: the full settings read it
        monkeypatch.delenv(key)
