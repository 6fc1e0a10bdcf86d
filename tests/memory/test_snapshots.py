"""Snapshots: git blob hashes, changed files, outside git, retention, ids."""

from __future__ import annotations

import json
import os
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


DECIDE_IN_SANDBOX = """
import sys
from pathlib import Path
from supervisor.memory import record_decision
print(record_decision(Path(sys.argv[1]), "decided where .git is read-only", sys.argv[2], module="core",
                      scope_paths=["src/core"]).snapshot)
"""


def test_a_decide_where_git_is_read_only_keeps_the_decision_and_the_hashes(repo: Path, tmp_path: Path):
    """Codex's own sandbox keeps .git read-only: the object database cannot be written, the decision still is."""
    import sys

    from supervisor.session.fence import Fence, FenceSpec

    (repo / "src" / "core" / "a.py").write_text("changed where git is read-only\n")
    (repo / "src" / "core" / "new.py").write_text("new\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fence = Fence.build(FenceSpec.of(dirs=[repo / ".agent", tmp]))
    try:
        out = subprocess.run([sys.executable, "-c", DECIDE_IN_SANDBOX, str(repo), WHY], cwd=repo, capture_output=True,
                             text=True, timeout=60, preexec_fn=fence, pass_fds=fence.fds, env={**os.environ, "TMPDIR": str(tmp)})
    finally:
        fence.close()
    assert out.returncode == 0, out.stderr
    data = snapshots.load_id(AgentPaths(repo), out.stdout.strip())
    assert data["files"]["src/core/a.py"] == blob_hash(b"changed where git is read-only\n")
    assert data["files"]["src/core/new.py"] == blob_hash(b"new\n")
    assert data["files"]["src/core/b.py"] == git(repo, "rev-parse", "HEAD:src/core/b.py").strip()  # the index's
    assert "was not stored" in data["note"] and "src/core/a.py" in data["note"]
    with pytest.raises(StoreError, match="not in the repository"):
        snapshots.file_content(AgentPaths(repo), data["id"], "src/core/new.py")
    assert snapshots.file_content(AgentPaths(repo), data["id"], "src/core/b.py") == b"b = 'b'\n"
