"""The backtrack's decision index (memory/decision_index.py): always what decisions.latest reads, parsed once."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from supervisor.memory import AgentPaths, decisions, init_store
from supervisor.memory import decision_index
from supervisor.memory.decision_index import index_path, window
from supervisor.memory.store import snapshot_id

WINDOW = 40  # small, so that the walk crosses epochs


def line(i: int, word: str = "parsing") -> str:
    return (f"[2026-11-{1 + i // 1440:02d} {i // 60 % 24:02d}:{i % 60:02d}] [arch] decision: decision {i} about {word} | "
            f"why: because case {i} came up, so we handled it | files: src/core/f{i % 7}.py | "
            f"snapshot: {snapshot_id(i + 1)}")


def same(paths: AgentPaths, module: str | None) -> list[tuple]:
    """The index's window and decisions.latest's, as comparable rows (they must be equal)."""
    want, _ = decisions.latest(paths, module, WINDOW)
    got = window(paths, module, WINDOW)
    a = [(e.sort_key(), e.path, e.offset, f"{e.decision.decision} {e.decision.why} {e.decision.alternatives}".lower(),
          e.decision.files, e.decision.snapshot) for e in want]
    b = [(i.sort_key(), i.path, i.offset, i.hay, i.files, i.snapshot) for i in got]
    assert b == a
    assert [i.entry() for i in got] == want  # each read back and parsed at its offset
    return b


@pytest.fixture
def store(tmp_path: Path) -> AgentPaths:
    root = tmp_path / "proj"
    root.mkdir()
    init_store(root)
    return AgentPaths(root)


def write_log(paths: AgentPaths, module: str | None, numbers: list[int], epochs: int) -> None:
    """``numbers`` as ``epochs`` epochs of 10 and a live log with the rest."""
    lines = [line(i) + "\n" for i in numbers]
    for n in range(epochs):
        paths.epoch(module, n + 1).write_text("".join(lines[n * 10:(n + 1) * 10]))
    paths.decisions(module).write_text("".join(lines[epochs * 10:]))


def test_the_window_follows_every_change_a_store_sees(store: AgentPaths) -> None:
    """Appends, rolls, union-merge repeats, torn and malformed lines, hand edits (size and mtime kept), a lost
    epoch, a gap in the epoch numbers, a stale state.json: after each, the index reads what latest() reads."""
    rng = random.Random(29)
    write_log(store, "core", list(range(95)), 8)
    write_log(store, None, list(range(1000, 1012)), 1)
    live, glob = store.decisions("core"), store.decisions(None)
    assert same(store, "core") and same(store, None)
    n = 2000
    for _step in range(120):
        change = rng.choice(["append", "append", "roll", "repeat", "torn", "finish", "malformed", "edit", "drop",
                             "gap", "state", "global"])
        if change == "append":
            with open(live, "a") as fh:
                fh.write(line(n, rng.choice(["parsing", "cache", "适配器"])) + "\n")
            n += 1
        elif change == "roll":
            lines = live.read_text().splitlines(keepends=True)
            top = decisions._latest_epoch(store, "core") + 1
            store.epoch("core", top).write_text("".join(lines[:10]))
            live.write_text("".join(lines[10:]))
        elif change == "repeat":  # a union merge: a line of an epoch again at the live log's end
            epochs = decisions.epoch_numbers(store, "core")
            if epochs:
                again = rng.choice(store.epoch("core", rng.choice(epochs)).read_text().splitlines() or [line(1)])
                with open(live, "a") as fh:
                    fh.write(again + "\n")
        elif change == "torn":
            with open(live, "a") as fh:
                fh.write(line(n))
        elif change == "finish":
            with open(live, "a") as fh:
                fh.write("\n")
        elif change == "malformed":
            with open(live, "a") as fh:
                fh.write("[2026-11-30 10:00] decision: no reason given\n")
        elif change == "edit":  # same size, same mtime: only the change time tells
            epochs = decisions.epoch_numbers(store, "core")
            target = store.epoch("core", epochs[-1]) if epochs and rng.random() < 0.6 else live
            st = target.stat()
            data = target.read_bytes()
            if b"parsing" in data:
                target.write_bytes(data.replace(b"parsing", b"PARSING", 1))
                os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
                assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
        elif change == "drop":
            epochs = decisions.epoch_numbers(store, "core")
            if len(epochs) > 2:
                store.epoch("core", rng.choice(epochs[:-1])).unlink()
        elif change == "gap":
            top = decisions._latest_epoch(store, "core")
            store.epoch("core", top + 3).write_text(line(n) + "\n")
            n += 1
        elif change == "state":
            store.state.write_text(json.dumps({"epochs": {"decisions-core": rng.randint(0, 30)}}))
        else:
            with open(glob, "a") as fh:
                fh.write(line(n, "global") + "\n")
            n += 1
        same(store, "core")
        same(store, None)


def test_a_build_parses_only_the_lines_that_changed(store: AgentPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(store, "core", list(range(300)), 25)
    parsed: list[str] = []
    real = decision_index.lineformat.parse
    monkeypatch.setattr(decision_index.lineformat, "parse", lambda text: parsed.append(text) or real(text))
    window(store, "core", WINDOW)
    first = len(parsed)
    assert first >= WINDOW  # the first build parses the window
    del parsed[:]
    stamp = index_path(store).stat().st_mtime_ns
    window(store, "core", WINDOW)
    assert parsed == [] and index_path(store).stat().st_mtime_ns == stamp  # nothing changed: nothing written
    with open(store.decisions("core"), "a") as fh:
        fh.write(line(5000) + "\n")
    got = window(store, "core", WINDOW)
    assert parsed == [line(5000)]  # an append parses the new line alone
    assert got[-1].snapshot == snapshot_id(5001)
    # the entries it gives back parse their line once more: the backtrack renders the five it shows
    assert got[-1].entry() is not None


def test_a_damaged_index_is_built_again_and_an_unwritable_one_still_answers(store: AgentPaths) -> None:
    write_log(store, "core", list(range(60)), 5)
    index_path(store).write_text("{not json")
    assert same(store, "core")
    assert json.loads(index_path(store).read_text())["version"] == decision_index.VERSION
    index_path(store).unlink()
    index_path(store).mkdir()  # cannot be replaced (a root process ignores file modes: a directory in its way)
    assert same(store, "core")
    with open(store.decisions("core"), "a") as fh:
        fh.write(line(777) + "\n")
    assert same(store, "core")[-1][5] == snapshot_id(778)


def test_the_backtrack_read_from_the_index_is_the_one_parsed_from_the_logs(store: AgentPaths) -> None:
    """The wakeup's backtrack section, against the scoring it had over decisions.latest (copied here)."""
    from supervisor.continuity import wakeup
    from supervisor.memory.gitfiles import matches

    def reference(module: str | None, task: str, shown: list) -> list[str]:
        path_like, words = wakeup.task_terms(task)
        if not path_like and not words:
            return []
        seen = {e.decision.snapshot or (e.path, e.offset) for e in shown}
        pool = decisions.latest(store, None, wakeup.BACKTRACK_WINDOW)[0]
        if module is not None:
            pool += decisions.latest(store, module, wakeup.BACKTRACK_WINDOW)[0]
        scored = []
        for e in pool:
            if (e.decision.snapshot or (e.path, e.offset)) in seen:
                continue
            d = e.decision
            hay = f"{d.decision} {d.why} {d.alternatives}".lower()
            path_hits = sum(1 for p in path_like if any(matches(f, [p]) or matches(p, [f]) for f in d.files))
            word_hits = sum(1 for w in words if w.lower() in hay)
            if path_hits or word_hits >= 2:
                scored.append((path_hits * 3 + word_hits, e.sort_key(), e))
        scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return [wakeup._entry_line(e) for _, _, e in scored[:wakeup.BACKTRACK_MAX]]

    rng = random.Random(5)
    words = ["parsing", "cache", "适配器", "retry", "schema"]
    for module in ("core", None):
        lines = [line(i, rng.choice(words)).replace(f"f{i % 7}.py", rng.choice(["f1.py", "*.py", "f2.py"]))
                 for i in range(400)]
        write = store.decisions(module)
        write.write_text("".join(ln + "\n" for ln in lines))
    for _ in range(12):
        task = " ".join(rng.sample(words, 2)) + " in " + rng.choice(["src/core/f1.py", "src/core/f9.py", "docs"])
        module = rng.choice(["core", None])
        shown = decisions.latest_merged(store, module, 5)[0]
        got = wakeup._backtrack_section(store, module, task, shown).items
        assert got == reference(module, task, shown)
    assert len(wakeup._backtrack_section(store, "core", "parsing cache src/core/f1.py", []).items) == wakeup.BACKTRACK_MAX


def test_epoch_numbers_are_listed_again_only_when_the_store_directory_changed(store: AgentPaths,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    write_log(store, "core", list(range(40)), 3)
    assert decisions.epoch_numbers(store, "core") == [1, 2, 3]
    time.sleep(decisions._SETTLED_NS / 1e9 + 0.2)  # a listing is kept once the directory has been still a while
    assert decisions.epoch_numbers(store, "core") == [1, 2, 3]
    listings: list[str] = []
    real = os.listdir
    monkeypatch.setattr(decisions.os, "listdir", lambda p: listings.append(str(p)) or real(p))
    assert decisions.epoch_numbers(store, "core") == [1, 2, 3] and listings == []  # kept
    store.epoch("core", 7).write_text(line(99) + "\n")  # a file made in the directory: listed again
    assert decisions.epoch_numbers(store, "core") == [1, 2, 3, 7] and len(listings) == 1
