"""The Landlock fence with real processes, and the scope's expansion into allowed paths.

A probe script runs inside a fenced child and reports, per operation, "ok" or
the errno name it got; a nested probe shows that a (setsid) grandchild
inherits the fence.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from supervisor.scope.allowset import AllowSetError, covers, denied_paths, may_match_below, scope_allowset
from supervisor.session.subreaper import discover
from supervisor.scope.fencing import unit_fence
from supervisor.session.fence import Access, Fence, FenceSpec, agent_spec, availability, git_dirs, write_rights
from supervisor.session.mountview import View, ViewMode, view_mode
from supervisor.session.pty import Session

from .conftest import wait_until

PROBE = textwrap.dedent("""
    import errno, json, os, socket, subprocess, sys

    def run(op, *args):
        try:
            if op == "write":
                with open(args[0], "w") as f:
                    f.write("x")
            elif op == "append":
                with open(args[0], "a") as f:
                    f.write("x")
            elif op == "read":
                with open(args[0]) as f:
                    f.read()
            elif op == "mkdir":
                os.mkdir(args[0])
            elif op == "remove":
                os.remove(args[0])
            elif op == "rename":
                os.rename(args[0], args[1])
            elif op == "truncate":
                os.truncate(args[0], 0)
            elif op == "run":
                code = subprocess.run(list(args), capture_output=True).returncode
                return "ok" if code == 0 else f"exit {code}"
            elif op == "connect":
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(args[0])
            elif op == "grandchild":  # a probe in a new session, started by this one
                out = subprocess.run([sys.executable, __file__, json.dumps(args[0])], capture_output=True, text=True,
                                     start_new_session=True, check=True)
                return json.loads(out.stdout)
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    print(json.dumps([run(*op) for op in json.loads(sys.argv[1])]))
""")


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Path]:
    proj = tmp_path / "proj"
    for rel, text in {
        "src/app/main.py": "print(1)\n",
        "src/secret/key.txt": "hunter2\n",
        "src/util.py": "x = 1\n",
        "docs/readme.md": "# docs\n",
        ".git/HEAD": "ref: refs/heads/main\n",
        ".agent/engram.md": "# engram\n",
        ".agentd/inbox/web/.alive": "",
    }.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    paths = {"proj": proj, "outside": tmp_path / "outside", "tmp": tmp_path / "tmp", "state": tmp_path / "codex-home"}
    for key in ("outside", "tmp", "state"):
        paths[key].mkdir()
    (paths["outside"] / "victim.txt").write_text("keep me\n")
    (tmp_path / "probe.py").write_text(PROBE)
    paths["probe"] = tmp_path / "probe.py"
    return paths


def _spec(p: dict[str, Path]) -> FenceSpec:
    scope = scope_allowset(p["proj"], ["src/**"], ["src/secret/**"]).spec(p["proj"])
    return agent_spec(scope=scope, git_dirs=git_dirs(p["proj"]), inbox=p["proj"] / ".agentd/inbox/web",
                      tmp_dir=p["tmp"], state_dirs=[p["state"]])


def _probe(p: dict[str, Path], fence: Fence | None, ops: list[list[object]]) -> list[object]:
    kwargs = {"preexec_fn": fence, "pass_fds": fence.fds} if fence else {}
    try:
        out = subprocess.run([sys.executable, str(p["probe"]), json.dumps(ops)], cwd=p["proj"], capture_output=True,
                             text=True, timeout=60, check=True, **kwargs)
    finally:
        if fence:
            fence.close()
    return json.loads(out.stdout)


def test_landlock_is_available_here() -> None:
    have = availability()
    assert have.available and have.abi >= 1, have.reason


def test_inside_the_fence_writes_in_scope_succeed_and_others_fail_with_eacces(project: dict[str, Path]) -> None:
    proj, outside = project["proj"], project["outside"]
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(outside / "control.sock"))
        server.listen(1)
        ops = {
            "new file in an allowed dir": ["write", "src/app/new.py"],
            "edit a file in scope": ["append", "src/util.py"],
            "forbidden sibling": ["append", "src/secret/key.txt"],
            "new file in the forbidden dir": ["write", "src/secret/new.txt"],
            "outside the scope": ["write", "docs/new.md"],
            "outside the project": ["write", str(outside / "x")],
            "mkdir outside": ["mkdir", "docs/d"],
            "remove outside": ["remove", "docs/readme.md"],
            "rename out of the fence": ["rename", "src/app/main.py", "docs/main.py"],
            "rename between allowed dirs": ["rename", "src/app/new.py", ".agentd/inbox/web/moved.py"],
            "read a forbidden file": ["read", "src/secret/key.txt"],
            "read outside": ["read", str(outside / "victim.txt")],
            ".git": ["write", ".git/index.lock"],
            "its inbox": ["write", ".agentd/inbox/web/1.req"],
            ".agent": ["write", ".agent/notes.md"],
            "private tmp": ["write", str(project["tmp"] / "t")],
            "cli state": ["write", str(project["state"] / "auth.json")],
            "/dev/null": ["write", "/dev/null"],
            "control socket": ["connect", str(outside / "control.sock")],
            "grandchild": ["grandchild", [["write", "docs/gc.md"], ["write", "src/app/gc.py"]]],
        }
        got = dict(zip(ops, _probe(project, Fence.build(_spec(project)), list(ops.values()))))

    for ok in ("new file in an allowed dir", "edit a file in scope", "rename between allowed dirs", "read a forbidden file", "read outside", ".git",
               "its inbox", "private tmp", "cli state", "/dev/null", "control socket"):
        assert got[ok] == "ok", (ok, got[ok])
    for refused in ("forbidden sibling", "new file in the forbidden dir", "outside the scope", "outside the project",
                    "mkdir outside", "remove outside", ".agent"):
        assert got[refused] == "EACCES", (refused, got[refused])
    assert got["rename out of the fence"] in ("EXDEV", "EACCES")  # EXDEV when only the cross-dir (refer) check fails
    assert got["grandchild"] == ["EACCES", "ok"]  # a setsid grandchild is fenced as well
    assert (proj / ".agentd/inbox/web/moved.py").exists() and (proj / "src/app/gc.py").exists()
    assert not (proj / ".agent/notes.md").exists()
    assert not (proj / "docs/new.md").exists() and not (proj / "docs/gc.md").exists()
    assert (proj / "src/secret/key.txt").read_text() == "hunter2\n"
    assert (proj / "docs/readme.md").exists() and (proj / "src/app/main.py").exists()


def test_the_same_probe_unfenced_writes_everywhere(project: dict[str, Path]) -> None:
    # The control for the test above: the refusals come from the fence, not from file modes.
    got = _probe(project, None, [["append", "src/secret/key.txt"], ["write", "docs/new.md"]])
    assert got == ["ok", "ok"]


def test_rights_newer_than_the_abi_are_masked(project: dict[str, Path]) -> None:
    assert Access.TRUNCATE not in write_rights(1) and Access.REFER not in write_rights(1)
    assert Access.TRUNCATE in write_rights(3) and Access.REFER in write_rights(2)
    victim = str(project["outside"] / "victim.txt")
    old = Fence.build(_spec(project), abi=1)
    assert old.abi == 1 and Access.TRUNCATE not in old.handled
    # ABI 1 does not know truncation: truncate(2) outside is not refused, writing still is.
    assert _probe(project, old, [["truncate", victim], ["append", victim]]) == ["ok", "EACCES"]
    (project["outside"] / "victim.txt").write_text("keep me\n")
    assert _probe(project, Fence.build(_spec(project)), [["truncate", victim]]) == ["EACCES"]


def test_refusals_in_shell_output_name_paths_outside_the_fence(project: dict[str, Path]) -> None:
    spec = _spec(project)
    fence = Fence.build(spec)
    script = "echo x > docs/a.md; touch docs/b.md; mkdir docs/c; cp src/util.py docs/; echo y > src/app/ok.py"
    try:
        out = subprocess.run(["sh", "-c", script], cwd=project["proj"], capture_output=True, text=True, timeout=60,
                             preexec_fn=fence, pass_fds=fence.fds)
    finally:
        fence.close()
    found = denied_paths(out.stderr)
    resolved = {str((project["proj"] / p).resolve()) for p in found}
    for rel in ("docs/a.md", "docs/b.md", "docs/c"):
        assert str(project["proj"] / rel) in resolved, (rel, out.stderr)
    assert all(not spec.permits(p) for p in resolved)
    assert spec.permits(project["proj"] / "src/app/ok.py") and (project["proj"] / "src/app/ok.py").exists()


def test_a_session_spawned_with_containment_and_fence(project: dict[str, Path]) -> None:
    proj = project["proj"]
    containment = discover(proj)
    member = containment.add("web", "20261201T000000-f00f00")
    session = Session("web", ["sh", "-c", "echo in > src/app/in.txt; echo out > docs/out.txt; echo $? > src/app/rc; "
                      "exec sleep 3100"], env=dict(os.environ), cwd=proj, rows=24, cols=80,
                      transcript_dir=project["tmp"] / "transcripts", redact_env={})
    fence = Fence.build(_spec(project))
    try:
        session.spawn([containment.child_step(member), fence])
        containment.started(member, session.pid, session.create_time)
        assert fence.fd == -1  # closed in the parent after the spawn
        wait_until(lambda: (proj / "src/app/rc").exists() and (proj / "src/app/rc").read_text().strip(), timeout=30,
                   what="the shell's report")
        assert (proj / "src/app/in.txt").read_text() == "in\n"
        assert not (proj / "docs/out.txt").exists()
        assert (proj / "src/app/rc").read_text().strip() != "0"
        assert member.group.contains(session.pid)
    finally:
        asyncio.run(containment.end(member, 2.0))
        wait_until(lambda: session.reap() is not None, timeout=10, what="the leader's exit")
        session.close()
        containment.release(member)
        containment.close()


# -- the view: agentd's state hidden, the person's files read-only, git still commits --------------------------------


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel, text in {"src/a.py": "a = 1\n", ".agent/engram.md": "# engram\n", "units/web.toml": "[agent]\n",
                      "etc/agentd.toml": "", ".agentd/web-token": "TOKEN-123\n",
                      ".agentd/transcripts/db/s1.txt": "db's secret output\n", ".agentd/inbox/db/.alive": "",
                      ".agentd/inbox/web/.alive": ""}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    for argv in (["git", "init", "-q"], ["git", "add", "src"], ["git", "commit", "-qm", "one"]):
        subprocess.run(argv, cwd=root, env=env, check=True)
    return root


VIEW_OPS = {
    "unmounting the view": ["run", "umount", "-l", ".agent"],
    "a mount of its own": ["run", "sh", "-c", "unshare -m sh -c 'umount -l .agent; touch .agent/in-new-ns'"],
    "the token": ["read", ".agentd/web-token"],
    "another unit's transcript": ["read", ".agentd/transcripts/db/s1.txt"],
    "its own inbox": ["write", ".agentd/inbox/web/1.req"],
    "another unit's inbox": ["write", ".agentd/inbox/db/1.req"],
    "a new file in the state dir": ["write", ".agentd/planted"],
    "the control socket": ["connect", ".agentd/agentd.sock"],
    "the memory store": ["append", ".agent/engram.md"],
    "a new memory file": ["write", ".agent/tasks-b.md"],
    "the store renamed away": ["rename", ".agent", "agent-old"],
    "a unit file": ["append", "units/web.toml"],
    "the settings dir renamed away": ["rename", "etc", "etc-old"],
    "git config": ["append", ".git/config"],
    "a config.lock": ["write", ".git/config.lock"],
    "a rename over the config": ["rename", ".git/config.lock", ".git/config"],
    "a hook": ["write", ".git/hooks/pre-commit"],
    "git's info": ["write", ".git/info/attributes"],
    ".git renamed away": ["rename", ".git", "git-old"],
    "the daemon's view of the token": ["read", "PARENT_ROOT/.agentd/web-token"],
    "a commit": ["run", "sh", "-c", "echo b=2 >> src/a.py && git add src && git commit -qm two"],
    "git config by the agent": ["run", "git", "config", "user.name", "evil"],
    "the scope": ["append", "src/a.py"],
}


def _view_probe(tmp_path: Path, mode: ViewMode) -> tuple[Path, dict[str, object]]:
    root = _repo(tmp_path)
    (tmp_path / "probe.py").write_text(PROBE)
    ops = {k: [a.replace("PARENT_ROOT", f"/proc/{os.getpid()}/root{root}") for a in v] for k, v in VIEW_OPS.items()}
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / ".agentd/agentd.sock"))
        server.listen(1)
        fence = unit_fence(root, [], [], inbox=root / ".agentd/inbox/web", state_dir=root / ".agentd",
                           shown=[root / ".agentd/agentd.sock"], protect=[root / "units", root / "etc/agentd.toml"],
                           view_mode=mode)
        landlock = Fence.build(fence.spec)
        view = View(fence.view, mode)
        try:
            out = subprocess.run([sys.executable, str(tmp_path / "probe.py"), json.dumps(list(ops.values()))], cwd=root,
                                 env=env, capture_output=True, text=True, timeout=60, check=True,
                                 preexec_fn=lambda: (view(), landlock()), pass_fds=landlock.fds)
        finally:
            landlock.close()
    return root, dict(zip(ops, json.loads(out.stdout)))


@pytest.mark.parametrize("kind", ["mount", "userns"])
def test_the_view_hides_agentds_state_keeps_the_persons_files_read_only_and_git_still_commits(
        tmp_path: Path, kind: str) -> None:
    assert view_mode().available, view_mode().reason
    root, got = _view_probe(tmp_path, ViewMode(kind))
    # a scope of the whole project: the fence allows every write below the root; the view still holds
    assert got["the scope"] == "ok" and got["its own inbox"] == "ok" and got["the control socket"] == "ok"
    for hidden in ("the token", "another unit's transcript", "another unit's inbox"):
        assert got[hidden] == "ENOENT", (hidden, got[hidden])
    for readonly in ("a new file in the state dir", "the memory store", "a new memory file", "a unit file", "git config",
                     "a hook", "git's info"):
        assert got[readonly] == "EROFS", (readonly, got[readonly])
    for mount_point in ("the store renamed away", "a rename over the config", ".git renamed away",
                        "the settings dir renamed away"):
        assert got[mount_point] == "EBUSY", (mount_point, got[mount_point])
    assert got["a config.lock"] == "ok"  # git's own temp file: made, then the rename over the config fails
    assert got["the daemon's view of the token"] == "EACCES"  # Landlock: no /proc/PID/root of a process outside
    assert got["a commit"] == "ok" and got["git config by the agent"] != "ok"
    assert got["unmounting the view"] != "ok" and got["a mount of its own"] != "ok"  # the fence forbids (un)mounting
    log = subprocess.run(["git", "log", "--format=%s"], cwd=root, capture_output=True, text=True, check=True).stdout
    assert log.split() == ["two", "one"]
    assert "evil" not in (root / ".git/config").read_text() and (root / ".agent/engram.md").read_text() == "# engram\n"
    assert not (root / ".git/hooks/pre-commit").exists() and not (root / ".agentd/planted").exists()
    assert not (root / ".agent/in-new-ns").exists()
    assert (root / ".agentd/inbox/web/1.req").exists() and not (root / ".agentd/inbox/db/1.req").exists()
    assert (root / ".agent").is_dir() and (root / "etc/agentd.toml").is_file()


def test_without_a_view_the_same_probe_reads_and_writes_them(tmp_path: Path) -> None:
    # The control for the test above: Landlock alone (a scope of the whole project) lets all of it through.
    root = _repo(tmp_path)
    (tmp_path / "probe.py").write_text(PROBE)
    fence = unit_fence(root, [], [], inbox=root / ".agentd/inbox/web")
    landlock = Fence.build(fence.spec)
    ops = [VIEW_OPS[k] for k in ("the token", "another unit's inbox", "the memory store", "git config", "a hook")]
    try:
        out = subprocess.run([sys.executable, str(tmp_path / "probe.py"), json.dumps(ops)], cwd=root, capture_output=True,
                             text=True, timeout=60, check=True, preexec_fn=landlock, pass_fds=landlock.fds)
    finally:
        landlock.close()
    assert json.loads(out.stdout) == ["ok"] * 5


# -- the scope as allowed paths (pure over a directory tree) ----------------------------------------------------


def test_forbidden_paths_inside_a_scope_are_enforced_by_allowing_the_siblings(project: dict[str, Path]) -> None:
    got = scope_allowset(project["proj"], ["src/**"], ["src/secret/**"])
    assert got.dirs == ["src/app"]
    assert got.files == ["src/util.py"]
    assert got.watched == []
    assert len(got.notes) == 1 and got.notes[0].startswith("src:") and "src/secret" in got.notes[0]


def test_a_forbid_glob_with_no_match_yet_is_watched_not_fenced(project: dict[str, Path]) -> None:
    got = scope_allowset(project["proj"], [], ["migrations/**", "docs/**"])
    assert "" not in got.dirs  # docs/ exists and is forbidden: the root is split
    assert {"src", ".git", ".agent", ".agentd"} <= set(got.dirs) and "docs" not in got.dirs
    assert got.watched == []  # migrations/ can only appear directly in the root, which is not creatable now
    fresh = scope_allowset(project["proj"], [], ["migrations/**"])
    assert fresh.dirs == [""] and fresh.watched == [("", "migrations/**")]
    anywhere = scope_allowset(project["proj"], ["src/**"], ["**/*.sql"])
    assert anywhere.dirs == ["src"] and anywhere.watched == [("src", "**/*.sql")]


def test_file_globs_give_file_rules_and_a_huge_scope_is_refused(project: dict[str, Path]) -> None:
    got = scope_allowset(project["proj"], ["src/**/*.py"], [])
    assert got.dirs == [] and got.files == ["src/app/main.py", "src/util.py"]
    with pytest.raises(AllowSetError, match="more than 1 paths"):
        scope_allowset(project["proj"], ["src/**/*.py"], [], max_rules=1)
    assert scope_allowset(project["proj"], [], ["**"]).dirs == []


def test_glob_questions() -> None:
    assert covers("src/**", "src") and covers("src/*", "src") and covers("src", "src/a") and covers("**", "")
    assert not covers("**/*.py", "src") and not covers("src/a", "src")
    assert may_match_below("migrations/**", "") and may_match_below("**/*.sql", "a/b")
    assert not may_match_below("migrations/**", "src")


def test_spec_resolves_deduplicates_and_answers_permits(tmp_path: Path) -> None:
    (tmp_path / "a/b").mkdir(parents=True)
    (tmp_path / "f").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    spec = FenceSpec.of([tmp_path / "a", tmp_path / "link/b"], [tmp_path / "a/b/x", tmp_path / "f"])
    assert spec.dirs == (tmp_path / "a",) and spec.files == (tmp_path / "f",)
    assert spec.permits(tmp_path / "link/new") and spec.permits(tmp_path / "f")
    assert not spec.permits(tmp_path / "g") and not spec.permits(tmp_path)
    missing = agent_spec(scope=spec, writable=[tmp_path / "nope"])
    assert any("nope does not exist" in n for n in missing.notes)


def test_git_dirs_of_a_worktree(tmp_path: Path) -> None:
    common = tmp_path / "main/.git"
    (common / "worktrees/w").mkdir(parents=True)
    (common / "worktrees/w/commondir").write_text("../..\n")
    (tmp_path / "w").mkdir()
    (tmp_path / "w/.git").write_text(f"gitdir: {common / 'worktrees/w'}\n")
    assert [p.resolve() for p in git_dirs(tmp_path / "w")] == [common / "worktrees/w", common]
    assert git_dirs(tmp_path / "main") == [common]


def test_a_fenced_process_cannot_signal_outside_its_own_tree(project: dict[str, Path]) -> None:
    if availability().abi < 6:
        pytest.skip(f"Landlock ABI {availability().abi}: signal scoping needs ABI 6")
    script = ("import os, signal, subprocess, sys\n"
              "def probe(pid):\n"
              "    try:\n        os.kill(pid, 0)\n        return 'ok'\n    except OSError as exc:\n        return exc.strerror\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
              "print(probe(os.getppid()), probe(child.pid), probe(os.getpid()))\n"
              "child.kill()\n")
    for fenced in (True, False):
        fence = Fence.build(_spec(project)) if fenced else None
        kwargs = {"preexec_fn": fence, "pass_fds": fence.fds} if fence else {}
        try:
            out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True,
                                 **kwargs).stdout.split()
        finally:
            if fence:
                fence.close()
        # the parent (the daemon, here the test) is outside the domain; its own children and itself are inside
        assert out == (["Operation", "not", "permitted", "ok", "ok"] if fenced else ["ok", "ok", "ok"]), out
