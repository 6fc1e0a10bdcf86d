"""Recording decisions: validation, epochs, tails, torn and malformed lines."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.memory import AgentPaths, LineError, record_decision
from supervisor.memory import decisions
from supervisor.memory.doctor import diagnose
from supervisor.memory.tail import all_lines, tail_lines

from .conftest import T0

WHY = "because it must be decided, so we decide"


def test_bad_why_writes_nothing(plain: Path):
    paths = AgentPaths(plain)
    before = sorted(p.name for p in paths.dir.rglob("*"))
    with pytest.raises(LineError, match="because <cause>, so <conclusion>"):
        record_decision(plain, "use X", "it is nicer", module="core")
    assert sorted(p.name for p in paths.dir.rglob("*")) == before
    assert not paths.decisions("core").exists()


def test_epoch_roll_and_latest_across_epochs(plain: Path):
    paths = AgentPaths(plain)
    for i in range(123):
        record_decision(plain, f"decision {i}", WHY, module="core", now=T0 + timedelta(minutes=i))
    assert decisions.epoch_numbers(paths, "core") == [1, 2]
    assert len(all_lines(paths.epoch("core", 1))) == 50
    assert len(all_lines(paths.decisions("core"))) == 23
    latest, bad = decisions.latest(paths, "core", 30)
    assert not bad
    assert [e.decision.decision for e in latest] == [f"decision {i}" for i in range(93, 123)]
    everything = [e for e in decisions.iter_all(paths, "core") if isinstance(e, decisions.Entry)]
    assert [e.decision.decision for e in everything] == [f"decision {i}" for i in range(123)]


def test_latest_merged_orders_by_time_then_snapshot(plain: Path):
    paths = AgentPaths(plain)
    record_decision(plain, "g1", WHY, now=T0)
    record_decision(plain, "c1", WHY, module="core", now=T0)
    record_decision(plain, "g2", WHY, now=T0 + timedelta(minutes=1))
    record_decision(plain, "c2", WHY, module="core", now=T0 + timedelta(minutes=1))
    latest, _ = decisions.latest_merged(paths, "core", 3)
    assert [e.decision.decision for e in latest] == ["c1", "g2", "c2"]


def test_torn_last_line_is_reported_and_next_append_starts_fresh(plain: Path):
    paths = AgentPaths(plain)
    record_decision(plain, "first", WHY, module="core", now=T0)
    with paths.decisions("core").open("a") as fh:
        fh.write("[2026-11-30 14:40] [arch] decision: half writ")  # crash mid-line, no newline
    latest, bad = decisions.latest(paths, "core", 5)
    assert [e.decision.decision for e in latest] == ["first"]
    assert len(bad) == 1 and bad[0].line == 2 and "torn" in bad[0].reason
    record_decision(plain, "second", WHY, module="core", now=T0)
    lines = all_lines(paths.decisions("core"))
    assert len(lines) == 3 and lines[2].text.startswith("[2026-11-30 14:32] decision: second")
    found = [f for f in diagnose(plain) if "decisions-core.log:2" in f.where]
    assert found and found[0].severity == "error"


def test_malformed_middle_line_skipped_with_line_number(plain: Path):
    paths = AgentPaths(plain)
    record_decision(plain, "a", WHY, now=T0)
    with paths.decisions(None).open("a") as fh:
        fh.write("garbage line\n")
    record_decision(plain, "b", WHY, now=T0)
    latest, bad = decisions.latest(paths, None, 5)
    assert [e.decision.decision for e in latest] == ["a", "b"]
    assert [(b.line, b.text) for b in bad] == [(2, "garbage line")]


def test_hand_written_chinese_log_is_read(plain: Path):
    paths = AgentPaths(plain)
    paths.decisions("adapters").write_text(
        "[2024-05-01 14:32] 决策：接口层采用适配器模式 | 理由：因为接口不同，所以隔离 | 影响文件：src/adapters/*.ts | 快照：snapshot-014\n",
        encoding="utf-8",
    )
    latest, bad = decisions.latest(paths, "adapters", 5)
    assert not bad and latest[0].decision.files == ("src/adapters/*.ts",)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet="ab\n", max_size=12), max_size=30), st.integers(1, 12), st.integers(1, 64))
def test_tail_lines_matches_naive_split(tmp_path_factory, chunks, count, block):
    from supervisor.memory import tail

    path = tmp_path_factory.mktemp("tail") / "f"
    data = "".join(chunks)
    path.write_text(data)
    old, tail.BLOCK = tail.BLOCK, block
    try:
        got = [r.text for r in tail_lines(path, count)]
    finally:
        tail.BLOCK = old
    want = [ln for ln in data.split("\n") if ln.strip()][-count:]
    assert got == want


class CountedReads:
    """A file object that counts the bytes read through it."""

    def __init__(self, fh) -> None:  # type: ignore[no-untyped-def]
        self.fh = fh
        self.bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.bytes += len(data)
        return data

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.fh, name)

    def __enter__(self) -> CountedReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()


def test_tail_of_huge_log_reads_only_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "big.log"
    line = "[2026-11-30 14:32] decision: x | why: because a, so b\n"
    path.write_text(line * 100_000 + "[2026-11-30 14:33] decision: last | why: because a, so b\n")
    opened: list[CountedReads] = []
    real_open = Path.open

    def counting_open(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(CountedReads(real_open(self, *args, **kwargs)))
        return opened[-1]

    monkeypatch.setattr(Path, "open", counting_open)
    got = tail_lines(path, 5)
    monkeypatch.undo()
    assert got[-1].text.endswith("because a, so b") and "last" in got[-1].text and len(got) == 5
    read = sum(f.bytes for f in opened)
    # a few blocks from the end, not the ~5.6 MB (how fast: python -m bench.micro)
    assert 0 < read <= 64 * 1024 < path.stat().st_size
