"""The scope guard: real inotify on temp directories, real git repositories, pure policy functions."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from supervisor.memory.gitfiles import scope_hashes
from supervisor.scope import watcher as watcher_module
from supervisor.scope.revert import TEMP_PREFIX, content_digest, revert
from supervisor.scope.rules import Candidate, Violation, attribute, check, forbid_globs_from_constraints, overlaps
from supervisor.scope.watcher import ChangeWatcher
from tests.conftest import git, wait_until

DEADLINE = 5.0
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id .* already exists:RuntimeWarning")


# --------------------------------------------------------------------------- watching


class Seen:
    """Collects on_change calls; waits on a condition (no sleeps) for a path to show up."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, rel: str) -> None:
        with self.cond:
            self.calls.append(rel)
            self.cond.notify_all()

    def wait_for(self, *paths: str, timeout: float = DEADLINE) -> list[str]:
        with self.cond:
            ok = self.cond.wait_for(lambda: all(p in self.calls for p in paths), timeout)
            assert ok, f"not reported within {timeout}s: {[p for p in paths if p not in self.calls]}; got {self.calls}"
            return list(self.calls)

    def count(self, path: str) -> int:
        with self.cond:
            return self.calls.count(path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for d in ("src", "db", ".git", "node_modules/pkg", "src/__pycache__", ".agent"):
        (root / d).mkdir(parents=True)
    (root / "src" / "a.py").write_text("a\n")
    return root


@pytest.fixture
def watched(project: Path):
    seen = Seen()
    w = ChangeWatcher(project, seen)
    w.start()
    yield project, seen, w
    w.stop()


def test_writes_inside_and_outside_a_scope_are_seen(watched) -> None:
    root, seen, _ = watched
    (root / "src" / "a.py").write_text("changed\n")
    (root / "db" / "schema.sql").write_text("create table t;\n")
    (root / "top.txt").write_text("x")
    seen.wait_for("src/a.py", "db/schema.sql", "top.txt")  # how fast: python -m bench.micro


def test_ignored_directories_report_nothing(watched) -> None:
    root, seen, _ = watched
    (root / ".git" / "index").write_text("x")
    (root / "node_modules" / "pkg" / "i.js").write_text("x")
    (root / "src" / "__pycache__" / "a.pyc").write_text("x")
    (root / ".agent" / "state.json").write_text("{}")
    (root / "src" / f"{TEMP_PREFIX}123.tmp").write_text("x")
    (root / "sentinel").write_text("x")  # written last: reported after anything written before it
    calls = seen.wait_for("sentinel")
    assert calls == ["sentinel"]


class StoppedClock:
    """The watcher's monotonic clock, injected: it moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def pending(w: ChangeWatcher) -> set[str]:
    """Paths the watcher has noted and not reported yet (its debounce table)."""
    with w._cond:
        return set(w._pending)


def test_a_burst_of_writes_is_reported_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = StoppedClock()
    monkeypatch.setattr(watcher_module, "time", clock)
    seen = Seen()
    with ChangeWatcher(project, seen, debounce=0.2, max_delay=1.0) as w:
        f = project / "src" / "a.py"
        for i in range(30):  # however slowly these run, no time passes for the watcher
            with open(f, "a") as fh:
                fh.write(f"{i}\n")
        (project / "src" / "sentinel").write_text("x")
        # one directory's events come in order (one watch, one emitter thread; a file at the root would come
        # through the root's own watch, in another thread, and could be noted before src/'s): once the
        # sentinel is noted, so is every write before it
        wait_until(lambda: "src/sentinel" in pending(w), DEADLINE, interval=0.01, what="the sentinel to be noted")
        assert seen.calls == []  # nothing is due while the clock stands still
        clock.now += 0.2
        seen.wait_for("src/a.py", "src/sentinel")
    assert seen.count("src/a.py") == 1


def test_continuous_writes_are_still_reported(project: Path) -> None:
    seen = Seen()
    with ChangeWatcher(project, seen, debounce=0.2, max_delay=0.5):
        f = project / "db" / "log.txt"
        stop = time.monotonic() + DEADLINE
        while "db/log.txt" not in seen.calls and time.monotonic() < stop:
            with open(f, "a") as fh:  # a write every ~10 ms: never quiet for 0.2 s
                fh.write("x")
            with seen.cond:
                seen.cond.wait(0.01)
        assert "db/log.txt" in seen.calls


def test_moves_and_deletes_report_both_paths(watched) -> None:
    root, seen, _ = watched
    os.rename(root / "src" / "a.py", root / "src" / "b.py")
    seen.wait_for("src/a.py", "src/b.py")
    (root / "sentinel").write_text("x")
    seen.wait_for("sentinel")  # reported after every report of the rename
    reported = seen.count("src/b.py")
    (root / "src" / "b.py").unlink()
    with seen.cond:
        assert seen.cond.wait_for(lambda: seen.calls.count("src/b.py") > reported, DEADLINE), "the delete was not reported"


def test_new_and_moved_directories_are_followed(watched) -> None:
    root, seen, _ = watched
    (root / "newdir" / "deep").mkdir(parents=True)
    (root / "newdir" / "deep" / "early.txt").write_text("x")  # maybe before its watch exists
    seen.wait_for("newdir/deep/early.txt")
    (root / "newdir" / "late.txt").write_text("x")
    seen.wait_for("newdir/late.txt")
    # a directory renamed: its files left the old path for the new one
    os.rename(root / "src", root / "lib")
    seen.wait_for("src/a.py", "lib/a.py")
    # moved below another directory, written there, and moved back up
    os.rename(root / "lib", root / "db" / "lib")
    seen.wait_for("db/lib/a.py")
    (root / "db" / "lib" / "c.py").write_text("x")
    seen.wait_for("db/lib/c.py")
    os.rename(root / "db" / "lib", root / "lib")
    seen.wait_for("lib/c.py")
    n = seen.count("db/lib/c.py")
    (root / "lib" / "c.py").write_text("y")  # reported under its new path only
    (root / "sentinel").write_text("x")
    seen.wait_for("sentinel")
    with seen.cond:
        assert seen.cond.wait_for(lambda: seen.calls.count("lib/c.py") >= 2, DEADLINE)
    assert seen.count("db/lib/c.py") == n
    # a directory moved in from outside the project
    outside = root.parent / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "pkg" / "m.py").write_text("x")
    os.rename(outside / "pkg", root / "pkg")
    seen.wait_for("pkg/m.py")


def test_stop_is_idempotent_and_a_failing_handler_does_not_stop_the_watcher(project: Path) -> None:
    seen = Seen()

    def handler(rel: str) -> None:
        seen(rel)
        if rel == "boom":
            raise RuntimeError("handler bug")

    w = ChangeWatcher(project, handler)
    w.start()
    (project / "boom").write_text("x")
    seen.wait_for("boom")
    (project / "after").write_text("x")
    seen.wait_for("after")
    w.stop()
    w.stop()
    assert not w._worker.is_alive() and not w._observer.is_alive()


# --------------------------------------------------------------------------- policy


def test_forbid_lines_in_constraints() -> None:
    text = """# Constraints
- Keep the API stable.
- forbid: migrations/**
forbid: db/schema.sql, db/*.sql   # the DBA owns these
  * Forbid: `vendor/**`
Do not forbid: anything here (not at the start of a line)
```
forbid: example/**
```
- forbid: migrations/**
"""
    assert forbid_globs_from_constraints(text) == ["migrations/**", "db/schema.sql", "db/*.sql", "vendor/**"]
    assert forbid_globs_from_constraints("") == []


def cand(unit: str, wd: str = "", scope=(), forbid=(), busy=False, age=100.0) -> Candidate:
    return Candidate(unit, wd, list(scope), list(forbid), [], busy, age)


def test_attribution_by_working_directory() -> None:
    a = cand("api", "services/api", ["services/api/**"], age=1.0)
    w = cand("web", "web", ["web/**"], age=1.0)
    got = attribute("services/api/x.py", [a, w])
    assert got.unit == "api" and got.candidates == ["api"]
    # outside its own scope but only it runs there: still the one (a violation by web)
    assert attribute("web/x", [w, cand("root-idle", "services")]).unit == "web"
    assert attribute("x", []).unit is None
    # the only unit there, but idle: a person's edit or a build, nobody is blamed
    a.last_output_age = 300
    got = attribute("services/api/x.py", [a, w])
    assert got.unit is None and not got.suspect and "active" in got.why


def test_attribution_prefers_the_active_unit_then_the_scope() -> None:
    a = cand("api", "", ["api/**"], busy=True)
    b = cand("web", "", ["web/**"], age=300)
    assert attribute("web/x", [a, b]).unit == "api"  # only api was mid-turn: a violation by api
    b.last_output_age = 1.0  # both active now: the one allowed to change it
    got = attribute("web/x", [a, b])
    assert got.unit == "web", got.why
    got = attribute("docs/x", [a, b])  # both active, neither allowed: ambiguous, suspect, nobody blamed
    assert got.unit is None and got.suspect and sorted(got.candidates) == ["api", "web"]
    c = cand("all", "", [], age=1.0)  # empty scope: may change anything
    got = attribute("api/y", [a, b, c])
    assert got.unit is None and not got.suspect and sorted(got.candidates) == ["all", "api"]
    a.busy, b.last_output_age, c.last_output_age = False, 300, 300  # all idle: nobody is blamed
    got = attribute("docs/x", [a, b, c])
    assert got.unit is None and not got.suspect


def test_attribution_never_blames_outside_every_workdir_or_fence() -> None:
    a = cand("api", "api", ["api/**"], busy=True)
    b = cand("web", "web", ["web/**"], busy=True)
    got = attribute("docs/readme", [a, b])
    assert got.unit is None and not got.suspect and "outside every" in got.why
    # two busy agents in one workdir: the fence tells who could have written it
    fa = cand("auth", "", ["auth/**"], busy=True)
    fm = cand("db", "", ["migrations/**"], busy=True)
    assert attribute("migrations/001.sql", [fa, fm]).unit == "db"
    fa.permits = lambda rel: rel.startswith("auth/")
    fm.forbid = ["migrations/001.sql"]  # forbidden for db too, but the fence says auth could not have written it
    got = attribute("migrations/001.sql", [fa, fm])
    assert got.unit == "db", got.why
    fm.permits = lambda rel: rel.startswith("migrations/") and rel != "migrations/001.sql"
    got = attribute("migrations/001.sql", [fa, fm])  # nobody's fence lets them: a person's edit
    assert got.unit is None and not got.suspect and "fence" in got.why


def test_a_unit_confined_by_its_own_sandbox_is_never_blamed_for_a_path_it_cannot_write(tmp_path: Path) -> None:
    """Issue 25 §6: a person edits etc/agentd.toml while a Codex unit of src/** (its own sandbox, workdir the
    project root) is mid-turn.  Its sandbox writes src/ only, so the change is nobody's violation."""
    from supervisor.adapters.base import Sandbox
    from supervisor.scope.guard import confined_permits

    root = tmp_path
    (root / "src").mkdir()
    (root / "etc").mkdir()
    codex = Sandbox(mode="workspace-write", bypassed=False, fenced=False, writable=(str(root / "src"),))
    unit = cand("cx", "", ["src/**"], busy=True)
    assert attribute("etc/agentd.toml", [unit]).unit == "cx"  # unconfined, the busy unit is the only suspect
    unit.permits = confined_permits(root, sandbox=codex)
    got = attribute("etc/agentd.toml", [unit])
    assert got.unit is None and not got.suspect and "fences" in got.why
    assert attribute("src/a.py", [unit]).unit == "cx"  # where it can write, it is still the one
    # what is not confinement: a bypassed sandbox, one the person set in [agent] command
    assert confined_permits(root, sandbox=Sandbox("bypassed", True, False, writable=(str(root / "src"),))) is None
    assert confined_permits(root, sandbox=Sandbox("as [agent] command says", False, False)) is None
    # Claude Code's acceptEdits also writes its workdir
    claude = confined_permits(root, sandbox=Sandbox("acceptEdits", False, False, writable=(str(root / "src"),)),
                              workdir=root / "etc")
    assert claude("etc/agentd.toml") and claude("src/a.py") and not claude("docs/x.md")


def test_writable_paths_are_allowed_like_the_scope() -> None:
    c = cand("web", "", ["web/**"], busy=True)
    c.writable = ["build"]
    assert check("build/out.js", c.allowed_paths, c.forbid, []) is None
    assert check("other/x", c.allowed_paths, c.forbid, []) is not None
    assert cand("all", "", []).allowed_paths == []  # an empty scope stays unrestricted


def test_check() -> None:
    assert check("src/a.py", ["src/**"], [], []) is None
    assert check("anything", [], [], []) is None  # empty scope: no restriction
    v = check("db/x.sql", ["src/**"], [], [])
    assert isinstance(v, Violation) and v.rule == 'outside scope: [scope] paths = ["src/**"]' and v.kind == "scope"
    v = check("src/migrations/1.sql", ["src/**"], ["src/migrations/**"], [])
    assert v is not None and v.rule == 'forbidden by [scope] forbid = "src/migrations/**"'
    v = check("src/gen/a.py", ["src/**"], [], ["src/gen"])
    assert v is not None and v.rule == "forbidden by constraints.md: forbid: src/gen" and v.kind == "constraints"
    assert check("src/a.py", ["src/**"], [""], []) is None  # a blank glob forbids nothing
    assert check("lib/a.py", ["src/*.py", "lib"], [], []) is None


@dataclass
class Scope:
    paths: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()


def test_overlaps() -> None:
    files = ["src/api/a.py", "src/web/b.ts", "shared/types.ts", "README.md"]
    api, web = Scope(("src/api/**", "shared/**")), Scope(("src/web/**", "shared/**"))
    assert overlaps(api, web, files) == "shared/types.ts"
    assert overlaps(Scope(("src/api/**",)), web, files) is None
    # shared by both: not an overlap
    api_s, web_s = Scope(api.paths, shared=("shared/**",)), Scope(web.paths, shared=("shared/**",))
    assert overlaps(api_s, web_s, files) is None
    # shared by one only: still an overlap
    assert overlaps(api_s, web, files) == "shared/types.ts"
    # no project file shows it: a synthetic example
    assert overlaps(Scope(("src/**",)), Scope(("src/api",)), []) == "src/api"
    assert overlaps(Scope(("**/*.py",)), Scope(("tools",)), []) == "tools/x.py"
    assert overlaps(Scope(("db/*.sql",)), Scope(("db/**",)), []) == "db/x.sql"
    assert overlaps(Scope(("src/**",)), Scope(("tests/**",)), []) is None
    assert overlaps(Scope(("src/*.py",)), Scope(("src/*.ts",)), []) is None
    # an empty scope is the whole project
    assert overlaps(Scope(), Scope(("docs/**",)), []) == "docs/x"
    assert overlaps(Scope(), Scope(("docs/**",)), ["docs/a.md"]) == "docs/a.md"
    # a forbidden glob takes the path out of the writable scope
    assert overlaps(Scope(("src/**",), forbid=("src/web/**",)), web, files) is None


# --------------------------------------------------------------------------- revert


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "db").mkdir()
    (root / "db" / "schema.sql").write_bytes(b"create table t;\r\n\x00\xff binary too\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def test_revert_a_tracked_file_restores_its_bytes_and_mode(repo: Path, tmp_path: Path) -> None:
    q = tmp_path / "quarantine"
    original = (repo / "db" / "schema.sql").read_bytes()
    (repo / "db" / "schema.sql").write_bytes(b"drop table t;\n")
    (repo / "run.sh").write_bytes(b"rm -rf /\n")
    msg = revert(repo, "db/schema.sql", None, q)
    assert (repo / "db" / "schema.sql").read_bytes() == original
    assert "restored from HEAD" in msg
    kept = list(q.rglob("schema.sql"))
    assert [k.read_bytes() for k in kept] == [b"drop table t;\n"]  # the agent's version is kept
    revert(repo, "run.sh", None, q)
    assert (repo / "run.sh").read_bytes() == b"#!/bin/sh\necho hi\n"
    assert (repo / "run.sh").stat().st_mode & 0o777 == 0o755
    assert "nothing to do" in revert(repo, "run.sh", None, q)
    assert not [p for p in (repo / "db").iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_revert_a_deleted_tracked_file(repo: Path, tmp_path: Path) -> None:
    (repo / "run.sh").unlink()
    (repo / "db" / "schema.sql").unlink()
    (repo / "db").rmdir()
    assert "deleted file restored" in revert(repo, "db/schema.sql", None, tmp_path / "q")
    assert (repo / "db" / "schema.sql").read_bytes().startswith(b"create table t;\r\n\x00")
    revert(repo, "run.sh", None, tmp_path / "q")
    assert os.access(repo / "run.sh", os.X_OK)


def test_revert_an_untracked_file_from_the_snapshot_blob(repo: Path, tmp_path: Path) -> None:
    notes = repo / "notes.txt"
    notes.write_bytes(b"version one\r\n")
    snap = {"id": "snapshot-003", "vcs": "git", "files": scope_hashes(repo, ["notes.txt"]).files}
    notes.write_bytes(b"overwritten\n")
    msg = revert(repo, "notes.txt", snap, tmp_path / "q")
    assert notes.read_bytes() == b"version one\r\n"
    assert "snapshot-003" in msg


def test_revert_quarantines_a_new_file(repo: Path, tmp_path: Path) -> None:
    q = tmp_path / "q"
    new = repo / "db" / "new.sql"
    new.write_bytes(b"precious\n")
    msg = revert(repo, "db/new.sql", {"files": {}}, q)
    assert not new.exists()
    moved = list(q.rglob("new.sql"))
    assert len(moved) == 1 and moved[0].read_bytes() == b"precious\n" and moved[0].parts[-2:] == ("db", "new.sql")
    assert str(moved[0]) in msg
    assert "nothing to revert" in revert(repo, "db/new.sql", None, q)
    new.write_bytes(b"again\n")  # a second quarantine at the same second does not overwrite the first
    revert(repo, "db/new.sql", None, q)
    assert sorted(p.read_bytes() for p in q.rglob("new.sql")) == [b"again\n", b"precious\n"]


def test_revert_outside_git_quarantines(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "f").write_text("x")
    assert "moved to" in revert(root, "f", None, tmp_path / "q")
    assert not (root / "f").exists()


def test_revert_refuses_paths_outside_the_project(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    for bad in ("../x", "/etc/passwd", "", "link/file"):
        with pytest.raises(ValueError):
            revert(repo, bad, None, tmp_path / "q")


def test_content_digest(tmp_path: Path) -> None:
    f = tmp_path / "f"
    assert content_digest(f) == "absent"
    f.write_bytes(b"one")
    d1 = content_digest(f)
    f.write_bytes(b"two")
    assert content_digest(f) != d1 and d1.startswith("sha256:")
    (tmp_path / "l").symlink_to("f")
    assert content_digest(tmp_path / "l") == "symlink:f"


def test_the_event_of_a_revert_is_recognisable(repo: Path, tmp_path: Path) -> None:
    seen = Seen()
    digests: dict[str, str] = {}

    def on_change(rel: str) -> None:
        digests[rel] = content_digest(repo / rel)
        seen(rel)

    with ChangeWatcher(repo, on_change):
        (repo / "db" / "schema.sql").write_bytes(b"vandalised")
        seen.wait_for("db/schema.sql")
        revert(repo, "db/schema.sql", None, tmp_path / "q")
        after = content_digest(repo / "db" / "schema.sql")
        with seen.cond:
            assert seen.cond.wait_for(lambda: seen.calls.count("db/schema.sql") == 2, DEADLINE)
        assert digests["db/schema.sql"] == after  # the daemon ignores this one
        assert not [c for c in seen.calls if TEMP_PREFIX in c]
