"""The wakeup briefing: order, budget trimming, determinism, warnings, unit commands."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.memory import AgentPaths, add_fact, append_note, record_decision, update_task_state
from supervisor.tokens import estimate_tokens
from supervisor.continuity.wakeup import TRIM_ORDER, build_wakeup, run_wakeup_command

from .conftest import T0

WHY = "because it must be decided, so we decide"
TITLES = [
    "## Current task", "## Hard constraints", "## Latest decisions", "## Snapshot of the latest decision",
    "## Module files", "## Engram: confirmed", "## Engram: hypotheses", "## Facts", "## Recent summary",
    "## Backtrack", "## Warnings",
]


def _populate(root: Path, decisions: int = 12) -> None:
    paths = AgentPaths(root)
    paths.constraints.write_text("# Hard constraints\n\n- Never touch src/ui.ts.\n- Keep the public API stable.\n")
    update_task_state(paths, "parser half done; next: error messages", task="Rewrite the parser in src/core/a.py")
    for i in range(decisions):
        record_decision(root, f"decision number {i} about parser tokens", WHY, module="core" if i % 3 else None,
                        tags=["arch"], files=["src/core/a.py"] if i == 1 else ["src/core/b.py"],
                        scope_paths=["src/core"], now=T0 + timedelta(minutes=i))
    append_note(root, "tokens are bytes", "confirmed", now=T0)
    append_note(root, "the lexer may be the slow part", "hypothesis", now=T0)
    add_fact(root, "core", "one is one", "src/core/a.py:1", now=T0)
    paths.recent_summary.write_text("# Recent summary\n\nWorked on the parser.\n")


def test_sections_in_order_and_content(repo: Path):
    _populate(repo)
    w = build_wakeup(repo, "core", ["src/core"])
    positions = [w.text.index(t) for t in TITLES]
    assert positions == sorted(positions)
    assert "State at interruption: parser half done; next: error messages" in w.text
    assert "- Never touch src/ui.ts." in w.text
    assert "decision number 11" in w.text and "decision number 6" not in w.text.split("## Snapshot")[0]
    assert "src/core/a.py" in w.text.split("## Module files")[1]
    assert "[hypothesis] the lexer may be the slow part" in w.text.split("## Engram: hypotheses")[1]
    assert "tokens are bytes" in w.text.split("## Engram: confirmed")[1].split("## Engram: hypotheses")[0]
    # backtrack finds the older decision that touched the file the task names
    assert "decision number 1 about" in w.text.split("## Backtrack")[1]
    assert w.tokens == estimate_tokens(w.text) <= 2500 and not w.trimmed


def _copy_in_reverse(src: Path, dst: Path) -> None:
    """The same files, written in the reverse order, each with another modification time."""
    files = sorted((p for p in src.rglob("*") if p.is_file()), reverse=True)
    for n, path in enumerate(files):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        stamp = 1_000_000_000 + n * 7919  # from 2001 on, oldest where the original was newest
        os.utime(target, (stamp, stamp))


def _shift_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every clock Python code may read runs ``seconds`` ahead: datetime and the time module."""
    real = dt.datetime

    class Shifted(dt.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def]
            return real.now(tz) + dt.timedelta(seconds=seconds)

        @classmethod
        def utcnow(cls):  # type: ignore[no-untyped-def]
            return real.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(seconds=seconds)

        @classmethod
        def today(cls):  # type: ignore[no-untyped-def]
            return cls.now()

    class ShiftedDate(dt.date):
        @classmethod
        def today(cls):  # type: ignore[no-untyped-def]
            return Shifted.now().date()

    for name, module in list(sys.modules.items()):  # `from datetime import datetime` made a copy
        if name.startswith("supervisor") and getattr(module, "datetime", None) is dt.datetime:
            monkeypatch.setattr(module, "datetime", Shifted)
        if name.startswith("supervisor") and getattr(module, "date", None) is dt.date:
            monkeypatch.setattr(module, "date", ShiftedDate)
    monkeypatch.setattr(dt, "datetime", Shifted)
    monkeypatch.setattr(dt, "date", ShiftedDate)
    real_time, real_ns, real_localtime, real_gmtime, real_strftime = (
        time.time, time.time_ns, time.localtime, time.gmtime, time.strftime)
    monkeypatch.setattr(time, "time", lambda: real_time() + seconds)
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + int(seconds * 1e9))
    monkeypatch.setattr(time, "localtime", lambda secs=None: real_localtime(real_time() + seconds if secs is None else secs))
    monkeypatch.setattr(time, "gmtime", lambda secs=None: real_gmtime(real_time() + seconds if secs is None else secs))
    monkeypatch.setattr(time, "strftime", lambda fmt, t=None: real_strftime(fmt, time.localtime() if t is None else t))


def test_deterministic_and_clock_free(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _populate(repo)
    first = build_wakeup(repo, "core", ["src/core"]).text
    small = build_wakeup(repo, "core", ["src/core"], budget=300).text
    assert small != first
    # the same store, its files written in another order with other times, read three days later
    other = repo.parent / "copy"
    _copy_in_reverse(repo, other)
    _shift_clock(monkeypatch, 3 * 86400 + 5 * 3600)
    assert build_wakeup(other, "core", ["src/core"]).text == first
    assert build_wakeup(other, "core", ["src/core"], budget=300).text == small


def test_stale_and_invalid_facts(repo: Path):
    _populate(repo, decisions=1)
    from supervisor.memory import invalidate

    f2 = add_fact(repo, "core", "two is two", "src/core/a.py:2", now=T0)
    invalidate(repo, f2.id, "it was never true")
    (repo / "src" / "core" / "a.py").write_text("one = 11\ntwo = 2\n")
    w = build_wakeup(repo, "core", ["src/core"])
    assert "[STALE: source changed] one is one" in w.text
    assert "two is two" not in w.text
    assert any("stale" in x for x in w.warnings)


def test_warnings_for_empty_task_missing_constraints_and_torn_line(plain: Path):
    paths = AgentPaths(plain)
    paths.constraints.unlink()
    record_decision(plain, "x", WHY, now=T0)
    with paths.decisions(None).open("a") as fh:
        fh.write("[2026-11-30 14:40] decision: torn")
    w = build_wakeup(plain)
    warnings = w.text.split("## Warnings")[1]
    assert "task in .agent/current-task.md is empty" in warnings
    assert "constraints.md is missing" in warnings
    assert ".agent/decisions.log:2: torn line" in warnings
    assert w.warnings and all(x in warnings for x in w.warnings)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(50, 3000))
def test_budget_trims_least_important_first_never_constraints(repo_populated: Path, budget: int):
    w = build_wakeup(repo_populated, "core", ["src/core"], budget=budget)
    assert "- Never touch src/ui.ts.\n- Keep the public API stable." in w.text
    full = build_wakeup(repo_populated, "core", ["src/core"], budget=100_000)
    if full.tokens <= budget:
        assert w.text.replace(f"budget {budget} ", "") == full.text.replace("budget 100000 ", "")
        return
    assert w.tokens <= budget or "constraints alone are too long" in w.text
    trimmed_keys = [t.split(":")[0] for t in w.trimmed]
    assert trimmed_keys, "over budget but nothing trimmed"
    # a section is only trimmed once every less important section is empty
    order = [k for k in TRIM_ORDER]
    deepest = max(order.index(k) for k in trimmed_keys)
    for key in order[:deepest]:
        assert key in trimmed_keys or _section_was_empty(full.text, key)
    for line in w.text.splitlines():
        if line.startswith("[trimmed"):
            assert "get them with: agentd " in line


def _section_was_empty(text: str, key: str) -> bool:
    title = {"backtrack": "## Backtrack", "summary": "## Recent summary", "tree": "## Module files",
             "hypotheses": "## Engram: hypotheses", "snapshot": "## Snapshot", "facts": "## Facts",
             "confirmed": "## Engram: confirmed", "decisions": "## Latest decisions", "warnings": "## Warnings",
             "task": "## Current task", "stopped": "## Where you stopped"}[key]
    body = text.split(title)[1].split("\n## ")[0]
    return body.strip().endswith(("(none)", "(no snapshot recorded)", "(no record of an earlier session)"))


@pytest.fixture
def repo_populated(repo: Path) -> Path:
    _populate(repo)
    return repo


def test_trim_note_names_recall_command(repo_populated: Path):
    w = build_wakeup(repo_populated, "core", ["src/core"], budget=350)
    assert any("agentd recall --kind decision" in t or "agentd wakeup" in t for t in w.trimmed)
    assert "[trimmed" in w.text


def test_unit_style_shell_wakeup(repo_populated: Path):
    script = Path(__file__).resolve().parents[2] / "etc" / "wakeup.sh"
    (repo_populated / "etc").mkdir()
    shutil.copy(script, repo_populated / "etc" / "wakeup.sh")
    out = run_wakeup_command(repo_populated, ["bash", "etc/wakeup.sh"])
    assert "State at interruption: parser half done" in out
    assert "Never touch src/ui.ts" in out
    assert "decision number 9 " in out  # the global log (no AGENTD_MODULE)
    with pytest.raises(RuntimeError, match="exited with status 3"):
        run_wakeup_command(repo_populated, ["bash", "-c", "exit 3"])
    with pytest.raises(RuntimeError, match="no result within"):
        run_wakeup_command(repo_populated, ["sleep", "5"], timeout=0.2)
