"""The plan's git work with pygit2, on real repositories: scope snapshots, a task's own change, the branch.

What must hold: a task's commit holds exactly its unit's change since the
task began (not another unit's work in progress, not what a parked task left,
not a person's uncommitted edit); the person's HEAD, branch, index and working
tree are never written; a branch someone else moved is refused, never
overwritten; and nothing an agent can configure in ``.git`` (hooks, an
fsmonitor, a filter) runs.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from supervisor.plan.integrate import GitError, PlanRepo
from supervisor.plan.policy import trailers
from tests.conftest import git


def repo(tmp: Path) -> Path:
    root = tmp / "proj"
    git(tmp, "init", "-q", "-b", "main", str(root))
    for rel, text in {"a/x.py": "x = 1\n", "b/y.py": "y = 1\n", "README": "top\n", ".gitignore": "*.log\n.agentd/\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def files(r: PlanRepo, tree: str, dest: Path) -> dict[str, str]:
    r.materialize(tree, dest)
    return {p.relative_to(dest).as_posix(): p.read_text() for p in sorted(dest.rglob("*")) if p.is_file()}


def person_view(root: Path) -> tuple[str, str, str]:
    """HEAD, the branch and the working tree's status, as the person's git shows them."""
    return (git(root, "rev-parse", "HEAD"), git(root, "symbolic-ref", "HEAD"), git(root, "status", "--porcelain"))


def index_file(root: Path) -> tuple[int, int, str]:
    """The index as a file (inode, mtime, content): any write shows, and git itself is not run to look."""
    path = root / ".git" / "index"
    info = path.stat()
    return info.st_ino, info.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_tasks_commit_holds_its_own_change_and_nothing_else(tmp_path: Path) -> None:
    root = repo(tmp_path)
    r = PlanRepo(root, exclude=(".agent/", ".agentd/"))
    tip, note = r.start_branch("agentd/night")
    assert note.startswith("created agentd/night")
    base = r.snapshot(["a/**"])
    # the agent of a works; b's agent has work in progress; a person edits README; logs and memory appear
    (root / "a" / "x.py").write_text("x = 2\n")
    (root / "a" / "new.py").write_text("new = True\n")
    (root / "a" / "debug.log").write_text("ignored\n")
    (root / "b" / "y.py").write_text("y = 'half done'\n")
    (root / "README").write_text("the person's edit\n")
    (root / ".agent").mkdir()
    (root / ".agent" / "engram.md").write_text("a note\n")
    before = person_view(root)
    index = index_file(root)
    claimed = r.snapshot(["a/**"])
    cand = r.candidate(tip, ["a/**"], base, claimed)
    assert cand.changed == ("a/new.py", "a/x.py") and cand.conflicts == ()
    commit = r.commit("agentd/night", tip, cand.tree, f"plan night: t1\n\n{trailers('night', 't1', 1)}\n")
    assert files(r, r.tree_of_commit(commit), tmp_path / "c1") == {
        ".gitignore": "*.log\n.agentd/\n", "README": "top\n", "a/new.py": "new = True\n", "a/x.py": "x = 2\n",
        "b/y.py": "y = 1\n"}
    assert r.diffstat(commit) == {"files": 2, "insertions": 2, "deletions": 1, "paths": ["a/new.py", "a/x.py"]}
    assert r.find_commit("agentd/night", tip, "night", "t1", cand.tree) == commit
    assert r.find_commit("agentd/night", tip, "night", "t1", "0" * 40) is None  # another tree is not it
    assert r.find_commit("agentd/night", tip, "night", "t2", cand.tree) is None
    assert index_file(root) == index  # the index was never written
    assert person_view(root) == before  # HEAD, the branch and the working tree untouched
    assert git(root, "rev-parse", "main").strip() == tip


def test_what_a_parked_task_left_stays_out_of_the_next_tasks_commit(tmp_path: Path) -> None:
    root = repo(tmp_path)
    r = PlanRepo(root)
    tip, _ = r.start_branch("agentd/night")
    (root / "a" / "x.py").write_text("x = 'parked half'\n")  # a parked task's leftovers, never committed
    base = r.snapshot(["a/**"])
    (root / "a" / "z.py").write_text("z = 1\n")
    cand = r.candidate(tip, ["a/**"], base, r.snapshot(["a/**"]))
    assert cand.changed == ("a/z.py",)
    got = files(r, cand.tree, tmp_path / "c")
    assert got["a/x.py"] == "x = 1\n" and got["a/z.py"] == "z = 1\n"
    # the task changing the same lines as the leftovers conflicts with the branch: named, not guessed
    (root / "a" / "x.py").write_text("x = 'the task'\n")
    conflict = r.candidate(tip, ["a/**"], base, r.snapshot(["a/**"]))
    assert conflict.tree is None and conflict.conflicts == ("a/x.py",)


def test_a_deleted_file_leaves_the_tree(tmp_path: Path) -> None:
    root = repo(tmp_path)
    r = PlanRepo(root)
    tip, _ = r.start_branch("agentd/night")
    base = r.snapshot(["a/**"])
    (root / "a" / "x.py").unlink()
    cand = r.candidate(tip, ["a/**"], base, r.snapshot(["a/**"]))
    assert "a/x.py" not in files(r, cand.tree, tmp_path / "c")


def test_the_branch_is_created_fast_forwarded_continued_or_refused(tmp_path: Path) -> None:
    root = repo(tmp_path)
    r = PlanRepo(root)
    head = r.head()
    assert r.start_branch("agentd/n") == (head, f"created agentd/n at {head[:12]}")
    # the person commits on: the plan's branch, behind HEAD, is moved forward (nothing of it is lost)
    (root / "README").write_text("v2\n")
    git(root, "commit", "-qam", "v2")
    assert r.start_branch("agentd/n")[1].startswith("fast-forwarded agentd/n to HEAD")
    # the branch has commits of its own ahead of HEAD: the run continues from them
    tree = r.tree_of_commit(r.head())
    ahead = r.commit("agentd/n", r.head(), tree, "plan n: t\n")
    assert r.start_branch("agentd/n") == (ahead, f"agentd/n continues from {ahead[:12]} (ahead of HEAD)")
    # both moved: refused, with what to do
    (root / "README").write_text("v3\n")
    git(root, "commit", "-qam", "v3")
    with pytest.raises(GitError, match="have diverged: merge or delete the branch"):
        r.start_branch("agentd/n")
    with pytest.raises(GitError, match="is the branch checked out here: agentd never moves the branch you work on"):
        r.start_branch("main")


def test_a_branch_moved_by_someone_else_is_refused_not_overwritten(tmp_path: Path) -> None:
    root = repo(tmp_path)
    r = PlanRepo(root)
    tip, _ = r.start_branch("agentd/night")
    tree = r.tree_of_commit(tip)
    forged = r.commit("agentd/night", tip, tree, "forged by an agent\n\nAgentd-Plan: night\nAgentd-Task: t1\n")
    with pytest.raises(GitError, match="someone else moved it; agentd does not overwrite it"):
        r.commit("agentd/night", tip, tree, "plan night: t1\n")
    assert r.tip("agentd/night") == forged
    # and a forged commit with the task's trailers is not taken for agentd's: its tree is not the checked one
    assert r.find_commit("agentd/night", tip, "night", "t1", "1" * 40) is None


def test_nothing_an_agent_configured_in_git_runs(tmp_path: Path) -> None:
    root = repo(tmp_path)
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\necho $0 >> {marker}\n"
    for name in ("post-index-change", "reference-transaction", "pre-commit", "post-commit", "post-checkout"):
        path = root / ".git" / "hooks" / name
        path.write_text(hook)
        path.chmod(0o755)
    git(root, "config", "core.fsmonitor", f"echo fsmonitor >> {marker}; false")
    git(root, "config", "filter.evil.clean", f"sh -c 'echo clean >> {marker}; cat'")
    git(root, "config", "filter.evil.smudge", f"sh -c 'echo smudge >> {marker}; cat'")
    (root / ".gitattributes").write_text("*.py filter=evil\n")
    r = PlanRepo(root)
    tip, _ = r.start_branch("agentd/night")
    base = r.snapshot(["a/**"])
    (root / "a" / "x.py").write_text("x = 3\n")
    cand = r.candidate(tip, ["a/**"], base, r.snapshot(["a/**"]))
    commit = r.commit("agentd/night", tip, cand.tree, "plan night: t1\n")
    r.keep("refs/agentd/plans/night/parked/t2", cand.tree, commit, "kept\n")
    assert files(r, cand.tree, tmp_path / "c")["a/x.py"] == "x = 3\n"
    assert not marker.exists(), marker.read_text()


def test_materialize_writes_blobs_as_they_are(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("README", root / "link")
    (root / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (root / "lf.txt").write_bytes(b"one\ntwo\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "more")
    r = PlanRepo(root)
    dest = tmp_path / "out"
    r.materialize(r.tree_of_commit(r.head()), dest)
    assert os.access(dest / "run.sh", os.X_OK) and not os.access(dest / "README", os.X_OK)
    assert os.readlink(dest / "link") == "README"
    assert (dest / "lf.txt").read_bytes() == b"one\ntwo\n"  # the blob, not a converted checkout


def test_not_a_repository_or_no_commit_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="not a git repository.*run `git init` and commit the project first"):
        PlanRepo(tmp_path)
    git(tmp_path, "init", "-q", str(tmp_path / "empty"))
    with pytest.raises(GitError, match="no commit yet"):
        PlanRepo(tmp_path / "empty").head()


def test_a_fifo_in_the_scope_is_an_error_for_the_plan_never_a_frozen_daemon(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan's snapshot reads the scope (its .gitignore files, its files): a FIFO planted there blocked libgit2,
    which holds the GIL, in the daemon's own process.  The plan's git work runs in the daemon's git helper
    (isolated here as the daemon does): the request fails naming why, and this process keeps running."""
    import os
    import threading
    import time

    from supervisor.memory import gitworker
    from supervisor.plan import integrate

    root = repo(tmp_path)
    monkeypatch.setattr(gitworker, "GIT_TIMEOUT", 2.0)
    monkeypatch.setattr(gitworker, "_WORKER", None)  # this test process plays the daemon, then stops playing it
    helper = gitworker.isolate()
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:  # this process keeps running while a request hangs in the helper
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.05)

    threading.Thread(target=tick, daemon=True).start()
    try:
        tip, _ = integrate.run(root, (".agent/",), "start_branch", "agentd/night")
        base = integrate.run(root, (".agent/",), "snapshot", ("a/**",))
        os.mkfifo(root / "a" / ".gitignore")
        (root / "a" / "x.py").write_text("x = 2\n")
        started = time.monotonic()
        with pytest.raises(GitError, match="gave no answer within 2s .*FIFO"):
            integrate.run(root, (".agent/",), "snapshot", ("a/**",))
        assert len([t for t in ticks if t > started + 0.5]) > 10, "this process stopped while the helper hung"
        (root / "a" / ".gitignore").unlink()
        os.mkfifo(root / "a" / "pipe.py")  # a FIFO as a file of the scope: never read, the snapshot works
        claimed = integrate.run(root, (".agent/",), "snapshot", ("a/**",))
        cand = integrate.run(root, (".agent/",), "candidate", tip, ("a/**",), base, claimed)
        assert cand.changed == ("a/x.py",) and helper.started == 2
    finally:
        done.set()
        helper.close()
