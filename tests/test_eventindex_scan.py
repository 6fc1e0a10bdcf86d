"""The index's pass looks at the open transcripts only, and forgets pruned ones (issue 31 §3).

A crash-looping unit leaves thousands of transcripts; a pass must not look at (nor hold) every one of them,
yet it must see every new session, every byte an open one grows by, and every session pruned from disk.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from supervisor.eventindex import EventIndex, default_db
from supervisor.eventindex.scan import FULL_EVERY, NEWEST, SETTLE, TranscriptScan
from supervisor.eventindex.turns import marker_for
from supervisor.memory import init_store

FAKE = marker_for("generic", "fake> $")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    init_store(root)
    return root


def session_id(n: int) -> str:
    return f"20261201T10{n // 60:02d}{n % 60:02d}.000000-aaaaaa"


def write(root: Path, unit: str, n: int, text: str, age: float = 0.0) -> Path:
    path = root / ".agentd" / "transcripts" / unit / f"{session_id(n)}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(text)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))
    return path


def index(root: Path, clock: Clock) -> EventIndex:
    ix = EventIndex(default_db(root / ".agentd"), root, root / ".agentd", markers=lambda unit: FAKE, live=True)
    ix._scan = TranscriptScan(clock)
    return ix


def hits(ix: EventIndex, word: str) -> list[str]:
    return sorted(h.path.split("/")[-1] for h in ix.search([word], limit=100))


def test_a_pass_looks_at_the_open_transcripts_only(proj: Path) -> None:
    clock = Clock()
    for n in range(40):  # old sessions, all ended long ago
        write(proj, "loop", n, f"fake> run {n}\ncrash number{n:02d}\n", age=SETTLE * 10)
    ix = index(proj, clock)
    ix.update()  # the first pass lists and reads everything
    assert len(hits(ix, "crash")) == 40
    clock.now += 1
    ix.update()  # unchanged and old: settled, no longer looked at
    assert ix._scan.looked_at() == NEWEST
    write(proj, "loop", 40, "fake> run 40\nanother crash\n")  # a new session: the directory changed
    clock.now += 1
    ix.update()
    assert hits(ix, "another") == [f"{session_id(40)}.txt"]
    assert ix._scan.looked_at() <= NEWEST + 1
    write(proj, "loop", 40, "grown later: needle\n")  # the open one grows
    clock.now += 1
    ix.update()
    assert hits(ix, "needle") == [f"{session_id(40)}.txt"]


def test_pruned_sessions_are_forgotten_without_a_full_pass(proj: Path) -> None:
    clock = Clock()
    paths = [write(proj, "loop", n, f"fake> run {n}\nkeepme{n:02d} output\n", age=SETTLE * 10) for n in range(10)]
    ix = index(proj, clock)
    ix.update()
    clock.now += 1
    ix.update()
    assert len(hits(ix, "keepme")) == 10
    for path in paths[:6]:  # retention removed the six oldest
        path.unlink()
    clock.now += 1
    result = ix.update()
    assert not ix._scan.full and result.files == 6
    assert hits(ix, "keepme") == sorted(p.name for p in paths[6:])
    assert ix.conn.execute("SELECT count(*) FROM sources WHERE kind = 'transcript'").fetchone()[0] == 4


def test_a_full_pass_still_sees_what_changed_behind_the_scan(proj: Path) -> None:
    """An old transcript changed in place (by hand, by another program) is seen at the next full pass."""
    clock = Clock()
    paths = [write(proj, "loop", n, f"fake> run {n}\nold output\n", age=SETTLE * 10) for n in range(5)]
    ix = index(proj, clock)
    ix.update()
    clock.now += 1
    ix.update()
    with open(paths[0], "a") as f:
        f.write("fake> late\nlatecomer here\n")
    t = time.time() - SETTLE * 10
    os.utime(paths[0], (t, t))
    os.utime(paths[0].parent, (t, t))  # nothing in the directory shows it
    clock.now += 1
    ix.update()
    assert hits(ix, "latecomer") == []
    clock.now += FULL_EVERY
    ix.update()
    assert hits(ix, "latecomer") == [paths[0].name]


def test_a_whole_unit_directory_removed_is_forgotten(proj: Path) -> None:
    clock = Clock()
    write(proj, "gone", 1, "fake> x\nvanishing words\n", age=SETTLE * 10)
    write(proj, "stays", 1, "fake> y\nstaying words\n", age=SETTLE * 10)
    ix = index(proj, clock)
    ix.update()
    for f in (proj / ".agentd" / "transcripts" / "gone").iterdir():
        f.unlink()
    (proj / ".agentd" / "transcripts" / "gone").rmdir()
    clock.now += 1
    ix.update()
    assert hits(ix, "vanishing") == [] and len(hits(ix, "staying")) == 1
