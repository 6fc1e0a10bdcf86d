"""The suite's own rules: under CI (``CI=true``, any case) a skip is a failure with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, clean_env

CONFTEST = ("from tests.conftest import (pytest_collectreport, pytest_runtest_makereport,  # noqa: F401\n"
            "                            pytest_sessionfinish, pytest_terminal_summary)\n")
TESTS = '''
import pytest

def test_runs():
    pass

def test_needs_a_frobnicator():
    pytest.skip("no frobnicator on this machine")

@pytest.mark.skipif(True, reason="not on Tuesdays")
def test_marked():
    pass

@pytest.mark.xfail(strict=True, reason="known bug")
def test_known_bug():
    assert False
'''
SKIPPED_MODULE = 'import pytest\npytest.skip("whole module: no gizmo", allow_module_level=True)\n'


def run_pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sample.py").write_text(TESTS)
    (tmp_path / "test_gizmo.py").write_text(SKIPPED_MODULE)
    env = clean_env(PYTHONPATH=str(REPO))
    env.pop("CI", None)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_under_ci_every_skip_fails_with_its_reason(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "True")  # compared case-insensitively
    out = result.stdout
    assert result.returncode == 1, out
    assert "skipped under CI=true, where every test must run: no frobnicator on this machine" in out
    assert "skipped under CI=true, where every test must run: not on Tuesdays" in out
    assert "FAILED skipped under CI=true, where every test must run: test_gizmo.py: whole module: no gizmo" in out
    last = out.splitlines()[-1]  # the module never ran: it shows as skipped, and the run fails
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in last


def test_outside_ci_a_skip_is_a_skip(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in result.stdout.splitlines()[-1]
    assert run_pytest(tmp_path, "false").returncode == 0
