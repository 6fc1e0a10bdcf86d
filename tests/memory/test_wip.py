"""WIP commits with real git: every kind of change is saved, and nothing of the checkout moves."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.memory.wip import REF_ROOT, WipError, changed_paths, save_wip, thin
from supervisor.memory.wipview import find_wip, list_wips, restore_wip
from tests.memory.conftest import git

SCOPE = ["src/core/**"]


def checkout_state(root: Path) -> tuple[str, str, str]:
    """What a save must leave exactly as it was: status (v2, with untracked), HEAD, the index file's bytes."""
    status = git(root, "status", "--porcelain=v2", "--untracked-files=all")
    head = git(root, "rev-parse", "HEAD").strip()
    index = hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest()
    return status, head, index


def mixed_changes(root: Path) -> None:
    """Modified, deleted, renamed (staged), binary, untracked, staged-new, and one change out of scope."""
    core = root / "src" / "core"
    (core / "a.py").write_text("one = 1\ntwo = 22\nthree = 3\n")
    (core / "data.bin").write_bytes(bytes(range(256)) * 4)
    git(root, "add", "src/core/data.bin")
    git(root, "commit", "-q", "-m", "binary")
    (core / "data.bin").write_bytes(b"\x00\xff" * 300)  # binary, modified
    (core / "gone.py").write_text("x = 1\n")
    git(root, "add", "src/core/gone.py")
    git(root, "commit", "-q", "-m", "gone")
    git(root, "mv", "src/core/b.py", "src/core/b_renamed.py")  # renamed (staged)
    (core / "gone.py").unlink()  # deleted, not staged
    (core / "new.py").write_text("new = True\n")  # untracked
    (core / "staged.py").write_text("staged = 1\n")
    git(root, "add", "src/core/staged.py")  # new, staged
    (root / "src" / "ui.ts").write_text("changed outside the scope\n")
    (root / ".gitignore").write_text("*.log\n")
    (core / "debug.log").write_text("ignored\n")


def tree_files(root: Path, commit: str) -> dict[str, str]:
    out = git(root, "ls-tree", "-r", commit)
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines()}


def test_save_keeps_every_kind_of_change_and_touches_nothing(repo: Path) -> None:
    mixed_changes(repo)
    before = checkout_state(repo)
    files_before = {p: p.read_bytes() for p in (repo / "src").rglob("*") if p.is_file()}
    wip = save_wip(repo, "core", SCOPE, moment="crash", session="s-1")
    assert wip is not None
    assert checkout_state(repo) == before  # work tree, HEAD and index exactly as they were
    assert {p: p.read_bytes() for p in (repo / "src").rglob("*") if p.is_file()} == files_before
    assert git(repo, "rev-parse", wip.ref).strip() == wip.commit and wip.ref == f"{REF_ROOT}/core/1"
    assert git(repo, "rev-parse", f"{wip.commit}^").strip() == before[1]  # its parent is HEAD
    saved = tree_files(repo, wip.commit)
    assert "src/core/gone.py" not in saved and "src/core/b.py" not in saved
    assert {"src/core/new.py", "src/core/staged.py", "src/core/b_renamed.py", "src/core/data.bin"} <= set(saved)
    assert "src/core/debug.log" not in saved  # ignored files stay out
    assert git(repo, "show", f"{wip.commit}:src/core/a.py") == "one = 1\ntwo = 22\nthree = 3\n"
    assert subprocess.run(["git", "show", f"{wip.commit}:src/core/data.bin"], cwd=repo, capture_output=True,
                          check=True).stdout == b"\x00\xff" * 300
    assert git(repo, "show", f"{wip.commit}:src/ui.ts") == "export const ui = 1;\n"  # out of scope: HEAD's
    changes = {c.describe() for c in wip.changes}
    assert changes == {"M src/core/a.py", "M src/core/data.bin", "R src/core/b.py -> src/core/b_renamed.py",
                       "D src/core/gone.py", "A src/core/new.py", "A src/core/staged.py"}
    assert "6 files changed" in wip.stat
    # the commit names the unit, session and moment; `list` reads it back
    [listed] = list_wips(repo)
    assert (listed.unit, listed.number, listed.commit, listed.moment, listed.session) == ("core", 1, wip.commit, "crash", "s-1")
    assert {c.describe() for c in listed.changes} == changes and listed.base == before[1]


def test_nothing_to_save_and_the_same_work_twice(repo: Path) -> None:
    assert changed_paths(repo, SCOPE) == [] and save_wip(repo, "core", SCOPE, moment="stop") is None
    (repo / "src" / "ui.ts").write_text("outside\n")
    assert save_wip(repo, "core", SCOPE, moment="stop") is None  # only out-of-scope changes
    (repo / "src" / "core" / "a.py").write_text("changed\n")
    first = save_wip(repo, "core", SCOPE, moment="crash")
    again = save_wip(repo, "core", SCOPE, moment="crash")  # a crash loop saves the same work once
    assert first is not None and again is not None and again.commit == first.commit
    assert len(list_wips(repo, "core")) == 1
    (repo / "src" / "core" / "a.py").write_text("changed again\n")
    assert save_wip(repo, "core", SCOPE, moment="crash").number == 2


def test_old_refs_are_thinned_to_the_newest(repo: Path) -> None:
    for i in range(5):
        (repo / "src" / "core" / "a.py").write_text(f"v{i}\n")
        save_wip(repo, "core", SCOPE, moment="checkpoint", keep=3)
    assert [w.number for w in list_wips(repo, "core")] == [3, 4, 5]
    assert thin(repo, "core", 1) == [3, 4] and [w.number for w in list_wips(repo, "core")] == [5]


def test_restore_refuses_local_changes_unless_forced(repo: Path) -> None:
    mixed_changes(repo)
    wip = save_wip(repo, "core", SCOPE, moment="stop")
    assert wip is not None
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-qfd", "src")
    assert not (repo / "src" / "core" / "new.py").exists()
    (repo / "src" / "core" / "a.py").write_text("a local edit\n")
    with pytest.raises(WipError, match=r"local changes would be overwritten: src/core/a.py.*--force"):
        restore_wip(repo, find_wip(repo, "core"))
    assert (repo / "src" / "core" / "a.py").read_text() == "a local edit\n"  # nothing written
    head, index = git(repo, "rev-parse", "HEAD"), (repo / ".git" / "index").read_bytes()
    applied = restore_wip(repo, find_wip(repo, "core", 1), force=True)
    assert {c.path for c in applied} >= {"src/core/a.py", "src/core/new.py", "src/core/b_renamed.py"}
    assert (repo / "src" / "core" / "a.py").read_text() == "one = 1\ntwo = 22\nthree = 3\n"
    assert (repo / "src" / "core" / "new.py").read_text() == "new = True\n"
    assert (repo / "src" / "core" / "data.bin").read_bytes() == b"\x00\xff" * 300
    assert not (repo / "src" / "core" / "b.py").exists() and not (repo / "src" / "core" / "gone.py").exists()
    assert git(repo, "rev-parse", "HEAD") == head and (repo / ".git" / "index").read_bytes() == index


def test_a_repository_without_a_commit_and_a_project_outside_git(repo: Path, plain: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    (fresh / "src").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(fresh))
    (fresh / "src" / "m.py").write_text("m = 1\n")
    wip = save_wip(fresh, "u", ["src/**"], moment="crash")
    assert wip is not None and wip.base is None and git(fresh, "show", f"{wip.commit}:src/m.py") == "m = 1\n"
    assert not (fresh / ".git" / "index").exists()  # the real index was never written
    with pytest.raises(WipError, match="not in a git work tree"):
        save_wip(plain, "u", ["src/**"], moment="crash")
    with pytest.raises(WipError, match="not valid"):
        save_wip(repo, "../x", SCOPE, moment="crash")
    with pytest.raises(WipError, match="has no WIP"):
        find_wip(repo, "core")


def agentd(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    return subprocess.run([sys.executable, "-m", "supervisor", "--project", str(root), *args], cwd=root,
                          capture_output=True, text=True, env=env, timeout=60)


def test_the_wip_commands(repo: Path) -> None:
    (repo / "src" / "core" / "a.py").write_text("saved\n")
    wip = save_wip(repo, "core", SCOPE, moment="restart", session="s-9", record=repo / ".agentd" / "wip")
    assert wip is not None
    listed = agentd(repo, "wip", "list")
    assert listed.returncode == 0 and wip.commit[:12] in listed.stdout and "restart" in listed.stdout
    assert json.loads(agentd(repo, "wip", "list", "core", "--json").stdout)["commit"] == wip.commit
    shown = agentd(repo, "wip", "show", "core")
    assert "+saved" in shown.stdout and "Agentd-Session: s-9" in shown.stdout
    (repo / "src" / "core" / "a.py").write_text("mine\n")
    refused = agentd(repo, "wip", "restore", "core")
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert (repo / "src" / "core" / "a.py").read_text() == "mine\n"
    forced = agentd(repo, "wip", "restore", "core", "1", "--force")
    assert forced.returncode == 0 and "M src/core/a.py" in forced.stdout
    assert (repo / "src" / "core" / "a.py").read_text() == "saved\n"
    missing = agentd(repo, "wip", "show", "core", "7")
    assert missing.returncode == 1 and "has no WIP 7; it has 1" in missing.stderr


def blobs_of(root: Path, commit: str) -> dict[str, tuple[int, bytes]]:
    """Every file of the commit's tree: path -> (mode, bytes), read with libgit2."""
    import pygit2

    from supervisor.memory.gitrepo import leaves

    tree = pygit2.Repository(str(root))[commit].peel(pygit2.Tree)
    return {path: (entry.filemode, entry.data) for path, entry in leaves(tree)}


def test_a_held_index_lock_a_broken_index_and_a_large_file_do_not_stop_a_save(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"someone else's")  # a git of the person, or an agent, is writing the index
    big = os.urandom(9 * 1024 * 1024)  # more than STREAM_OVER: streamed into the object database
    (repo / "src" / "core" / "big.bin").write_bytes(big)
    (repo / "src" / "core" / "a.py").write_text("locked\n")
    first = save_wip(repo, "core", SCOPE, moment="crash")
    assert first is not None and lock.read_bytes() == b"someone else's"
    saved = blobs_of(repo, first.commit)
    assert saved["src/core/big.bin"][1] == big and saved["src/core/a.py"][1] == b"locked\n"
    lock.unlink()
    (repo / ".git" / "index").write_bytes(b"not an index at all")  # an agent can break it: keeping must still work
    (repo / "src" / "core" / "a.py").write_text("broken index\n")
    second = save_wip(repo, "core", SCOPE, moment="crash")
    assert second is not None and second.number == 2
    assert blobs_of(repo, second.commit)["src/core/a.py"][1] == b"broken index\n"
    from supervisor.memory.gitfiles import list_files

    assert list_files(repo, SCOPE) == ["src/core/a.py", "src/core/b.py", "src/core/big.bin"]
    assert changed_paths(repo, SCOPE) == ["src/core/a.py", "src/core/big.bin"]
    assert (repo / ".git" / "index").read_bytes() == b"not an index at all"  # left as it was


def test_symlinks_are_saved_as_links_and_never_followed(repo: Path, tmp_path: Path) -> None:
    from supervisor.memory.worktree import read_worktree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"the daemon can read this, the agent cannot\n")
    (repo / "src" / "core" / "to-dir").symlink_to(outside)
    (repo / "src" / "core" / "to-file").symlink_to(outside / "secret")
    wip = save_wip(repo, "core", SCOPE, moment="stop")
    assert wip is not None
    saved = blobs_of(repo, wip.commit)
    assert saved["src/core/to-dir"] == (0o120000, str(outside).encode())
    assert saved["src/core/to-file"] == (0o120000, str(outside / "secret").encode())
    assert not any(b"the daemon can read" in data for _mode, data in saved.values())
    assert read_worktree(repo, "src/core/to-dir/secret") is None  # a symlinked directory on the way: nothing read
    assert read_worktree(repo, "src/core/a.py") == (b"one = 1\ntwo = 2\nthree = 3\n", 0o100644)


def test_a_linked_worktree_saves_on_the_shared_refs(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    (linked / "src" / "core" / "a.py").write_text("in the linked worktree\n")
    wip = save_wip(linked, "core", SCOPE, moment="stop")
    assert wip is not None and [w.commit for w in list_wips(repo, "core")] == [wip.commit]
    assert blobs_of(repo, wip.commit)["src/core/a.py"][1] == b"in the linked worktree\n"
    assert (repo / "src" / "core" / "a.py").read_text() == "one = 1\ntwo = 2\nthree = 3\n"


def test_a_project_below_the_top_of_its_repository(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    (top / "proj" / "src").mkdir(parents=True)
    (top / "other").mkdir()
    (top / "proj" / "src" / "m.py").write_text("m = 1\n")
    (top / "other" / "o.py").write_text("o = 1\n")
    git(tmp_path, "init", "-q", str(top))
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "init")
    (top / "proj" / "src" / "m.py").write_text("m = 2\n")
    (top / "other" / "o.py").write_text("o = 2\n")  # outside the project: never saved
    root = top / "proj"
    assert changed_paths(root, ["src/**"]) == ["src/m.py"] and changed_paths(root, []) == ["src/m.py"]
    wip = save_wip(root, "u", [], moment="stop")
    assert wip is not None and [c.describe() for c in wip.changes] == ["M src/m.py"]
    saved = blobs_of(top, wip.commit)
    assert saved["proj/src/m.py"][1] == b"m = 2\n" and saved["other/o.py"][1] == b"o = 1\n"


def test_the_temporary_indexes_older_versions_left_are_removed(repo: Path) -> None:
    from supervisor.memory.wip import clean_leftovers

    left = [repo / ".git" / "agentd-wip-x1y2z3.index", repo / ".git" / "agentd-wip-aaaaaa.index"]
    for path in left:
        path.write_bytes(b"DIRC")
    keep = repo / ".git" / "agentd-wip-notes.txt"
    keep.write_text("not a leftover\n")
    assert sorted(clean_leftovers(repo)) == sorted(left)
    assert not any(p.exists() for p in left) and keep.exists()
    assert clean_leftovers(repo) == []


def _forge(repo: Path, unit: str, number: int, text: str) -> str:
    """What an agent that can write .git does: a commit of its own, on a WIP ref of its choosing."""
    (repo / "src" / "core" / "a.py").write_text(text)
    blob = git(repo, "hash-object", "-w", "src/core/a.py").strip()
    tree = subprocess.run(["git", "mktree"], cwd=repo, input=f"100644 blob {blob}\ta.py\n", capture_output=True,
                          text=True, check=True).stdout.strip()
    commit = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", f"agentd wip: {unit} before checkpoint\n\n"
                 f"  M src/core/a.py\n\nAgentd-Unit: {unit}\nAgentd-Moment: checkpoint\n").strip()
    git(repo, "update-ref", f"{REF_ROOT}/{unit}/{number}", commit)
    return commit


def test_forged_wip_refs_are_foreign_and_thinning_keeps_the_recorded_ones(repo: Path, tmp_path: Path) -> None:
    """The refs are in .git, which agents write: agentd lists, restores and thins by its own record."""
    record = tmp_path / "state" / "wip"
    saved = []
    for n in range(3):
        (repo / "src" / "core" / "a.py").write_text(f"real {n}\n")
        wip = save_wip(repo, "core", SCOPE, moment="stop", record=record, keep=3)
        assert wip is not None
        saved.append(wip)
    forged = _forge(repo, "core", 999, "rm -rf / # forged\n")  # a higher number, to push the real ones out
    git(repo, "update-ref", "-d", f"{REF_ROOT}/core/1")  # a real one deleted
    git(repo, "update-ref", f"{REF_ROOT}/core/2", forged)  # a real one moved to the forgery
    listed = list_wips(repo, "core", record)
    own = [w for w in listed if not w.foreign]
    assert [(w.number, w.commit) for w in own] == [(w.number, w.commit) for w in saved]  # by the record
    assert "deleted" in own[0].note and "moved" in own[1].note and not own[2].note
    foreign = [w for w in listed if w.foreign]
    assert sorted((w.number, w.commit) for w in foreign) == [(2, forged), (999, forged)]
    assert find_wip(repo, "core", None, record).commit == saved[-1].commit  # the newest of agentd's, not 999
    with pytest.raises(WipError, match="not a WIP agentd made"):
        restore_wip(repo, find_wip(repo, "core", 999, record), force=True)
    (repo / "src" / "core" / "a.py").write_text("real 0\n")
    restore_wip(repo, find_wip(repo, "core", 1, record), force=True)  # its ref is gone; its commit is agentd's
    assert (repo / "src" / "core" / "a.py").read_text() == "real 0\n"
    # the next save: the planted 999 does not push the real ones out; agentd's three newest stay
    (repo / "src" / "core" / "a.py").write_text("real 3\n")
    newest = save_wip(repo, "core", SCOPE, moment="stop", record=record, keep=3)
    assert newest is not None and newest.number == 1000  # past every number in use
    own = [w for w in list_wips(repo, "core", record) if not w.foreign]
    assert [w.commit for w in own] == [saved[1].commit, saved[2].commit, newest.commit]
    assert git(repo, "rev-parse", f"{REF_ROOT}/core/999").strip() == forged  # not agentd's to delete
    assert git(repo, "rev-parse", f"{REF_ROOT}/core/2").strip() == forged  # moved: left where the agent put it
    assert subprocess.run(["git", "show-ref", f"{REF_ROOT}/core/1"], cwd=repo, capture_output=True).stdout == b""


def test_the_same_work_again_puts_a_deleted_ref_back(repo: Path, tmp_path: Path) -> None:
    record = tmp_path / "state" / "wip"
    (repo / "src" / "core" / "a.py").write_text("kept\n")
    first = save_wip(repo, "core", SCOPE, moment="crash", record=record)
    assert first is not None
    git(repo, "update-ref", "-d", first.ref)
    again = save_wip(repo, "core", SCOPE, moment="crash", record=record)
    assert again is not None and again.commit == first.commit and again.number == first.number
    assert git(repo, "rev-parse", first.ref).strip() == first.commit
