"""Epoch rolls and syncs commute: the interleavings that made ``decisions.log`` conflict, forced one by one.

A roll used to rename the live log to the next epoch.  A clone that rolled
and synced while another appended gave git a rename (the other clone's new
lines moved into the epoch) or, when the two logs differed enough, a
modify/delete conflict on ``decisions.log``, where keeping one side's file
dropped the other side's decisions.  Now a roll copies the block to the epoch
and cuts it from the top of the live log; these tests force each interleaving
with real git and check that nothing conflicts and nothing is lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.memory import AgentPaths, decisions, record_decision
from supervisor.memory.decisions import EPOCH_SIZE
from supervisor.memory.sync import SyncResult, sync_memory
from supervisor.memory.tail import all_lines

from .conftest import T0, family_lines, git, no_conflict_markers

WHY = "because two hosts decide at once, so nothing may be lost"


def _decide(root: Path, tag: str, count: int) -> list[str]:
    return [record_decision(root, f"{tag} {i}", WHY, now=T0).line for i in range(count)]


def _sync(*roots: Path) -> list[SyncResult]:
    return [sync_memory(root) for root in roots]


def _assert_whole_and_alike(a: Path, b: Path, expected: list[str]) -> None:
    """Both clones hold every expected line once, in the same files with the same bytes, and no conflict markers."""
    for root in (a, b):
        lines = family_lines(root)
        assert len(lines) == len(set(lines)), [ln for ln in lines if lines.count(ln) > 1][:3]
        assert sorted(lines) == sorted(expected)
        no_conflict_markers(root)
    names = sorted(p.name for p in (a / ".agent").glob("decisions*.log"))
    assert names == sorted(p.name for p in (b / ".agent").glob("decisions*.log"))
    for name in names:
        assert (a / ".agent" / name).read_bytes() == (b / ".agent" / name).read_bytes(), name


# The roll itself ---------------------------------------------------------------------


def test_a_roll_copies_the_top_block_and_keeps_the_live_log(plain: Path):
    paths = AgentPaths(plain)
    lines = _decide(plain, "d", EPOCH_SIZE - 1)
    assert decisions.epoch_numbers(paths, None) == []
    live = paths.decisions(None)
    inode = live.stat().st_ino
    lines += _decide(plain, "d", 1)
    assert decisions.epoch_numbers(paths, None) == [1]
    assert paths.epoch(None, 1).read_text() == "".join(ln + "\n" for ln in lines)
    assert live.exists() and live.read_bytes() == b""  # rewritten, not renamed away
    assert live.stat().st_ino != inode  # (atomically: a new file under the same name)
    more = _decide(plain, "e", 3)
    assert live.read_text() == "".join(ln + "\n" for ln in more)


def test_a_live_log_longer_than_an_epoch_rolls_block_by_block_in_order(plain: Path):
    """What a merge of two clones leaves: more than EPOCH_SIZE lines in the live log."""
    paths = AgentPaths(plain)
    merged = _decide(plain, "m", 40)
    stray = [ln.replace("m ", "n ", 1) for ln in merged] + [ln.replace("m ", "o ", 1) for ln in merged]
    with paths.decisions(None).open("a") as fh:
        fh.write("".join(ln + "\n" for ln in stray))  # 120 lines, as a union merge writes them
    last = _decide(plain, "d", 1)
    assert decisions.epoch_numbers(paths, None) == [1, 2]
    everything = merged + stray + last
    assert [raw.text for raw in all_lines(paths.epoch(None, 1))] == everything[:50]
    assert [raw.text for raw in all_lines(paths.epoch(None, 2))] == everything[50:100]
    assert [raw.text for raw in all_lines(paths.decisions(None))] == everything[100:]


def test_a_roll_cut_short_after_writing_its_epoch_is_not_repeated(plain: Path):
    paths = AgentPaths(plain)
    block = _decide(plain, "d", EPOCH_SIZE)
    # killed between the epoch write and the live log's rewrite: the block is in both files
    paths.decisions(None).write_text("".join(ln + "\n" for ln in block))
    assert len(list(decisions.iter_all(paths, None))) == EPOCH_SIZE  # read once meanwhile
    after = _decide(plain, "e", 1)
    assert decisions.epoch_numbers(paths, None) == [1]
    assert [raw.text for raw in all_lines(paths.decisions(None))] == after
    assert [raw.text for raw in all_lines(paths.epoch(None, 1))] == block


# Rolls between syncs --------------------------------------------------------------


@pytest.mark.parametrize("after_roll", [0, 2], ids=["live-log-emptied", "appended-after-the-roll"])
@pytest.mark.parametrize("first", ["roller", "appender"])
def test_a_roll_on_one_side_between_the_other_sides_syncs(clones, first: str, after_roll: int):
    """A rolls 10 shared + 40 own lines (too different from the shared log for git to see a rename), B appends."""
    _, a, b = clones
    shared = _decide(a, "base", 10)
    _sync(a, b)
    own = _decide(a, "A", EPOCH_SIZE - 10) + _decide(a, "A after", after_roll)
    assert decisions.epoch_numbers(AgentPaths(a), None) == [1]
    theirs = _decide(b, "B", 3)
    order = (a, b, a) if first == "roller" else (b, a, b)
    results = _sync(*order)
    assert [r.kept_ours for r in results] == [(), (), ()]
    assert results[1].received == (len(own) if first == "roller" else len(theirs))
    _assert_whole_and_alike(a, b, shared + own + theirs)


@pytest.mark.parametrize("shared_count", [10, 45])
@pytest.mark.parametrize("b_extra", [0, EPOCH_SIZE], ids=["one-epoch-each", "b-rolls-two"])
def test_both_sides_roll_different_blocks_into_the_same_epoch_number(clones, shared_count: int, b_extra: int):
    _, a, b = clones
    shared = _decide(a, "base", shared_count)
    _sync(a, b)
    mine = _decide(a, "A", EPOCH_SIZE - shared_count + 2)
    theirs = _decide(b, "B", EPOCH_SIZE - shared_count + 2 + b_extra)
    assert decisions.epoch_numbers(AgentPaths(a), None) == [1]
    assert decisions.epoch_numbers(AgentPaths(b), None) == ([1, 2] if b_extra else [1])
    assert paths_differ(a, b, "decisions-epoch-1.log")
    results = _sync(a, b, a)
    assert [r.kept_ours for r in results] == [(), (), ()]
    _assert_whole_and_alike(a, b, shared + mine + theirs)
    # and both go on deciding, rolling and syncing without trouble
    more = _decide(a, "A2", EPOCH_SIZE) + _decide(b, "B2", 7)
    results = _sync(b, a, b)
    assert [r.kept_ours for r in results] == [(), (), ()]
    _assert_whole_and_alike(a, b, shared + mine + theirs + more)


def paths_differ(a: Path, b: Path, name: str) -> bool:
    return (a / ".agent" / name).read_bytes() != (b / ".agent" / name).read_bytes()


def test_a_plain_git_merge_of_a_roll_and_appends_is_clean_and_read_once(clones):
    """The working-branch route: .agent/ committed with the code and merged by `git pull`."""
    _, a, b = clones
    shared = _decide(a, "base", 10)
    git(a, "add", ".agent")
    git(a, "commit", "-q", "-m", "base")
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    own = _decide(a, "A", 40)  # rolls A's live log
    git(a, "add", "-A", ".agent")
    git(a, "commit", "-q", "-m", "A")
    git(a, "push", "-q", "origin", "main")
    theirs = _decide(b, "B", 3)
    git(b, "add", "-A", ".agent")
    git(b, "commit", "-q", "-m", "B")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")  # raises on a conflict
    assert git(b, "diff", "--name-only", "--diff-filter=U") == ""
    no_conflict_markers(b)
    paths = AgentPaths(b)
    raw = family_lines(b)
    assert len(raw) > len(set(raw))  # the plain merge left the rolled lines twice ...
    read = [e.decision.decision for e in decisions.iter_all(paths, None) if isinstance(e, decisions.Entry)]
    assert sorted(read) == sorted(f"{t} {i}" for t, n in (("base", 10), ("A", 40), ("B", 3)) for i in range(n))
    newest = decisions.latest(paths, None, 60)[0]  # ... and readers count each once
    assert sorted(e.decision.decision for e in newest) == sorted(read)
    assert sorted(set(raw)) == sorted(shared + own + theirs)
