"""The fence decision, a unit's fence, refusals from an agent's trail, [resources] sizes, visible names (pure or files only)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from supervisor.adapters.confine import Confined
from supervisor.config.resources import parse_size
from supervisor.scope.fencing import (FenceRequired, FenceSetting, decide_fence, hidden_state, refused, state_dirs, unit_fence,
                                       writable_paths)
from supervisor.session.fence import Availability
from supervisor.session.mountview import ViewMode
from supervisor.visible import visible

HAVE = Availability(7)
MISSING = Availability(0, "the kernel has no Landlock system calls")


def test_auto_fences_unless_landlock_is_missing_or_the_agent_keeps_its_own_sandbox() -> None:
    d = decide_fence("auto", HAVE, None)
    assert d.fenced and not d.required and d.status(7) == "fenced (Landlock ABI 7)"
    d = decide_fence(FenceSetting.AUTO, MISSING, None)
    assert not d.fenced and d.status() == "watched, not enforced (Landlock unavailable: the kernel has no Landlock system calls)"
    d = decide_fence("auto", HAVE, "codex workspace-write")
    assert not d.fenced and "own sandbox (codex workspace-write)" in d.status()
    # what a Codex adapter asks before bypassing its sandbox: would agentd's fence then hold it?
    assert decide_fence("auto", HAVE, None).fenced and not decide_fence("auto", MISSING, None).fenced


def test_off_is_never_fenced_and_on_is_fenced_or_refuses_to_start() -> None:
    d = decide_fence("off", HAVE, None)
    assert not d.fenced and d.status() == 'watched, not enforced ([scope] fence = "off")'
    d = decide_fence("on", HAVE, "codex workspace-write")
    assert d.fenced and d.required and "may fail inside it" in d.status(7)
    with pytest.raises(FenceRequired, match="Landlock is unavailable"):
        decide_fence("on", MISSING, None)
    assert decide_fence("on", HAVE, None).unfenced("why").status() == "watched, not enforced (why)"
    with pytest.raises(ValueError):
        decide_fence("sometimes", HAVE, None)


def test_a_units_fence_holds_its_scope_memory_git_tmp_state_and_writable_paths(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    for d in ("src/api", "src/api/migrations", "src/web", "docs", ".agent", ".git/objects", "build",
              ".agentd/inbox/web", ".agentd/inbox/db", ".agentd/sessions/web/s1"):
        (root / d).mkdir(parents=True)
    (root / "src/api/migrations/001.sql").write_text("x")
    (root / "src/api/a.py").write_text("x")
    (root / ".git/config").write_text("[core]\n")
    tmp, home = tmp_path / "tmp", tmp_path / "codex-home"
    tmp.mkdir()
    home.mkdir()
    fence = unit_fence(root, ["src/**"], ["src/api/migrations/**", "**/*.lock"], writable=["build", "~/nonexistent-x"],
                       tmp_dir=tmp, env={"CODEX_HOME": str(home)}, inbox=root / ".agentd/inbox/web",
                       state_dir=root / ".agentd", shown=[root / ".agentd/sessions/web/s1"], view_mode=ViewMode("mount"))
    spec = fence.spec
    for ok in ("src/api/a.py", "src/web/new/b.py", ".agentd/inbox/web/1.req", ".git/index", ".git/objects/ab/cd",
               "build/out.js"):
        assert fence.permits(root / ok), ok
    # refused: outside the scope, forbidden, the memory store (the daemon writes it: the inbox), another
    # unit's inbox, and (the price of fencing a forbidden path by its siblings) new entries directly in a
    # directory above a forbidden one
    for no in ("docs/a.md", "README.md", "src/api/migrations/001.sql", "units/web.toml", "src/api/new.py",
               ".agent/engram.md", ".agentd/inbox/db/1.req"):
        assert not fence.permits(root / no), no
    # what it sees: the state directory hidden but for its own; .agent/ and git's own files read-only
    view = fence.view
    assert view.hidden == root / ".agentd"
    assert view.shown == (root / ".agentd/inbox/web", root / ".agentd/sessions/web/s1")
    assert {root / ".agent", root / ".git/config", root / ".git/hooks", root / ".git/info"} <= set(view.readonly)
    assert (root / ".git/hooks").is_dir() and (root / ".git/info").is_dir()  # made, so the agent cannot make them
    assert view.anchored == (root / ".git",)
    assert not fence.permits(root / ".git/config") and not fence.permits(root / ".git/hooks/pre-commit")
    assert spec.permits(tmp / "scratch") and spec.permits(home / "sessions/x.jsonl")
    assert "**/*.lock" in fence.watched  # may match files not existing yet: the watcher keeps checking it
    assert any("nonexistent-x" in n for n in fence.notes)
    assert writable_paths(root, ["build", "/abs"]) == [root / "build", Path("/abs")]
    assert state_dirs({"CLAUDE_CONFIG_DIR": "/c", "HOME": "/h"}) == [Path("/c")]


def test_refusals_are_the_paths_outside_the_fence_each_once(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    spec = unit_fence(root, ["src/**"], []).spec
    got = refused(["../x.txt", "src/ok.py", "/etc/passwd", "docs/a.md", "docs/a.md"], root, spec)
    assert got == [tmp_path / "x.txt", Path("/etc/passwd"), root / "docs/a.md"]


class _Adapter:
    def __init__(self, trail: list[str] | None) -> None:
        self.trail = trail

    def refused_writes(self, session: object) -> list[str] | None:
        return self.trail


def test_refusals_come_from_the_adapters_trail_or_whole_new_transcript_lines(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    text = tmp_path / "s.txt"
    text.write_text("fake> write docs/a.md x\nerror: write: [Errno 13] Permission denied: 'docs/a.md'\n"
                    "touch: cannot touch 'docs/b.md': Permission")
    fence = unit_fence(root, ["src/**"], [])
    confined = Confined(containment=None, member=None, decision=decide_fence("auto", HAVE, None), fence=fence,  # type: ignore[arg-type]
                        tmp_dir=None, cwd=root)
    session = SimpleNamespace(transcript=SimpleNamespace(text_path=text), typed=lambda line: False)
    assert confined.refusals(session, _Adapter(None)) == [root / "docs/a.md"]  # the unfinished line waits
    with open(text, "a") as f:
        f.write(" denied\nerror: Permission denied: 'docs/a.md'\n")
    assert confined.refusals(session, _Adapter(None)) == [root / "docs/b.md"]  # a.md again: once per session
    assert confined.refusals(session, _Adapter(None)) == []  # nothing new printed: nothing read, nothing named
    assert confined.refusals(session, _Adapter(["src/x.py", "/etc/motd"])) == [Path("/etc/motd")]


def test_denial_lines_are_found_on_the_bytes() -> None:
    from supervisor.adapters.confine import _denial_lines

    data = ("ok line\nerror: Permission DENIED: 'a' and denied again\nplain\n"
            "EACCES: open 'b' (denied)\nnot this one\ntouch: é Permission denied").encode()
    assert _denial_lines(data) == ["error: Permission DENIED: 'a' and denied again", "EACCES: open 'b' (denied)",
                                   "touch: é Permission denied"]
    assert _denial_lines(b"a flood\n" * 1000) == []


def test_sizes() -> None:
    assert parse_size(1024) == 1024 and parse_size("512M") == 512 << 20 and parse_size("1.5GiB") == 3 << 29
    assert parse_size("2g") == 2 << 30 and parse_size(" 10 KB ") == 10 << 10
    for bad in ("lots", "0", -1, True, "5X"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_visible_escapes_what_would_act_on_a_terminal() -> None:
    assert visible("src/a.py") == "src/a.py" and visible("café 漢字") == "café 漢字"
    assert visible("note\rexit\r.txt") == "note\\rexit\\r.txt"
    assert visible("a\x1b[2Jb\x07") == "a\\x1b[2Jb\\x07"
    assert visible("bidi\u202eexe.txt") == "bidi\\u202eexe.txt"
    assert visible("back\\slash") == "back\\\\slash"  # an escape cannot be forged
    assert visible(os.fsdecode(b"\xff.txt")) == "\\xff.txt"


def test_the_hidden_state_of_a_run_unit_daemon_is_the_projects_whole_state(tmp_path: Path) -> None:
    state = tmp_path / ".agentd"
    assert hidden_state(state) == state
    assert hidden_state(state / "run-unit" / "web") == state  # the other daemons' states and the token too


def test_without_a_mount_namespace_the_notes_say_what_the_fence_cannot_hold(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / ".agent").mkdir(parents=True)
    fence = unit_fence(root, [], [], view_mode=ViewMode("", "cannot make a user namespace (not root): EPERM"))
    assert any("no private view (cannot make a user namespace" in n and ".agent/" in n for n in fence.notes)
    assert fence.permits(root / ".agent" / "engram.md")  # the scope is the whole project: Landlock alone allows it
