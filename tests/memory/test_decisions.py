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


# ------------------------------------------------------------------ each rule of the logs at its edge
def test_a_decision_is_built_from_normalised_text_files_and_tags():
    d = decisions.build_decision("  use\n X  now ", " because  a,\tso b ", tags=["arch", "arch", "t2"],
                                 files=["a.py,b.py", " c.py ", "d.py,,"], alternatives=" one\n two ", now=T0)
    assert (d.time, d.decision, d.why, d.tags) == ("2026-11-30 14:32", "use X now", "because a, so b", ("arch", "t2"))
    assert d.files == ("a.py", "b.py", "c.py", "d.py") and d.alternatives == "one two" and d.snapshot == ""
    with pytest.raises(LineError, match="decision text is empty"):
        decisions.build_decision(" \n ", WHY, now=T0)
    with pytest.raises(LineError, match="is not usable"):
        decisions.build_decision("x", WHY, tags=["no spaces allowed"], now=T0)


def test_a_recorded_decision_has_its_snapshot_and_names_the_one_before(plain: Path):
    from supervisor.memory import snapshots

    paths = AgentPaths(plain)
    first = record_decision(plain, "one", WHY, module="core", scope_paths=[" ", "src"], now=T0)
    assert first.path == paths.decisions("core") and first.rolled_to is None
    assert first.line == f"[2026-11-30 14:32] decision: one | why: {WHY} | snapshot: {first.snapshot}"
    data = snapshots.load(paths, first.snapshot)
    assert data is not None and data["scope"] == ["src"] and data["previous"] is None and data["decision"] == "one"
    second = record_decision(plain, "two", WHY, module="core", now=T0)
    assert second.snapshot > first.snapshot and snapshots.load(paths, second.snapshot)["previous"] == first.snapshot
    # without this clone's note (a fresh clone), the log's own tail names the one before
    paths.state.unlink()
    third = record_decision(plain, "three", WHY, module="core", now=T0)
    assert snapshots.load(paths, third.snapshot)["previous"] == second.snapshot
    # the note wins over the tail: a line merged in from another host is not this clone's previous decision
    other = record_decision(plain, "other host", WHY, module="web", now=T0).line.replace("other host", "merged")
    with paths.decisions("core").open("a") as fh:
        fh.write(other + "\n")
    fourth = record_decision(plain, "four", WHY, module="core", now=T0)
    assert snapshots.load(paths, fourth.snapshot)["previous"] == third.snapshot


def test_a_store_is_needed_and_a_used_snapshot_id_is_never_handed_out_again(plain: Path, tmp_path: Path):
    from supervisor.memory import StoreError
    from supervisor.memory.ids import ulid

    with pytest.raises(StoreError, match="agentd init"):
        record_decision(tmp_path / "nowhere", "x", WHY, now=T0)
    paths = AgentPaths(plain)
    taken = f"snapshot-{ulid(T0)}"
    state = {"last_snapshot": taken}
    paths.state.parent.mkdir(parents=True, exist_ok=True)
    paths.state.write_text(__import__("json").dumps(state))
    rec = record_decision(plain, "x", WHY, now=T0)
    assert rec.snapshot > taken
    legacy = {"last_snapshot": "14"}  # not a ULID id: no floor
    paths.state.write_text(__import__("json").dumps(legacy))
    assert record_decision(plain, "y", WHY, now=T0).snapshot.startswith("snapshot-")


def test_exactly_fifty_decisions_roll_and_the_roll_is_returned(plain: Path):
    paths = AgentPaths(plain)
    for i in range(49):
        assert record_decision(plain, f"d{i}", WHY, now=T0).rolled_to is None
    rec = record_decision(plain, "d49", WHY, now=T0)
    assert rec.rolled_to == paths.epoch(None, 1)
    assert len(all_lines(paths.epoch(None, 1))) == 50 and paths.decisions(None).read_text() == ""
    assert decisions.log_modules(paths) == [None]  # a global epoch is not a module called "epoch-1"


def test_a_roll_cut_short_is_finished_by_the_next_without_a_second_copy(plain: Path):
    paths = AgentPaths(plain)
    for i in range(49):
        record_decision(plain, f"d{i}", WHY, now=T0)
    block = paths.decisions(None).read_bytes()
    record_decision(plain, "d49", WHY, now=T0)  # rolls d0..d49 into epoch 1
    # a roll killed between its writes: the live log still holds the block the epoch holds
    epoch = paths.epoch(None, 1).read_bytes()
    paths.decisions(None).write_bytes(epoch)
    assert block == epoch[: len(block)]
    for i in range(50, 99):
        record_decision(plain, f"d{i}", WHY, now=T0)
    rec = record_decision(plain, "d99", WHY, now=T0)
    assert rec.rolled_to == paths.epoch(None, 2)
    assert decisions.epoch_numbers(paths, None) == [1, 2] and paths.epoch(None, 1).read_bytes() == epoch
    names = [e.decision.decision for e in decisions.iter_all(paths, None) if isinstance(e, decisions.Entry)]
    assert names == [f"d{i}" for i in range(100)]


def test_end_of_line():
    assert decisions._end_of_line(b"a\nbc\nd\n", 1) == 2
    assert decisions._end_of_line(b"a\nbc\nd\n", 2) == 5
    assert decisions._end_of_line(b"\n\n", 2) == 2


def test_a_stale_epoch_cache_is_not_trusted(plain: Path):
    import json

    paths = AgentPaths(plain)
    for i in range(110):
        record_decision(plain, f"d{i}", WHY, module="core", now=T0)
    assert decisions._latest_epoch(paths, "core") == 2
    state = json.loads(paths.state.read_text())
    for cached in (1, 3, 0, -1, "2"):  # another clone rolled epoch 2; an epoch that is not there; nonsense
        state["epochs"] = {"decisions-core": cached}
        paths.state.write_text(json.dumps(state))
        assert decisions._latest_epoch(paths, "core") == 2, cached
    paths.state.write_text(json.dumps({}))
    assert decisions._latest_epoch(paths, None) == 0 and decisions.epoch_numbers(AgentPaths(plain / "nope"), None) == []


def test_latest_walks_back_through_epochs_only_as_far_as_needed(plain: Path):
    paths = AgentPaths(plain)
    for i in range(120):
        record_decision(plain, f"d{i}", WHY, now=T0)
    # live: d100..d119 (20 lines); epoch 2: d50..d99; epoch 1: d0..d49
    assert [e.decision.decision for e in decisions.latest(paths, None, 20)[0]] == [f"d{i}" for i in range(100, 120)]
    got = decisions.latest(paths, None, 71)[0]
    assert [e.decision.decision for e in got] == [f"d{i}" for i in range(49, 120)]
    assert decisions.latest(paths, None, 0) == ([], []) and decisions.latest(paths, None, -1) == ([], [])
    assert len(decisions.latest(paths, None, 500)[0]) == 120


def test_a_line_seen_twice_counts_once(plain: Path):
    paths = AgentPaths(plain)
    rec = record_decision(plain, "once", WHY, now=T0)
    with paths.decisions(None).open("a") as fh:
        fh.write(rec.line + "\n" + "garbage\n" + "garbage\n")  # a union merge brought the line back
    latest, bad = decisions.latest(paths, None, 5)
    assert [e.decision.decision for e in latest] == ["once"] and len(bad) == 1
    assert [type(x).__name__ for x in decisions.iter_all(paths, None)] == ["Entry", "BadLine"]


def test_latest_merged_keeps_both_logs_bad_lines_and_nothing_for_zero(plain: Path):
    paths = AgentPaths(plain)
    record_decision(plain, "g", WHY, now=T0)
    record_decision(plain, "c", WHY, module="core", now=T0)
    with paths.decisions(None).open("a") as fh:
        fh.write("global garbage\n")
    with paths.decisions("core").open("a") as fh:
        fh.write("core garbage\n")
    entries, bad = decisions.latest_merged(paths, "core", 5)
    assert sorted(e.decision.decision for e in entries) == ["c", "g"]
    assert sorted(b.text for b in bad) == ["core garbage", "global garbage"]
    assert decisions.latest_merged(paths, "core", 0)[0] == []
    assert [b.text for b in decisions.latest_merged(paths, None, 5)[1]] == ["global garbage"]


def test_a_bad_line_describes_itself_with_its_place_and_a_short_snippet(plain: Path):
    paths = AgentPaths(plain)
    short = decisions.BadLine(paths.decisions("core"), 3, "x" * 60, "torn")
    assert short.describe(paths) == f".agent/decisions-core.log:3: torn: {'x' * 60!r}"
    long = decisions.BadLine(paths.decisions("core"), 3, "y" * 61, "torn")
    assert long.describe(paths) == f".agent/decisions-core.log:3: torn: {'y' * 57 + '...'!r}"


def test_modules_with_logs(plain: Path):

    paths = AgentPaths(plain)
    record_decision(plain, "c", WHY, module="core", now=T0)
    record_decision(plain, "w", WHY, module="web", now=T0)
    assert decisions.log_modules(paths) == [None, "core", "web"]
    assert decisions.log_modules(AgentPaths(plain / "nope")) == [None]


def test_no_alternatives_unless_given(plain: Path):
    assert decisions.build_decision("x", WHY, now=T0).alternatives == ""
    assert "alternatives" not in record_decision(plain, "x", WHY, now=T0).line


def test_a_taken_snapshot_id_is_skipped_for_the_next(plain: Path, monkeypatch: pytest.MonkeyPatch):
    paths = AgentPaths(plain)
    taken, free = "01KBN0000000000000000000A0", "01KBN0000000000000000000B0"
    paths.snapshot(f"snapshot-{taken}").parent.mkdir(parents=True, exist_ok=True)
    paths.snapshot(f"snapshot-{taken}").write_text("{}")  # e.g. left by a kill after the snapshot was written
    asked: list[str | None] = []

    def ulid(when, after=None):  # type: ignore[no-untyped-def]
        asked.append(after)
        return taken if len(asked) == 1 else free

    monkeypatch.setattr(decisions, "ulid", ulid)
    rec = record_decision(plain, "x", WHY, now=T0)
    assert rec.snapshot == f"snapshot-{free}" and asked == [None, taken]


def test_snapshots_older_than_the_newest_twenty_are_thinned(plain: Path):
    from supervisor.memory import snapshots

    paths = AgentPaths(plain)
    ids = [record_decision(plain, f"d{i}", WHY, now=T0).snapshot for i in range(snapshots.KEEP_COMPLETE + 1)]
    assert snapshots.load(paths, ids[0])["complete"] is False
    assert all(snapshots.load(paths, i)["complete"] is True for i in ids[1:])


def test_without_a_cache_the_newest_of_several_epochs_is_found(plain: Path):
    paths = AgentPaths(plain)
    for i in range(160):
        record_decision(plain, f"d{i}", WHY, now=T0)
    paths.state.unlink()
    assert decisions._latest_epoch(paths, None) == 3
    assert [e.decision.decision for e in decisions.latest_merged(paths, None, 1)[0]] == ["d159"]
