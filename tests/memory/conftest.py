"""Fixtures: real temporary projects, with and without git."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from supervisor.memory import init_store
from tests.conftest import git

T0 = datetime(2026, 11, 30, 14, 32)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a committed src/ tree and an initialised .agent/ store."""
    root = tmp_path / "proj"
    (root / "src" / "core").mkdir(parents=True)
    (root / "src" / "core" / "a.py").write_text("one = 1\ntwo = 2\nthree = 3\n")
    (root / "src" / "core" / "b.py").write_text("b = 'b'\n")
    (root / "src" / "ui.ts").write_text("export const ui = 1;\n")
    git(root.parent, "init", "-q", str(root))
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", "src")
    git(root, "commit", "-q", "-m", "init")
    init_store(root)
    return root


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """A project outside git with an initialised store."""
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src" / "m.py").write_text("m = 1\n")
    init_store(root)
    return root
