"""Engram notes, facts (add/check/invalidate/promote), recall, checkpoint helpers."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from supervisor.memory import (
    AgentPaths,
    StoreError,
    add_fact,
    append_note,
    check_facts,
    invalidate,
    memory_fingerprint,
    promote,
    recall,
    record_decision,
    update_task_state,
    write_auto_checkpoint,
)
from supervisor.memory import engram, facts
from supervisor.memory.scaffold import init_store

from .conftest import T0

WHY = "because it must be decided, so we decide"


def test_init_is_idempotent_and_never_overwrites(plain: Path):
    paths = AgentPaths(plain)
    paths.constraints.write_text("mine\n")
    assert init_store(plain) == []
    assert paths.constraints.read_text() == "mine\n"
    paths.engram.unlink()
    assert init_store(plain) == [paths.engram]


def test_fact_lifecycle(plain: Path):
    src = plain / "src" / "m.py"
    src.write_text("a = 1\nb = 2\nc = 3\n")
    f = add_fact(plain, "core", "b is two", "src/m.py:2-3", now=T0)
    assert f.status == "valid" and len(f.sha) == 12
    assert check_facts(plain) == []
    src.write_text("a = 1\nb = 20\nc = 3\n")
    changes = check_facts(plain)
    assert [(c[0].id, c[1]) for c in changes] == [(f.id, "stale")]
    src.write_text("a = 1\nb = 2\nc = 3\n")
    assert [c[1] for c in check_facts(plain)] == ["valid"]
    bad = invalidate(plain, f.id, "b changed meaning", now=T0)
    assert bad.status == "invalid" and "b changed meaning" in bad.invalid_why
    kept = facts.load(AgentPaths(plain), "core")
    assert [(k.id, k.status) for k in kept] == [(f.id, "invalid")]  # kept, with history
    with pytest.raises(StoreError, match="has only 3 lines"):
        add_fact(plain, "core", "x", "src/m.py:9")
    with pytest.raises(StoreError, match="PATH:LINE"):
        add_fact(plain, "core", "x", "src/m.py")
    with pytest.raises(StoreError, match="no fact F-99"):
        invalidate(plain, "F-99", "nope")


def test_promote_moves_confirmed_and_keeps_hypotheses(plain: Path):
    append_note(plain, "confirmed one", "confirmed", now=T0)
    append_note(plain, "a guess", "hypothesis", now=T0)
    append_note(plain, "confirmed two", "confirmed", now=T0)
    new = promote(plain, "core", now=T0)
    assert [f.text for f in new] == ["confirmed one", "confirmed two"]
    assert len({f.id for f in new}) == 2
    paths = AgentPaths(plain)
    assert [n.text for n in engram.all_notes(paths.engram)] == ["a guess"]
    assert [n.text for n in engram.all_notes(paths.engram_archive)] == ["confirmed one", "confirmed two"]
    with pytest.raises(ValueError, match="kind"):
        append_note(plain, "x", "maybe")


def test_recall_filters_and_order(plain: Path):
    record_decision(plain, "adopt adapters", WHY, module="core", tags=["arch"], files=["src/adapters/*.ts"], now=T0)
    for i in range(60):  # push the first into an archived epoch
        record_decision(plain, f"filler {i}", WHY, module="core", now=T0 + timedelta(minutes=1))
    record_decision(plain, "pin httpx", WHY, tags=["deps"], now=T0 + timedelta(minutes=2))
    append_note(plain, "adapters are slow", "hypothesis", now=T0 + timedelta(minutes=3))
    add_fact(plain, "core", "adapters live in src", "src/m.py:1", now=T0 + timedelta(minutes=4))
    hits = recall(plain, ["adapters"])
    assert [h.kind for h in hits] == ["fact", "engram", "decision"]  # newest first
    assert hits[2].where.endswith("decisions-core-epoch-1.log")
    assert re.search(r" \| snapshot-[0-9A-Z]{26}$", [h.text for h in recall(plain, tag="arch")][0])
    assert [h.kind for h in recall(plain, path="src/adapters/x.ts")] == ["decision"]
    assert recall(plain, ["pin"], modules=["core"]) == []
    assert len(recall(plain, ["pin"], modules=["global"])) == 1
    assert len(recall(plain, ["filler"], kinds=["decision"])) == 60
    assert recall(plain, ["filler"], limit=3)[0].text.startswith("[2026-11-30 14:33]")


def test_fingerprint_and_auto_checkpoint(plain: Path):
    paths = AgentPaths(plain)
    fp = memory_fingerprint(plain, "core")
    assert memory_fingerprint(plain, "core") == fp
    append_note(plain, "x", "confirmed")
    fp2 = memory_fingerprint(plain, "core")
    assert fp2 != fp
    record_decision(plain, "x", WHY, module="core")
    fp3 = memory_fingerprint(plain, "core")
    assert fp3 != fp2
    update_task_state(paths, "stopped at y")
    assert memory_fingerprint(plain, "core") != fp3
    path = write_auto_checkpoint(plain, "core", "deadline passed", "line 1\nline 2\n", now=T0)
    text = path.read_text()
    assert "did not confirm" in text and "line 2" in text and "deadline passed" in text
    last = engram.recent(paths, 1, "core")[0]
    assert last.kind == "auto" and "did not confirm" in last.text and last.module == "core"
