"""Fixtures: real temporary projects, with and without git."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from supervisor.memory import AgentPaths, decisions, init_store
from supervisor.memory.tail import all_lines
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


def _clone(bare: Path, dest: Path) -> Path:
    git(bare.parent, "clone", "-q", "-b", "main", str(bare), str(dest))
    git(dest, "config", "user.email", "t@example.com")
    git(dest, "config", "user.name", "t")
    return dest


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote and two clones of a project whose .agent/ was initialised and committed."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    seed = tmp_path / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "src" / "m.py").write_text("m = 1\n")
    git(tmp_path, "init", "-q", "-b", "main", str(seed))
    git(seed, "config", "user.email", "t@example.com")
    git(seed, "config", "user.name", "t")
    init_store(seed)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "init")
    git(seed, "push", "-q", str(bare), "main")
    return bare, _clone(bare, tmp_path / "a"), _clone(bare, tmp_path / "b")


def family_lines(root: Path, module: str | None = None) -> list[str]:
    """Every non-blank raw line of a decision log family (epochs and live log), duplicates included."""
    paths = AgentPaths(root)
    return [raw.text for f in decisions.files_of(paths, module) for raw in all_lines(f)]


def no_conflict_markers(root: Path) -> None:
    for path in (root / ".agent").rglob("*"):
        if path.is_file() and "local" not in path.parts:
            text = path.read_text(errors="replace")
            assert "<<<<<<<" not in text and ">>>>>>>" not in text, path
