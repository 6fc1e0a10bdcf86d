"""Re-attacks on the memory channel (issue 25): what a hostile agent inside its fence might make the daemon do
for it through its inbox, each a test that fails if the daemon does it.

The daemon applies an agent's request outside the agent's fence, where agentd's state directory is not
hidden: a link the agent made in its scope to that directory must not let a fact or a snapshot read it (the
worker applies requests in the agent's view, state hidden), and a reply the daemon writes into the inbox
replaces whatever the agent planted at its name rather than writing through it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

from supervisor.daemon.inbox import Inbox
from supervisor.durable import atomic_write
from supervisor.memory.channel import encode_request, ensure_inbox
from supervisor.memory.scaffold import init_store
from tests.conftest import Project, git

TOKEN = "TOKEN-0123456789abcdef\n"


def _spec(module: str, paths: tuple[str, ...]) -> SimpleNamespace:
    return SimpleNamespace(module=module, scope=SimpleNamespace(paths=paths), agent=SimpleNamespace(env={}))


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A project whose unit ``a`` (scope a/**) linked a directory of its scope to agentd's state directory."""
    root = tmp_path / "proj"
    (root / "a").mkdir(parents=True)
    git(root.parent, "init", "-q", str(root))
    init_store(root)
    state = root / ".agentd"
    state.mkdir()
    (state / "web-token").write_text(TOKEN)
    (root / "a" / "state").symlink_to("../.agentd")  # what the fenced agent may do in its own scope
    (root / "a" / "real.py").write_text("x = 1\n")
    return root, state, ensure_inbox(state, "a")


def _ask(root: Path, state: Path, box: Path, ident: str, op: str, args: dict[str, object]) -> dict[str, object]:
    atomic_write(box / f"{ident}.req", encode_request(op, args))
    assert Inbox(root, state, lambda: {"a": _spec("a", ("a/**",))}).scan() == 1
    return json.loads((box / f"{ident}.reply").read_text())


def test_a_fact_cannot_cite_agentds_state_through_a_linked_directory(tmp_path: Path) -> None:
    """A fact's line hash is the daemon's read of a file: through a/state/ it would hash the dashboard token
    (an oracle for what the agent cannot read) into .agent/facts, which the agent reads."""
    import hashlib

    root, state, box = _project(tmp_path)
    reply = _ask(root, state, box, "00000000000000e1", "fact-add", {"text": "t", "source": "a/state/web-token:1"})
    assert not reply["ok"] and "a/state/web-token" in str(reply["text"]), reply
    token_hash = hashlib.sha256(TOKEN.strip().encode()).hexdigest()[:12]
    facts = "".join(p.read_text() for p in (root / ".agent").rglob("*") if p.is_file())
    assert token_hash not in facts
    ok = _ask(root, state, box, "00000000000000e2", "fact-add", {"text": "x is one", "source": "a/real.py:1"})
    assert ok["ok"], ok  # a plain file of the scope still works


def test_a_decision_cannot_snapshot_agentds_state_through_a_linked_directory(tmp_path: Path) -> None:
    root, state, box = _project(tmp_path)
    token_blob = subprocess.run(["git", "hash-object", str(state / "web-token")], capture_output=True, text=True,
                                timeout=30).stdout.strip()
    reply = _ask(root, state, box, "00000000000000e3", "decide",
                 {"text": "t", "why": "because x, so y", "files": ["a/state/web-token"]})
    snapshots = "".join(p.read_text() for p in (root / ".agent" / "snapshots").glob("*.json")) \
        if (root / ".agent" / "snapshots").is_dir() else ""
    assert token_blob not in snapshots, reply
    assert subprocess.run(["git", "cat-file", "-e", token_blob], cwd=root, capture_output=True,
                          timeout=30).returncode != 0


def test_a_reply_is_never_written_through_a_link_the_agent_planted(tmp_path: Path) -> None:
    """The agent names its request, so it knows where the reply goes: a link there to a person's file (or a
    unit file) must be replaced, never written through."""
    root, state, box = _project(tmp_path)
    (root / "units").mkdir()
    unit_file = root / "units" / "b.toml"
    unit_file.write_text("[agent]\ncommand = [\"codex\"]\n")
    (box / "00000000000000e4.reply").symlink_to(unit_file)
    reply = _ask(root, state, box, "00000000000000e4", "note", {"text": "hello", "kind": "confirmed"})
    assert reply["ok"], reply
    assert unit_file.read_text() == "[agent]\ncommand = [\"codex\"]\n"
    assert not (box / "00000000000000e4.reply").is_symlink()


def test_a_fifo_a_link_or_a_huge_file_as_a_request_never_holds_the_daemon(tmp_path: Path) -> None:
    """What the agent may leave in its inbox under a request's name: a FIFO (a read would block the daemon), a
    link to a person's file (read, then unlinked: the daemon must neither read nor delete through it), a sparse
    file of 1 GiB (read whole, it would cost the daemon its memory)."""
    import os

    root, state, box = _project(tmp_path)
    person = root / "units" / "b.toml"
    person.parent.mkdir()
    person.write_text('[agent]\ncommand = ["codex"]\n')
    os.mkfifo(box / "00000000000000f1.req")
    (box / "00000000000000f2.req").symlink_to(person)
    with (box / "00000000000000f3.req").open("wb") as huge:
        huge.truncate(1 << 30)
    inbox = Inbox(root, state, lambda: {"a": _spec("a", ("a/**",))})
    assert inbox.scan() == 1  # only the regular file is a request; the FIFO and the link are left alone
    reply = json.loads((box / "00000000000000f3.reply").read_text())
    assert not reply["ok"] and "at most 65536" in reply["text"], reply
    assert person.read_text() == '[agent]\ncommand = ["codex"]\n' and (box / "00000000000000f2.req").is_symlink()
    assert not (box / "00000000000000f1.reply").exists() and not (box / "00000000000000f2.reply").exists()


def test_a_whole_project_agent_cannot_change_the_persons_configuration(project: Project) -> None:
    """An agent whose scope is the whole project tries to rewrite what agentd runs: its own and another unit's
    file, a new unit, the settings, a plan, the constraints; and to move units/ away.  All fail; nothing changes.
    (Before: plans/ was writable, and a plan's [notify] command and checks run outside the agent's fence.)"""
    from tests.security.test_agent_memory import shell

    root = project.root
    git(root.parent, "init", "-q", str(root))
    project.agentd("init")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "agentd.toml").write_text("# the person's settings\n")
    (root / "plans").mkdir()
    (root / "plans" / "night.toml").write_text("# the person's plan\n")
    project.fake_unit("a")  # no [scope] paths: the whole project
    project.fake_unit("b", scope='paths = ["b/**"]')
    before = {p: p.read_bytes() for p in (root / "units" / "a.toml", root / "units" / "b.toml",
                                          root / "etc" / "agentd.toml", root / "plans" / "night.toml",
                                          root / ".agent" / "constraints.md")}
    project.agentd("start")
    assert project.wait_state("a", "running")["scope"].startswith("fenced (Landlock")
    tries = " ".join(f"echo 'command = [\"sh\"]' >> {p.relative_to(root)} || echo refused-{n};"
                     for n, p in enumerate(before))
    said = shell(project, "a", f"{tries} echo x > units/evil.toml || echo refused-new; "
                               f"mv units units.old || echo refused-move; echo x > a-wrote.txt && echo wrote-own")
    assert all(f"refused-{n}" in said for n in range(len(before))), said
    assert "refused-new" in said and "refused-move" in said and "wrote-own" in said, said  # its scope still works
    assert {p: p.read_bytes() for p in before} == before
    assert not (root / "units" / "evil.toml").exists() and (root / "units").is_dir()


def test_a_settings_file_the_person_has_not_written_cannot_be_made_by_an_agent(project: Project) -> None:
    """Without etc/agentd.toml an agent of the whole project would write one ([notify] command = a shell line),
    or a scheduled plan: the next daemon would run it outside every fence.  etc/ and plans/ are made and kept
    read-only to it."""
    from tests.security.test_agent_memory import shell

    root = project.root
    git(root.parent, "init", "-q", str(root))
    project.agentd("init")
    import shutil

    shutil.rmtree(root / "etc", ignore_errors=True)  # neither etc/ nor plans/: a new project
    shutil.rmtree(root / "plans", ignore_errors=True)
    project.fake_unit("a")
    project.agentd("start")
    assert project.wait_state("a", "running")["scope"].startswith("fenced (Landlock")
    said = shell(project, "a", "mkdir -p etc plans; "
                               "printf '[notify]\\ncommand = [\"sh\", \"-c\", \"id\"]\\n' > etc/agentd.toml "
                               "|| echo refused-settings; echo '[schedule]' > plans/nightly.toml || echo refused-plan")
    assert "refused-settings" in said and not (root / "etc" / "agentd.toml").exists(), said
    assert "refused-plan" in said and not (root / "plans" / "nightly.toml").exists(), said


def test_what_of_the_persons_configuration_is_read_only(tmp_path: Path) -> None:
    from supervisor.adapters.confine import protected

    units, etc, plans = tmp_path / "units", tmp_path / "etc", tmp_path / "plans"
    etc.mkdir()
    assert protected(tmp_path, units) == [units, etc, plans]  # no settings file: none may be made
    assert protected(tmp_path, units, ["etc/**"]) == [units, etc / "agentd.toml", plans]  # the person gave etc/
    (etc / "agentd.toml").write_text("")
    assert protected(tmp_path, units, ["src/**"]) == [units, etc / "agentd.toml", plans]
