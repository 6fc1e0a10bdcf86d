"""The event layer (issue 16 section 3): turns, grams, times, the index, its thread, the CLI and the daemon."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from supervisor.config.units import load_units
from supervisor.eventindex import EventIndex, EventKind, IndexUnavailable, Reading, UnitReadings, default_db
from supervisor.eventindex.index import TAIL_QUIET
from supervisor.eventindex.indexer import EventIndexer
from supervisor.eventindex.shaping import TAIL_CHARS, TURN_CAP
from supervisor.eventindex.transcripts import marks_path
from supervisor.eventindex.turns import MAX_CHARS, Timeline, grams, marker_for, session_start, split
from supervisor.memory import append_note, init_store, record_decision
from supervisor.session.fence import Fence, FenceSpec
from supervisor.session.transcript import read_clean_at
from tests.conftest import AGENTD, Project, clean_env, wait_until

FAKE = marker_for("generic", "fake> $")
SESSION = "20261201T100000-aaaaaa"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    init_store(root)
    return root


def state(root: Path) -> Path:
    return root / ".agentd"


def transcript(root: Path, unit: str = "demo", session: str = SESSION) -> Path:
    path = state(root) / "transcripts" / unit / f"{session}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def index(root: Path) -> EventIndex:
    return EventIndex(default_db(state(root)), root, state(root), markers=lambda unit: FAKE)


def rows(ix: EventIndex) -> list[tuple[str, int, float, str]]:
    """Every event as (path, at, time, body), in order: what two indexes of the same files must agree on."""
    return ix.conn.execute("SELECT s.path, e.at, round(e.time, 3), t.body FROM events e JOIN sources s ON "
                           "s.id = e.source JOIN texts t ON t.id = e.id ORDER BY s.path, e.at").fetchall()


def grow(ix: EventIndex, path: Path, data: bytes, rng: random.Random, most: int, budgets: list[int | None]) -> None:
    """``data`` appended to ``path`` (emptied first) in random pieces of up to ``most`` bytes, cutting lines and
    characters anywhere, with an update of ``ix`` (a random budget) after each."""
    path.write_bytes(b"")
    done = 0
    while done < len(data):
        step = rng.randint(1, most)
        with open(path, "ab") as fh:
            fh.write(data[done:done + step])
        done += step
        ix.update(budget=rng.choice(budgets))


# -- turns, grams, times ----------------------------------------------------------------------------------------

def test_turns_start_at_prompt_lines_and_long_turns_are_cut_at_line_ends() -> None:
    text = "banner\nfake> run the tests\nok\n" + "x" * 30 + "\n" + "y" * 30 + "\nfake> next\n"
    parts = split(text, FAKE, max_chars=40)
    pieces = [(text[p.start:p.end], p.turn) for p in parts]
    assert pieces == [("banner\n", False), ("fake> run the tests\nok\n", True), ("x" * 30 + "\n", False),
                      ("y" * 30 + "\n", False), ("fake> next\n", True)]
    assert "".join(p for p, _ in pieces) == text
    one_long_line = split("z" * 100, FAKE, max_chars=40)
    assert [(p.start, p.end) for p in one_long_line] == [(0, 40), (40, 80), (80, 100)]


def test_prompt_lines_by_unit_kind() -> None:
    text = "out\nfake> typed text\na fake prompt\nx fake> y\n"
    assert FAKE.line_starts(text) == [4, 35]  # the prompt anywhere in the line (the final $ dropped)
    assert marker_for("generic", "^fake> $").line_starts(text) == [4]  # a leading ^ kept: at the line start
    assert marker_for("generic", r"\$").line_starts("user@host:~$ ls\nno prompt\n$ x\n") == [0, 26]
    codex = "  › fix the bug\nsee › here\n❯ x\n"
    assert marker_for("codex", None).line_starts(codex) == [0]
    assert marker_for("claude", None).line_starts(codex) == [27]
    assert marker_for("generic", None).line_starts(codex) == [0, 27]  # no prompt: either mark


def test_grams_hold_chinese_bigrams_and_two_letter_words() -> None:
    assert grams("接口层 and 适 db io_x abc") == "接口 口层 适 db io"


def test_a_turn_time_is_interpolated_between_known_points() -> None:
    start = session_start("20261201T100000-aaaaaa")
    assert start == session_start("20261201T100000.000000-aaaaaa") and session_start("nonsense") is None
    line = Timeline.build(start, [(100, start + 100.0)], 300, start + 300.0)
    assert (line.at(0), line.at(50), line.at(100), line.at(200), line.at(300)) == (
        start, start + 50.0, start + 100.0, start + 200.0, start + 300.0)


# -- the index ----------------------------------------------------------------------------------------------------

def test_a_chinese_decision_is_found_by_a_two_character_query(proj: Path) -> None:
    record_decision(proj, "接口层采用适配器模式", "因为供应商的接口不同，所以隔离它们", module="core")
    record_decision(proj, "缓存放在磁盘上", "因为内存不够，所以写文件", module="core")
    with index(proj) as ix:
        ix.update()
        hits = ix.search(["适配"])
        assert [h.kind for h in hits] == [EventKind.DECISION]
        assert "接口层采用适配器模式" in hits[0].text and hits[0].module == "core"
        assert hits[0].where(proj) == ".agent/decisions-core.log:1"
        assert [h.text for h in ix.search(["适配器模"])] == [hits[0].text]  # three and more: the trigram index
        assert ix.search(["缓存", "磁盘"])[0].text.count("缓存放在磁盘上") == 1
        assert ix.search(["适配", "磁盘"]) == []  # every word must occur


def test_an_english_turn_is_found_by_an_identifier(proj: Path) -> None:
    transcript(proj).write_text("banner\nfake> run the tests\nReading src/scope.py\n"
                                "fake> why does ScopeGuard.changed() drop events?\nlooking at it\nfake> ")
    with index(proj) as ix:
        ix.update()
        hits = ix.search(["scopeguard.changed"])
        assert len(hits) == 1 and hits[0].kind is EventKind.TURN
        assert (hits[0].unit, hits[0].session) == ("demo", SESSION)
        assert hits[0].where(proj) == f"agentd logs demo --session {SESSION} --at 48"
        assert read_clean_at(transcript(proj), hits[0].at, 2) == [
            "fake> why does ScopeGuard.changed() drop events?", "looking at it"]
        assert ix.search(["src/scope.py"])[0].at == 7


def test_a_newer_hit_ranks_above_an_equal_older_one(proj: Path) -> None:
    old = datetime(2026, 11, 1, 12, 0)
    new = datetime(2026, 11, 29, 12, 0)
    for when in (old, new):  # the same note twice: lines of the same length, only their minute differs
        append_note(proj, "the retry loop hides timeouts in fetch_remote", "confirmed", now=when)
    with index(proj) as ix:
        ix.update()
        now = datetime(2026, 11, 30, 12, 0).timestamp()
        hits = ix.search(["fetch_remote"], now=now, half_life_days=14)
        assert [h.time for h in hits] == [new.timestamp(), old.timestamp()]
        # equal relevance: the scores differ by the decay alone, 2 ** (-28 days / 14 days)
        assert hits[1].score / hits[0].score == pytest.approx(0.25, rel=1e-6)
        # a longer half-life, a smaller gap; the order stays
        longer = ix.search(["fetch_remote"], now=now, half_life_days=28)
        assert longer[1].score / longer[0].score == pytest.approx(0.5, rel=1e-6)


def test_a_torn_transcript_line_is_indexed_once_whole_after_it_ends(proj: Path) -> None:
    path = transcript(proj)
    whole = "fake> first\nplain output\nfake> deploy to 生产环境 now\n".encode()
    cut = whole.index("产".encode()) + 1  # inside a three-byte character
    path.write_bytes(whole[:cut])
    with index(proj) as ix:
        ix.update()
        assert len(ix.search(["deploy"])) == 1  # the open part is searchable already
        assert ix.search(["生产环境"]) == []
        with open(path, "ab") as fh:
            fh.write(whole[cut:] + b"fake> ")
        ix.update()
        hits = ix.search(["deploy"])
        assert len(hits) == 1 and "生产环境" in hits[0].text and "\ufffd" not in hits[0].text
        assert len(ix.search(["生产"])) == 1
        assert [r[3] for r in rows(ix)] == ["fake> first\nplain output\n", "fake> deploy to 生产环境 now\n", "fake> "]


def test_a_transcript_growing_while_indexed_gives_the_rebuilt_index(proj: Path) -> None:
    rng = random.Random(7)
    text = "".join(f"fake> task {i} 任务{i}\n" + "".join(f"line {i}.{j} ünï 编码\n" for j in range(rng.randint(0, 30)))
                   for i in range(400)).encode()
    path = transcript(proj)
    with index(proj) as ix:
        grow(ix, path, text, rng, 6000, [None, 1])
        while ix.update(budget=1).more:
            pass
        grown = rows(ix)
        assert len({r[1] for r in grown}) == len(grown) == 400  # one event per turn, none twice
        ix.reindex()
        assert rows(ix) == grown  # same events, same offsets, same times (from the marks)
    assert marks_path(path).is_file()


def test_a_flood_turn_is_indexed_as_its_head_and_tail(proj: Path) -> None:
    lines = [f"flood line {i:07d} {'x' * 60}\n" for i in range(40_000)]  # about 3 MB in one turn
    lines[2] = "the needle-at-the-start\n"
    lines[20_000] = "the needle-in-the-middle\n"
    lines[-1] = "the needle-at-the-end\n"
    transcript(proj).write_text("fake> cat big.log\n" + "".join(lines) + "fake> ")
    with index(proj) as ix:
        while ix.update(budget=1 << 20).more:
            pass
        assert [h.at for h in ix.search(["needle-at-the-start"])] == [0]  # the head: from the prompt line
        assert ix.search(["needle-in-the-middle"]) == []
        [tail] = ix.search(["needle-at-the-end"])
        indexed = sum(len(r[3].encode()) for r in rows(ix))
        assert indexed <= MAX_CHARS + TAIL_CHARS + len("fake> ") < 3 * 4000  # not 3 MB
        middle = transcript(proj).read_bytes().index(b"the needle-in-the-middle")
        assert read_clean_at(transcript(proj), middle, 1) == ["the needle-in-the-middle"]  # still in the file
        assert read_clean_at(transcript(proj), tail.at, 1)[0].startswith("flood line")  # the tail starts a line
        assert transcript(proj).stat().st_size - tail.at <= TAIL_CHARS + 100


def test_a_unit_with_full_text_keeps_every_part_up_to_the_cap(proj: Path) -> None:
    lines = [f"flood line {i:07d} {'x' * 60}\n" for i in range(40_000)]
    lines[2000] = "the needle-in-the-head-cap\n"
    lines[20_000] = "the needle-in-the-middle\n"
    lines[-1] = "the needle-at-the-end\n"
    transcript(proj).write_text("fake> cat big.log\n" + "".join(lines) + "fake> ")
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=lambda unit: Reading(FAKE, full=True)) as ix:
        while ix.update(budget=1 << 20).more:
            pass
        assert ix.search(["needle-in-the-head-cap"])  # 150 KB in: inside the cap
        assert ix.search(["needle-in-the-middle"]) == []
        assert ix.search(["needle-at-the-end"])
        indexed = sum(len(r[3].encode()) for r in rows(ix))
        assert TURN_CAP <= indexed < TURN_CAP + 3 * 4000 * 4


def test_a_run_of_repeated_lines_is_kept_once(proj: Path) -> None:
    transcript(proj).write_text("fake> pip install\n" + "Downloading wheel_cache_7 ...\n" * 100 + "done\nfake> ")
    with index(proj) as ix:
        ix.update()
        assert len(ix.search(["wheel_cache_7"])) == 1
        assert rows(ix)[0][3] == "fake> pip install\nDownloading wheel_cache_7 ... [×100]\ndone\n"
    long = "fake> pip install\n" + "Downloading wheel_cache_8 ...\n" * 1000 + "done\nfake> "
    transcript(proj, session="20261201T110000-bbbbbb").write_text(long)
    with index(proj) as ix:
        ix.update()
        head, tail, _prompt = (r[3] for r in rows(ix) if "bbbbbb" in r[0])  # a long turn: its head and its tail, each collapsed
        assert head == "fake> pip install\nDownloading wheel_cache_8 ... [×132]\n"
        assert tail.startswith("Downloading wheel_cache_8 ... [×") and tail.endswith("]\ndone\n")


def test_the_wakeup_typed_at_the_prompt_is_not_indexed_again(proj: Path) -> None:
    """Issue 26: each session's wakeup echoed on the screen was a hit of its own for every decision in it."""
    record_decision(proj, "use zstd_codec_choice for caches", "because it is fast, so we use it", module="core")
    from supervisor.continuity.wakeup import build_wakeup

    briefing = build_wakeup(proj, "core").text
    assert "zstd_codec_choice" in briefing
    for n, session in enumerate(("20261201T100000-aaaaaa", "20261201T110000-bbbbbb")):
        answer = f"working on: the cache\nReading src/cache_layer_9.py, part {n}\n"
        transcript(proj, session=session).write_text("banner\nfake> " + briefing + "\n" + answer + "fake> ")
    with index(proj) as ix:
        ix.update()
        assert [h.kind for h in ix.search(["zstd_codec_choice"])] == [EventKind.DECISION]
        hits = ix.search(["cache_layer_9"])  # what the agent did after its wakeup is indexed
        assert len(hits) == 2 and all(h.kind is EventKind.TURN for h in hits)
        assert hits[0].text.count("Wakeup briefing") <= 1
        assert len(ix.search(["wakeup briefing"])) == 2  # the wakeup's first line stays: one per session


def test_a_transcript_with_long_turns_grown_a_step_at_a_time_gives_the_rebuilt_index(proj: Path) -> None:
    """Heads, tails, repeated lines, wakeups and CJK, cut anywhere while they grow: the same events as at once."""
    rng = random.Random(26)
    turns = []
    for i in range(120):
        kind = rng.random()
        if kind < 0.1:
            body = "# Wakeup briefing: module core\n\n## Current task\nfix it\n\n## Warnings\n(none)\n\nworking\n"
        elif kind < 0.4:
            body = "".join(f"log {i}.{j} {'编码' if j % 7 == 0 else 'abc'} {'z' * rng.randint(0, 300)}\n"
                           for j in range(rng.randint(50, 400)))
        elif kind < 0.5:
            body = "same line again\n" * rng.randint(2, 500) + f"end {i}\n"
        else:
            body = "".join(f"line {i}.{j} ünï\n" for j in range(rng.randint(0, 20)))
        turns.append(f"fake> task {i} 任务{i}\n" + body)
    text = "".join(turns).encode()
    path = transcript(proj)
    with index(proj) as ix:
        grow(ix, path, text, rng, 40_000, [None, 1, 100_000])
        while ix.update(budget=1).more:
            pass
        grown = rows(ix)
        assert len({r[1] for r in grown}) == len(grown)
        assert sum(len(r[3]) for r in grown) < len(text) / 3  # heads and tails, not everything
        ix.reindex()
        assert rows(ix) == grown


def test_the_daemon_leaves_a_growing_tail_for_later(proj: Path) -> None:
    """``live``: the tail of a long turn still growing is indexed again only once its transcript is quiet."""
    path = transcript(proj)
    path.write_text("fake> build\n" + "".join(f"compile unit {i}\n" for i in range(2000)) + "first_tail_mark\n")
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=lambda unit: FAKE, live=True) as ix:
        ix.update()
        assert ix.search(["first_tail_mark"])  # the first look indexes the tail
        with open(path, "a") as fh:
            fh.write("".join(f"link unit {i}\n" for i in range(500)) + "second_tail_mark\n")
        ix.update()
        assert ix.search(["second_tail_mark"]) == [] and ix.search(["first_tail_mark"]) == []
        assert ix.search(["compile unit 1"])  # the head stays
        quiet = time.time() - TAIL_QUIET - 1
        os.utime(path, (quiet, quiet))
        ix.update()  # unchanged since, but its tail is due: read again
        assert ix.search(["second_tail_mark"])
        grown = rows(ix)
    with index(proj) as fresh:
        fresh.reindex()
        assert rows(fresh) == grown


def test_a_unit_file_chooses_full_text_and_a_bad_choice_names_the_key(proj: Path) -> None:
    units = proj / "units"
    units.mkdir()
    (units / "full.toml").write_text('[agent]\ncommand = ["true"]\nprompt = "fake> $"\nindex = "full"\n')
    (units / "plain.toml").write_text('[agent]\ncommand = ["true"]\nkind = "codex"\n')
    (units / "bad.toml").write_text('[agent]\ncommand = ["true"]\nindex = "everything"\n')
    readings = UnitReadings(units)
    assert readings("full").full and readings("full").marker.line_starts("x\nfake> y\n") == [2]
    assert not readings("plain").full and readings("plain").kind == "codex"
    assert not readings("bad").full  # a broken unit file: the default reading
    _, errors = load_units(units)
    assert [str(e) for e in errors] == [f"{units / 'bad.toml'}: [agent] index: Input should be 'summary' or 'full' "
                                        "(got 'everything')"]


def test_memory_files_changed_rewritten_or_removed_are_followed(proj: Path) -> None:
    record_decision(proj, "use zstd for the cache", "because it is fast, so we use it", module="core")
    append_note(proj, "the flaky_upload test fails at night", "hypothesis")
    with index(proj) as ix:
        ix.update()
        assert len(ix.search(["zstd"])) == 1 and len(ix.search(["flaky_upload"])) == 1
        record_decision(proj, "move zstd level to 3", "because level 19 is slow, so level 3", module="core")
        ix.update()
        assert len(ix.search(["zstd"])) == 2
        engram = proj / ".agent" / "engram.md"
        engram.write_text(engram.read_text().replace("flaky_upload", "stable_upload"))
        ix.update()
        assert ix.search(["flaky_upload"]) == [] and len(ix.search(["stable_upload"])) == 1
        (proj / ".agent" / "decisions-core.log").unlink()
        ix.update()
        assert ix.search(["zstd"]) == []


def test_where_you_stopped_of_a_history_record_is_indexed(proj: Path) -> None:
    history = state(proj) / "history"
    history.mkdir(parents=True)
    (history / "demo.jsonl").write_text(
        '{"unit":"demo","started":"2026-11-30T10:00:00Z","trigger":"threshold"}\n'
        '{"unit":"demo","started":"2026-11-30T11:00:00Z","where_you_stopped":{"ask":"port the parser",'
        '"files in flight":["src/parser_v2.py"],"last command":"pytest -k parser"}}\n'
        '{"unit":"demo","started":"2026-11-30T12:00:00Z","trail":"edited src/lexer_v3.py"}\n{"torn')
    (history / "demo.sessions.jsonl").write_text('{"unit":"demo","session":"s","detail":"parser_v2"}\n')
    with index(proj) as ix:
        ix.update()
        hits = ix.search(["parser_v2"])
        assert [(h.kind, h.unit, h.at) for h in hits] == [(EventKind.STOPPED, "demo", 2)]
        assert "files in flight: src/parser_v2.py" in hits[0].text
        assert hits[0].time == datetime.fromisoformat("2026-11-30T11:00:00+00:00").timestamp()
        assert hits[0].where(proj) == "agentd history demo  (.agentd/history/demo.jsonl:2)"
        assert len(ix.search(["lexer_v3"])) == 1


def test_filters_short_words_and_bad_queries(proj: Path) -> None:
    transcript(proj, "web").write_text("fake> db migration for io layer\nfake> 接 only\n")
    transcript(proj, "api").write_text("fake> db migration again\n")
    with index(proj) as ix:
        ix.update()
        assert {h.unit for h in ix.search(["db", "migration"])} == {"web", "api"}
        assert [h.unit for h in ix.search(["migration"], units=["api"])] == ["api"]
        assert ix.search(["migration"], kinds=[EventKind.DECISION]) == []
        assert [h.text for h in ix.search(["接"])] == ["fake> 接 only"]  # one character: a scan
        assert len(ix.search(['"quoted" db'])) == 0
        with pytest.raises(ValueError, match="at least one word"):
            ix.search(["  "])
        with pytest.raises(ValueError, match="half-life"):
            ix.search(["db"], half_life_days=0)


def test_the_index_is_a_cache_readonly_readers_and_a_damaged_file(proj: Path) -> None:
    db = default_db(state(proj))
    with pytest.raises(IndexUnavailable, match="recall --reindex"):
        EventIndex(db, proj, state(proj), readonly=True)
    transcript(proj).write_text("fake> hello cache_word\n")
    with index(proj) as ix:
        ix.update()
    assert db.stat().st_mode & 0o777 == 0o600
    with EventIndex(db, proj, state(proj), readonly=True) as ro:
        assert len(ro.search(["cache_word"])) == 1
        with pytest.raises(sqlite3.OperationalError):
            ro.reindex()
    db.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with index(proj) as ix:  # damaged: started again, then read from the files
        assert ix.search(["cache_word"]) == []
        ix.update()
        assert len(ix.search(["cache_word"])) == 1


def test_a_reader_that_may_not_write_the_state_directory_still_searches(proj: Path, tmp_path: Path) -> None:
    """An agent's ``search_events`` runs inside the Landlock fence: no -shm may be made there."""
    transcript(proj).write_text("fake> fenced_word here\n")
    writer = index(proj)
    writer.update()
    code = ("import sys; from pathlib import Path; from supervisor.eventindex import EventIndex, default_db\n"
            f"root = Path({str(proj)!r}); state = root / '.agentd'\n"
            "try:\n    open(state / 'probe', 'w')\nexcept PermissionError:\n    print('fenced')\n"
            "with EventIndex(default_db(state), root, state, readonly=True) as ix:\n"
            "    print([h.text for h in ix.search(['fenced_word'])])\n")
    for writer_open in (True, False):  # the daemon's indexer running (a -shm to share), or gone
        if not writer_open:
            writer.close()
        with Fence.build(FenceSpec.of(dirs=[tmp_path / "elsewhere"])) as fence:
            out = subprocess.run([sys.executable, "-c", code], preexec_fn=fence, capture_output=True, text=True,
                                 timeout=60, cwd=Path(__file__).parent.parent)
        assert out.stdout.splitlines() == ["fenced", "['fake> fenced_word here']"], out.stderr


def test_the_indexer_thread_follows_a_growing_transcript_backs_off_and_stops(proj: Path) -> None:
    (proj / "units").mkdir()
    (proj / "units" / "demo.toml").write_text('[agent]\ncommand = ["true"]\nprompt = "fake> $"\n')
    path = transcript(proj)
    path.write_text("fake> first_marker\n")
    indexer = EventIndexer(proj, state(proj), proj / "units", interval=0.05, idle_max=0.4)
    indexer.start()
    try:
        reader = EventIndex(default_db(state(proj)), proj, state(proj))
        wait_until(lambda: reader.search(["first_marker"]), 60, what="the first turn indexed")  # nice 19: slow when busy
        wait_until(lambda: indexer.pause == 0.4, 60, what="the indexer backing off while nothing changes")
        with open(path, "a") as fh:
            fh.write("ok\nfake> second_marker\n")
        hit = wait_until(lambda: reader.search(["second_marker"]), 60, what="the appended turn indexed")
        assert hit[0].at == len("fake> first_marker\nok\n")  # the unit's prompt split the turns
        reader.close()
    finally:
        indexer.stop()
    assert not indexer.alive


# -- Codex and Claude Code: their own record ---------------------------------------------------------------------

DATA = Path(__file__).parent / "data"


def linked_record(proj: Path, kind: str, data: bytes, unit: str = "agent") -> Path:
    """A session of a ``kind`` unit whose record holds ``data`` (its TUI transcript holds only redraws)."""
    from supervisor.trail.records import write_link

    (proj / "units").mkdir(exist_ok=True)
    (proj / "units" / f"{unit}.toml").write_text(f'[agent]\nkind = "{kind}"\ncommand = ["{kind}"]\n'
                                                  '[agent.env]\nVENDOR_TOKEN = "hunter2-vendor-secret"\n')
    text = transcript(proj, unit)
    text.write_text("› TRAIL: make the parser\n\x1b redraw tui_redraw_noise ─────\n")
    record = proj.parent / "home" / f"{kind}-session.jsonl"
    record.parent.mkdir(exist_ok=True)
    record.write_bytes(data)
    write_link(text, kind, record)
    return record


def readings(proj: Path) -> UnitReadings:
    return UnitReadings(proj / "units")


def grow_and_compare(proj: Path, record: Path, data: bytes, seed: int) -> list[tuple[str, int, float, str]]:
    """The record written a few lines at a time, indexed between: the events of one reading of it."""
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=readings(proj)) as ix:
        grow(ix, record, data, random.Random(seed), 3000, [None, 1])
        grown = rows(ix)
        ix.reindex()
        assert rows(ix) == grown
        return grown


def test_a_codex_session_is_indexed_from_its_rollout(proj: Path) -> None:
    from tests import trail_scenario as ts

    data = (DATA / "codex_rollout_trail.jsonl").read_bytes()
    record = linked_record(proj, "codex", data)
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=readings(proj)) as ix:
        ix.update()
        assert ix.search(["tui_redraw_noise"]) == []  # the screen is not indexed: the record is
        [ask] = ix.search(["make the parser accept empty input"])
        assert ask.kind is EventKind.TRAIL and ask.text.startswith("asked: ") and ask.unit == "agent"
        assert ask.where(proj) == f"{record}:{ask.at}  (its own record of session {SESSION})"
        [run] = ix.search([ts.TEST_COMMAND])
        body = next(r[3] for r in rows(ix) if ts.TEST_COMMAND in r[3])
        assert body.startswith(f"$ {ts.TEST_COMMAND}\nexit 1\n") and "IndentationError" in body  # as recorded
        assert ix.search([f"edited: {ts.EDIT}"]) and ix.search(["plan:", "Make empty input parse"])
        assert ix.search(["said:"])  # the agent's own message
    grown = grow_and_compare(proj, record, data, 15)
    assert sum(len(r[3]) for r in grown) < len(data) / 2


def test_a_claude_session_is_indexed_from_its_transcript_with_secrets_cut(proj: Path) -> None:
    from tests import trail_scenario as ts

    data = (DATA / "claude_transcript_trail.jsonl").read_bytes()
    leak = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_leak", "content": "token hunter2-vendor-secret and "
         "AKIAIOSFODNN7EXAMPLE in the output"}]}}).encode() + b"\n"
    call = json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_leak", "name": "Bash", "input": {"command": "env | grep TOKEN"}}]}}).encode()
    data += call + b"\n" + leak
    record = linked_record(proj, "claude", data)
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=readings(proj)) as ix:
        ix.update()
        assert [h.kind for h in ix.search([ts.ASK])] == [EventKind.TRAIL]
        assert ix.search([f"read: {ts.READS[0]}"]) and ix.search([f"edited: {ts.EDIT}"])
        body = next(r[3] for r in rows(ix) if "env | grep TOKEN" in r[3])
        assert "hunter2-vendor-secret" not in body and "AKIAIOSFODNN7EXAMPLE" not in body and "in the output" in body
        assert ix.search(["hunter2"]) == [] and ix.search(["AKIAIOSFODNN7"]) == []
    grow_and_compare(proj, record, data, 16)


def test_a_call_waits_for_its_result_within_the_pairing_window(proj: Path) -> None:
    call = {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1",
                                                 "arguments": json.dumps({"cmd": "make long_build_target"})}}
    out = {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                                "output": "Process exited with code 3\nOutput:\nlinker_failed_here\n"}}
    record = linked_record(proj, "codex", json.dumps(call).encode() + b"\n")
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=readings(proj)) as ix:
        ix.update()
        assert [h.text for h in ix.search(["long_build_target"])] == ["$ make long_build_target"]  # open for now
        with open(record, "ab") as fh:
            fh.write(json.dumps(out).encode() + b"\n")
        ix.update()
        [hit] = ix.search(["long_build_target", "linker_failed_here"])  # one event: the call and how it ended
        assert "exit 3" in hit.text


def test_a_linked_record_must_be_a_regular_file(proj: Path, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_text(json.dumps({"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                                        "content": "private_words_here"}}) + "\n")
    record = linked_record(proj, "codex", b"")
    record.unlink()
    record.symlink_to(secret)
    with EventIndex(default_db(state(proj)), proj, state(proj), markers=readings(proj)) as ix:
        ix.update()
        assert ix.search(["private_words_here"]) == []
        assert ix.search(["tui_redraw_noise"])  # without a readable record: the screen, as for any agent


def test_agentd_texts_are_those_the_keeper_knows() -> None:
    from supervisor.continuity.keeper import AGENTD_PREFIXES
    from supervisor.eventindex.shaping import AGENTD_TEXT

    assert AGENTD_TEXT == AGENTD_PREFIXES


# -- the CLI, the MCP tool and the daemon ---------------------------------------------------------------------------

def run(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*AGENTD, "--root", str(root), *args], cwd=root, env=clean_env(), capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert not check or result.returncode == 0, result.stderr
    return result


def test_recall_events_reindex_and_logs_at_from_the_command_line(proj: Path) -> None:
    record_decision(proj, "接口层采用适配器模式", "因为供应商不同，所以隔离", module="core")
    transcript(proj).write_text("fake> one\nfake> fix read_clean_tail offsets\ndone\n")
    out = run(proj, "recall", "--events", "适配").stdout
    assert "decision" in out and "接口层采用适配器模式" in out and ".agent/decisions-core.log:1" in out
    found = run(proj, "recall", "--events", "read_clean_tail", "--json").stdout
    assert '"kind": "turn"' in found and '"open": "agentd logs demo --session ' in found
    shown = run(proj, "logs", "demo", "--session", SESSION, "--at", "0", "-n", "1").stdout
    assert shown == "fake> one\n"
    rebuilt = run(proj, "recall", "--reindex")
    assert "indexed 2 events" in rebuilt.stdout and os.fspath(default_db(state(proj))) in rebuilt.stdout
    missing = run(proj, "recall", "--events", "nowhere_at_all", check=False)
    assert missing.returncode == 1 and "no match" in missing.stderr
    assert run(proj, "logs", "demo", "--session", "../x", check=False).returncode != 0
    assert "without --raw" in run(proj, "logs", "demo", "--at", "3", "-f", check=False).stderr


def test_the_daemon_indexes_a_running_agent(project: Project) -> None:
    project.unit("talker", '[agent]\ncommand = ["python", "-m", "supervisor.fakeagent"]\nprompt = "fake> $"\n'
                           "[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n")
    project.agentd("start")
    project.wait_state("talker", "running")
    project.agentd("send", "talker", "echo Summon_the_indexer 索引")

    def found() -> str:
        result = project.agentd("recall", "--events", "summon_the_indexer", "索引", check=False)
        return result.stdout if result.returncode == 0 else ""

    out = wait_until(found, 60, interval=0.5, what="the daemon's indexer to index the turn")
    assert "turn" in out and "talker" in out and "--session" in out
    assert (project.state / "events.db").is_file() and any(project.state.glob("transcripts/talker/*.marks.jsonl"))
    command = out.splitlines()[1].split("agentd ", 1)[1].split()
    assert "echo Summon_the_indexer" in project.agentd(*command).stdout
    project.agentd("stop", "--now")
    assert not any(e.get("event") == "event_index_pass_failed" for e in project.events())

