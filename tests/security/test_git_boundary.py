"""Issue 25 §1: nothing an agent writes into ``.git/`` runs when agentd does its own git work.

An agent inside agentd's fence can write all of ``.git/``; agentd works on the
repository unfenced.  Each test plants every config-defined command and hook
family (:mod:`tests.security.git_plants`), each leaving a marker file when
run, then drives agentd's git work, then asserts that no marker appeared, that
the work still got done (the WIP save, the snapshot's blobs, the revert, the
sync), and finally that the real git CLI does leave every marker in the same
repository: the plants were live all along.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil
import pygit2
import pytest

from supervisor.memory import AgentPaths, init_store, record_decision, snapshots
from supervisor.memory.gitfiles import cat_blob, list_files, scope_hashes
from supervisor.memory.sync import sync_memory
from supervisor.memory.gitrepo import leaves, open_repo
from supervisor.memory.wip import clean_leftovers, save_wip
from supervisor.memory.wipview import list_wips
from supervisor.memory.wipview import restore_wip, show_wip
from supervisor.scope.revert import revert
from tests.conftest import Project, git, wait_until
from tests.security import git_plants

WHY = "because the plants must stay dead, so agentd reads git through libgit2"
PLANT = Path(git_plants.__file__).resolve()


def make_repo(base: Path, root: Path) -> tuple[Path, Path]:
    """A project with src/ committed, the memory store committed, and two bare remotes: (origin, other)."""
    origin, other = base / "origin.git", base / "other.git"
    for bare in (origin, other):
        git(base, "init", "-q", "--bare", str(bare))
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "a.py").write_text("a = 1\r\nb = 2\r\n")  # CRLF: stored as it is
    (root / "src" / "notes.txt").write_text("notes\n")
    git(base, "init", "-q", "-b", "main", str(root))
    init_store(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    git(root, "remote", "add", "origin", str(origin))
    git(root, "push", "-q", "origin", "main")
    git(root, "push", "-q", str(other), "main")
    return origin, other


def memory_branch(bare: Path) -> dict[str, bytes]:
    """The files on the remote's agentd-memory branch (read with libgit2: the test runs no git after the plant)."""
    tree = pygit2.Repository(str(bare)).revparse_single("refs/heads/agentd-memory").peel(pygit2.Tree)
    return {path: entry.data for path, entry in leaves(tree)}


def committed(root: Path, ref: str, path: str) -> bytes:
    repo = pygit2.Repository(str(root))
    return repo.revparse_single(ref).peel(pygit2.Tree)[path].data


@pytest.mark.parametrize("hooks_path", [False, True], ids=["hooks-in-git-dir", "core.hooksPath-elsewhere"])
def test_agentds_git_work_runs_nothing_an_agent_planted(tmp_path: Path, hooks_path: bool) -> None:
    root, marks = tmp_path / "proj", tmp_path / "marks"
    marks.mkdir()
    origin, other = make_repo(tmp_path, root)
    assert git_plants.plant(root, marks, other, hooks_path=hooks_path) == {}
    # the agent's work: a change under a clean filter, a new file under a process filter, a symlink, a deletion
    crlf = b"a = 10\r\nb = 2\r\n"
    (root / "src" / "a.py").write_bytes(crlf)
    (root / "src" / "b.py").write_text("b = 'new'\n")
    (root / "src" / "todo.proc").write_text("process filter\n")
    (root / "src" / "link").symlink_to("/etc")
    (root / "src" / "notes.txt").unlink()
    (root / ".agent" / "dropped.sh").write_text("#!/bin/sh\necho an agent's file\n")
    (root / ".git" / "agentd-wip-k1ll3d.index").write_bytes(b"DIRC")

    assert list_files(root, ["src/**"]) == ["src/.gitattributes", "src/a.py", "src/b.py", "src/link", "src/todo.proc"]
    hashed = scope_hashes(root, ["src/**"])
    assert cat_blob(root, hashed.files["src/a.py"]) == crlf  # the bytes on disk: no clean filter, no eol change
    assert cat_blob(root, hashed.files["src/link"]) == b"/etc"  # the link, never what it points at

    wip = save_wip(root, "web", ["src/**"], moment="crash", session="s-1")
    assert wip is not None
    assert {c.describe() for c in wip.changes} >= {"M src/a.py", "A src/b.py", "A src/todo.proc", "A src/link",
                                                   "D src/notes.txt"}
    assert committed(root, wip.commit, "src/a.py") == crlf
    assert [w.commit for w in list_wips(root, "web")] == [wip.commit]
    assert "+b = 'new'" in show_wip(root, wip)
    assert clean_leftovers(root) == [root / ".git" / "agentd-wip-k1ll3d.index"]
    assert not (root / ".git" / "agentd-wip-k1ll3d.index").exists()
    (root / "src" / "b.py").unlink()
    assert {c.path for c in restore_wip(root, wip, force=True)} >= {"src/b.py"}
    assert (root / "src" / "b.py").read_text() == "b = 'new'\n"

    said = revert(root, "src/a.py", None, tmp_path / "quarantine")  # from HEAD: the stored bytes, no smudge
    assert said.startswith("src/a.py: restored from HEAD") and (root / "src" / "a.py").read_bytes() == b"a = 1\r\nb = 2\r\n"

    rec = record_decision(root, "keep the plants dead", WHY, scope_paths=["src/**"])
    assert snapshots.load_id(AgentPaths(root), rec.snapshot)["files"]["src/b.py"] == hashed.files["src/b.py"]

    result = sync_memory(root, retries=1)
    assert result.pushed and result.skipped == ("dropped.sh",)
    remote = memory_branch(origin)
    assert ".agent/decisions.log" in remote and ".agent/dropped.sh" not in remote

    assert git_plants.marks_of(marks) == set(), "agentd ran what the agent planted"
    git_plants.fire(root)
    assert git_plants.FIRED <= git_plants.marks_of(marks), git_plants.FIRED - git_plants.marks_of(marks)


def test_a_worktree_pointing_away_from_the_project_is_refused(tmp_path: Path) -> None:
    """core.worktree (agent-writable) would make agentd read and store files the agent cannot see."""
    from supervisor.memory.wip import WipError

    root = tmp_path / "proj"
    make_repo(tmp_path, root)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "token").write_text("hunter2\n")
    with (root / ".git" / "config").open("a") as fh:
        fh.write(f"[core]\n\tworktree = {tmp_path / 'secret'}\n")
    with pytest.raises(WipError, match="core.worktree"):
        save_wip(root, "web", [], moment="stop")
    with pytest.raises(RuntimeError, match="core.worktree"):
        scope_hashes(root, [])


def test_a_crafted_wip_commit_cannot_make_restore_write_through_a_symlink(tmp_path: Path) -> None:
    """The WIP refs live in .git/: an agent can forge two, the first restoring a symlink to a directory
    outside, the second a file below that symlink (``agentd wip restore`` runs as the person)."""
    from supervisor.memory.wip import WipError
    from supervisor.memory.wipview import find_wip

    root, outside = tmp_path / "proj", tmp_path / "outside"
    make_repo(tmp_path, root)
    outside.mkdir()
    repo = open_repo(root)
    assert repo is not None
    head = repo.head()
    link = str(repo.git.create_blob(str(outside).encode()))
    payload = str(repo.git.create_blob(b"owned\n"))
    first = repo.commit(repo.tree_with(head.tree, {"src/esc": (link, 0o120000)}), [str(head.id)], "forged\n")
    second = repo.commit(repo.tree_with(head.tree, {"src/esc/x": (payload, 0o100644)}), [first], "forged\n")
    for number, commit in ((1, first), (2, second)):
        repo.git.references.create(f"refs/agentd/wip/web/{number}", pygit2.Oid(hex=commit))
    restore_wip(root, find_wip(root, "web", 1), force=True)  # the symlink itself comes back, as saved
    assert (root / "src" / "esc").is_symlink()
    with pytest.raises(WipError, match="symlink"):
        restore_wip(root, find_wip(root, "web", 2), force=True)
    assert not (outside / "x").exists()
    def raw_tree(entries: list[tuple[bytes, bytes, str]]) -> str:  # what libgit2 refuses to build: written raw
        body = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in sorted(entries, key=lambda e: e[1]))
        return str(repo.git.odb.write(pygit2.enums.ObjectType.TREE, body))

    hooks = raw_tree([(b"100755", b"post-commit", payload)])
    dotgit = raw_tree([(b"40000", b"hooks", hooks)])
    top = raw_tree([(b"40000", b".git", dotgit), *((f"{e.filemode:o}".encode(), e.name.encode(), str(e.id))
                                                   for e in head.tree)])
    bad = repo.commit(top, [str(head.id)], "x\n")
    repo.git.references.create("refs/agentd/wip/web/3", pygit2.Oid(hex=bad))
    with pytest.raises(WipError, match=".git"):
        restore_wip(root, find_wip(root, "web", 3), force=True)
    assert not (root / ".git" / "hooks" / "post-commit").exists()


# ---------------------------------------------------------------- the real daemon, a real fenced agent


def said(project: Project, unit: str, text: str, count: int = 1) -> str:
    return wait_until(lambda: (t := project.transcript(unit)).count(text) >= count and t, 60,
                      what=f"{text!r} in {unit}'s transcript")


def helpers(daemon: int) -> list[int]:
    """The git helper processes (``python -m supervisor.memory.gitworker DAEMON_PID``) of the daemon ``daemon``."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if (proc.info["cmdline"] or [])[-3:] == ["-m", "supervisor.memory.gitworker", str(daemon)]:
            found.append(proc.pid)
    return found


def wips(project: Project) -> list[dict]:
    out = project.agentd("wip", "list", "web", "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_the_daemon_start_crash_checkpoint_restart_stop_decide_and_sync_run_no_plant(project: Project) -> None:
    root, marks = project.root, project.root.parent / "marks"
    marks.mkdir()
    origin, other = make_repo(project.root.parent, root)
    project.fake_unit("web", cycle=True, scope='paths = ["src/**"]', restart="initial_delay = 0.2")
    project.agentd("start")
    assert project.wait_state("web", "running")["scope"].startswith("fenced")

    # a fenced agent plants from inside its fence: what the fence lets it write, it writes
    project.agentd("send", "web", f"run python {PLANT} {root} {marks} {other}")
    text = said(project, "web", "[exit 0]")
    planted = re.findall(r"^planted (\S+)", text, re.M)
    assert any(p.startswith(str(root / ".git")) for p in planted), text
    assert git_plants.plant(root, marks, other) == {}  # the rest, as an agent outside any fence would
    old_index = root / ".git" / "agentd-wip-k1ll3d.index"  # what a WIP save of an older version, killed, left
    old_index.write_bytes(b"DIRC")

    project.agentd("send", "web", "write src/work.py work = 1")
    said(project, "web", "wrote src/work.py")
    project.agentd("send", "web", "crash")
    wait_until(lambda: [w for w in wips(project) if w["moment"] == "crash"], 60, what="the crash's WIP commit")
    daemon = project.daemon_pid()
    assert daemon and helpers(daemon), "the daemon's git work runs in its helper process"
    project.wait_state("web", "running", timeout=60)
    project.agentd("send", "web", "write src/todo.proc checkpointed")
    said(project, "web", "wrote src/todo.proc")
    project.agentd("checkpoint", "web")
    project.wait_state("web", "running", timeout=60)
    project.agentd("send", "web", "write src/work.py more = 2")
    said(project, "web", "wrote src/work.py")  # a new session since the checkpoint: its own transcript
    project.agentd("restart", "web")
    project.wait_state("web", "running", timeout=60)
    decided = project.agentd("decide", "keep the plants dead", "--why", WHY, "--scope", "src/**")
    assert decided.returncode == 0
    project.agentd("stop")
    project.agentd("start")  # the daemon again: it clears the older version's leftover
    project.wait_state("web", "running", timeout=60)
    assert not old_index.exists()
    second = project.daemon_pid()
    project.agentd("stop")
    wait_until(lambda: not helpers(daemon) and not helpers(second), 30, what="the git helpers to end with the daemon")
    synced = project.agentd("sync")
    assert "pushed" in synced.stdout, synced.stdout

    assert git_plants.marks_of(marks) == set(), "the daemon ran what the agent planted"
    saved = {w["moment"] for w in wips(project)}
    assert {"crash", "checkpoint"} <= saved and saved & {"restart", "stop"}, saved
    newest = wips(project)[-1]
    assert committed(root, newest["commit"], "src/work.py") == b"work = 1\nmore = 2\n"
    paths = AgentPaths(root)
    [data] = [d for i in snapshots.list_ids(paths) if (d := snapshots.load(paths, i)) and d["decision"] == "keep the plants dead"]
    assert cat_blob(root, data["files"]["src/work.py"]) == b"work = 1\nmore = 2\n"
    assert ".agent/decisions.log" in memory_branch(origin)
    git_plants.fire(root)
    assert git_plants.FIRED <= git_plants.marks_of(marks), git_plants.FIRED - git_plants.marks_of(marks)


@pytest.mark.parametrize("where", ["include.path", ".gitignore"])
def test_a_fifo_an_agent_planted_cannot_wedge_the_daemons_git_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   where: str) -> None:
    """libgit2 opens what the repository names with no timeout, holding the GIL: a FIFO would stop every
    thread of the daemon for good.  The daemon's git work runs in its helper process (isolated here as the
    daemon does), given GIT_TIMEOUT (half a minute; here a moment): the request fails with the reason, the
    helper is replaced, and this process never stops answering."""
    import os
    import threading
    import time

    from supervisor.memory import gitworker
    from supervisor.memory.wip import WipError

    root = tmp_path / "proj"
    make_repo(tmp_path, root)
    fifo = root / ".git" / "evil-fifo" if where == "include.path" else root / "src" / ".gitignore"
    os.mkfifo(fifo)
    if where == "include.path":
        with (root / ".git" / "config").open("a") as fh:
            fh.write("[include]\n\tpath = evil-fifo\n")
    (root / "src" / "a.py").write_text("changed\n")
    monkeypatch.setattr(gitworker, "GIT_TIMEOUT", 2.0)
    monkeypatch.setattr(gitworker, "_WORKER", None)  # undone at the end: this test process is not a daemon
    helper = gitworker.isolate()
    ticks: list[float] = []
    alive = threading.Event()

    def tick() -> None:  # this process keeps running while a request hangs in the helper
        while not alive.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.05)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        started = time.monotonic()
        with pytest.raises(WipError, match="gave no answer within 2s .*FIFO"):
            save_wip(root, "web", ["src/**"], moment="crash")
        with pytest.raises(RuntimeError, match="gave no answer"):
            list_files(root, ["src/**"])
        if where == "include.path":  # the repository cannot even be opened
            with pytest.raises(RuntimeError, match="gave no answer"):
                revert(root, "src/a.py", None, tmp_path / "quarantine")
        else:  # a revert reads no .gitignore: it works
            assert revert(root, "src/a.py", None, tmp_path / "quarantine").startswith("src/a.py: restored from HEAD")
            (root / "src" / "a.py").write_text("changed\n")
        assert time.monotonic() - started < 60
        assert len([t for t in ticks if t > started + 0.5]) > 10, "this process stopped while the helper hung"
        if where == "include.path":
            assert helper.started == 3 and helper.pid is None  # each hung helper was killed, none is left
        else:
            assert helper.started == 3 and helper.pid is not None  # two killed; the third did the revert
        fifo.unlink()
        wip = save_wip(root, "web", ["src/**"], moment="crash")  # a fresh helper does the work
        assert wip is not None and committed(root, wip.commit, "src/a.py") == b"changed\n"
    finally:
        alive.set()
        helper.close()
