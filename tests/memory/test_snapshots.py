"""Snapshots: git blob hashes, changed files, outside git, retention, ids."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from supervisor.memory import AgentPaths, StoreError, record_decision, snapshots, update_task_state
from supervisor.memory.gitfiles import blob_hash
from tests.conftest import git

from .conftest import T0

WHY = "because it must be decided, so we decide"


def test_snapshot_records_blobs_that_git_can_return(repo: Path):
    paths = AgentPaths(repo)
    update_task_state(paths, "halfway through the parser", task="Write the parser")
    (repo / "src" / "core" / "a.py").write_text("one = 100\n")  # modified, not committed
    (repo / "src" / "core" / "new.py").write_text("fresh = True\n")  # untracked
    rec = record_decision(repo, "parse with a PEG", WHY, module="core", scope_paths=["src/core"], now=T0)
    data = snapshots.load_id(paths, rec.snapshot)
    assert set(data["files"]) == {"src/core/a.py", "src/core/b.py", "src/core/new.py"}
    assert data["task_head"] == "Write the parser"
    assert data["state_at_interruption"] == "halfway through the parser"
    assert data["vcs"] == "git"
    for rel, blob in data["files"].items():
        assert git(repo, "cat-file", "-p", blob) == (repo / rel).read_text()
    assert snapshots.file_content(paths, rec.snapshot, "src/core/new.py") == b"fresh = True\n"
    (repo / "src" / "core" / "b.py").write_text("b = 'changed'\n")
    (repo / "src" / "core" / "new.py").unlink()
    rec2 = record_decision(repo, "second", WHY, module="core", scope_paths=["src/core"], now=T0)
    data2 = snapshots.load_id(paths, rec2.snapshot)
    assert data2["previous"] == rec.snapshot
    assert data2["changed"] == {"added": [], "modified": ["src/core/b.py"], "removed": ["src/core/new.py"]}
    # the old content is still retrievable from the earlier snapshot
    assert snapshots.file_content(paths, rec.snapshot, "src/core/b.py") == b"b = 'b'\n"


def test_glob_scope(repo: Path):
    rec = record_decision(repo, "ts only", WHY, module="ui", scope_paths=["src/*.ts"], now=T0)
    assert set(snapshots.load_id(AgentPaths(repo), rec.snapshot)["files"]) == {"src/ui.ts"}


def test_outside_git_has_a_clear_note(plain: Path):
    paths = AgentPaths(plain)
    rec = record_decision(plain, "x", WHY, scope_paths=["src"], now=T0)
    data = snapshots.load_id(paths, rec.snapshot)
    assert data["vcs"] == "none" and "not a git repository" in data["note"]
    assert data["files"] == {"src/m.py": blob_hash(b"m = 1\n")}
    assert blob_hash(b"m = 1\n") == subprocess.run(
        ["git", "hash-object", "--stdin"], input=b"m = 1\n", capture_output=True, check=True
    ).stdout.decode().strip()
    with pytest.raises(StoreError, match="outside git"):
        snapshots.file_content(paths, rec.snapshot, "src/m.py")


def test_retention_thins_all_but_newest_20(plain: Path):
    paths = AgentPaths(plain)
    recorded = [record_decision(plain, f"d{i}", WHY, module="core", scope_paths=["src"], now=T0).snapshot
                for i in range(26)]
    assert snapshots.list_ids(paths) == recorded  # ids increase within one store, even in the same millisecond
    complete = [s for s in recorded if snapshots.load(paths, s)["complete"]]
    assert complete == recorded[6:]
    thin = snapshots.load(paths, recorded[2])
    assert thin["decision"] == "d2" and thin["files"] and "task_head" not in thin and "changed" not in thin
    state = json.loads(paths.state.read_text())
    assert state["last_snapshot"] == recorded[-1]
    assert paths.state.parent == paths.local  # per-clone, git-ignored


def test_whole_project_scope_excludes_the_store(repo: Path):
    git(repo, "add", ".agent")
    git(repo, "commit", "-q", "-m", "store")
    rec = record_decision(repo, "global", WHY, now=T0)
    files = snapshots.load_id(AgentPaths(repo), rec.snapshot)["files"]
    assert set(files) == {"src/core/a.py", "src/core/b.py", "src/ui.ts"}
