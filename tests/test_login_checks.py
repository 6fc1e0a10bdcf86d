"""``check`` and ``doctor --env`` warn, without the network, when an agent cannot log in (issue 27 §1).

A Codex unit whose CODEX_HOME has no ``auth.json`` and no provider key sits at
"Sign in with ChatGPT"; a Claude unit with no key, or the example unit's
placeholder key, sits at its login screen.  Both used to pass ``check`` with
``ok`` and ``doctor --env`` with no warning.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from supervisor.adapters.checks import login_problem, placeholder
from supervisor.config.settings import Settings
from supervisor.config.units import parse_unit
from tests.conftest import AGENTD, Project, clean_env

REPO = Path(__file__).resolve().parent.parent
#: The environment with no agent key at all (what a fresh machine has).
BARE = {"HOME": "/nonexistent-home", "PATH": "/usr/bin:/bin"}


def _codex(tmp_path: Path, codex: str = "") -> tuple:
    binary = tmp_path / "bin" / "codex"
    binary.parent.mkdir(exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    text = f'[agent]\nkind = "codex"\ncommand = [{json.dumps(str(binary))}]\n[codex]\n{codex}'
    return parse_unit(tmp_path / "units" / "cx.toml", text), Settings(project_root=tmp_path)


def _claude(tmp_path: Path, env: str = "") -> tuple:
    text = f'[agent]\nkind = "claude"\ncommand = ["/opt/claude"]\n{env}'
    return parse_unit(tmp_path / "units" / "cc.toml", text), Settings(project_root=tmp_path)


def test_a_codex_home_without_a_login_or_a_key_is_named(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    spec, settings = _codex(tmp_path, f"home = {json.dumps(str(home))}\n")
    problem = login_problem(spec, settings, BARE)
    assert problem is not None and f"no auth.json in {home}" in problem and "codex login" in problem
    assert login_problem(spec, settings, {**BARE, "OPENAI_API_KEY": "sk-proj-real"}) is None
    assert login_problem(spec, settings, {**BARE, "OPENAI_API_KEY": "sk-..."}) is not None  # a placeholder is no key
    (home / "auth.json").write_text("{}")
    assert login_problem(spec, settings, BARE) is None


def test_a_private_codex_home_counts_the_login_it_imports(tmp_path: Path) -> None:
    spec, settings = _codex(tmp_path, 'home = "private"\n')
    mine = tmp_path / "mine"
    mine.mkdir()
    env = {**BARE, "CODEX_HOME": str(mine)}
    problem = login_problem(spec, settings, env)
    assert problem is not None and str(mine) in problem and str(settings.state_path / "codex" / "cx") in problem
    (mine / "auth.json").write_text("{}")  # the person's login: imported into the private home at launch
    assert login_problem(spec, settings, env) is None


def test_a_custom_codex_provider_needs_no_login_but_its_key_variable(tmp_path: Path) -> None:
    spec, settings = _codex(tmp_path, 'base_url = "http://127.0.0.1:9/v1"\nenv_key = "GATEWAY_KEY"\n')
    problem = login_problem(spec, settings, BARE)
    assert problem is not None and "GATEWAY_KEY" in problem and "Missing environment variable" in problem
    assert login_problem(spec, settings, {**BARE, "GATEWAY_KEY": "k"}) is None
    plain, settings = _codex(tmp_path, 'base_url = "http://127.0.0.1:9/v1"\n')
    assert login_problem(plain, settings, BARE) is None


def test_claude_without_a_key_or_with_the_examples_placeholder_is_named(tmp_path: Path) -> None:
    spec, settings = _claude(tmp_path)
    problem = login_problem(spec, settings, BARE)
    assert problem is not None and "no key" in problem and "ANTHROPIC_API_KEY" in problem
    assert login_problem(spec, settings, {**BARE, "ANTHROPIC_API_KEY": "sk-ant-api03-real"}) is None
    # a login made in agentd's private config dir counts
    private = settings.state_path / "claude" / "cc"
    private.mkdir(parents=True)
    (private / ".credentials.json").write_text("{}")
    assert login_problem(spec, settings, BARE) is None
    # a named config dir without a login does not
    folder = tmp_path / "cfg"
    folder.mkdir()
    named, settings = _claude(tmp_path / "b", f'env = {{ CLAUDE_CONFIG_DIR = {json.dumps(str(folder))} }}\n')
    problem = login_problem(named, settings, BARE)
    assert problem is not None and f".credentials.json in {folder}" in problem
    (folder / ".credentials.json").write_text("{}")
    assert login_problem(named, settings, BARE) is None


def test_the_example_units_key_is_seen_as_a_placeholder(tmp_path: Path) -> None:
    text = (REPO / "units" / "claude.example.toml").read_text()
    key = re.search(r'ANTHROPIC_API_KEY = "([^"]*)"', text).group(1)  # what a copy of the example carries
    assert placeholder(key)
    spec = parse_unit(tmp_path / "units" / "cc.toml", text)
    problem = login_problem(spec, Settings(project_root=tmp_path), {**BARE, "ANTHROPIC_API_KEY": "sk-ant-real"})
    assert problem is not None and "placeholder" in problem and "[agent] env" in problem  # the unit's wins
    assert not placeholder("sk-ant-api03-AbCdEf") and not placeholder("fake-key")


def test_check_and_doctor_warn_about_it(project: Project) -> None:
    home = project.root / "codex-home"
    home.mkdir()
    (project.root / "units" / "cc.toml").write_text((REPO / "units" / "claude.example.toml").read_text())
    claude = project.root / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"  # the example's
    claude.parent.mkdir(parents=True)
    binary = project.root / "codex"
    for program in (claude, binary):
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    project.unit("cx", f'[agent]\nkind = "codex"\ncommand = [{json.dumps(str(binary))}]\n'
                       f'[codex]\nhome = {json.dumps(str(home))}\n'
                       '[scope]\npaths = ["cx/**"]\n')  # (a whole-project agent could rewrite the other's CLI)
    env = {k: v for k, v in clean_env().items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY", "ANTHROPIC_API_KEY")}
    check = subprocess.run([*AGENTD, "--project", str(project.root), "check"], env=env, capture_output=True,
                           text=True, timeout=120, cwd=project.root, stdin=subprocess.DEVNULL)
    assert check.returncode == 0, check.stdout + check.stderr  # warnings, not errors
    lines = check.stdout.splitlines()
    assert any(ln.startswith("warn   cc: ANTHROPIC_API_KEY") and "placeholder" in ln for ln in lines), check.stdout
    assert any(ln.startswith("warn   cx: Codex has no login") and str(home) in ln for ln in lines), check.stdout
    doctor = subprocess.run([*AGENTD, "--project", str(project.root), "doctor", "--env"], env=env, capture_output=True,
                            text=True, timeout=120, cwd=project.root, stdin=subprocess.DEVNULL)
    assert re.search(r"^warn\s+login cc\s+ANTHROPIC_API_KEY in the unit's \[agent\] env is a placeholder", doctor.stdout,
                     re.M), doctor.stdout
    assert re.search(r"^warn\s+login cx\s+Codex has no login", doctor.stdout, re.M), doctor.stdout
    (home / "auth.json").write_text("{}")
    doctor = subprocess.run([*AGENTD, "--project", str(project.root), "doctor", "--env"], env=env, capture_output=True,
                            text=True, timeout=120, cwd=project.root, stdin=subprocess.DEVNULL)
    assert re.search(r"^ok\s+login cx\s", doctor.stdout, re.M), doctor.stdout
