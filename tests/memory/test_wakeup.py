"""The wakeup briefing: order, budget trimming, determinism, warnings, unit commands."""

from __future__ import annotations

import datetime as dt
import os
import shutil
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


class Ticking:
    """A memory clock for tests: T0, then one minute later at every call (no wall clock read)."""

    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start
        self.calls = 0

    def __call__(self) -> dt.datetime:
        self.calls += 1
        self.now += timedelta(minutes=1)
        return self.now


def test_the_writers_stamp_with_the_clock_they_are_given(plain: Path):
    clock = Ticking()
    rec = record_decision(plain, "use the injected clock", WHY, clock=clock)
    note = append_note(plain, "the clock is injected", "confirmed", clock=clock)
    (plain / "src" / "m.py").write_text("m = 1\n")
    fact = add_fact(plain, None, "m is one", "src/m.py:1", clock=clock)
    assert clock.calls == 3
    assert rec.line.startswith("[2026-11-30 14:33] ") and note.time == "2026-11-30 14:34" and fact.added == "2026-11-30 14:35"
    # the snapshot id is a ULID of the decision's own moment
    from supervisor.memory.ids import ulid

    assert rec.snapshot.removeprefix("snapshot-")[:10] == ulid(dt.datetime(2026, 11, 30, 14, 33))[:10]
    # a fixed moment wins over the clock
    assert append_note(plain, "fixed", "confirmed", now=T0, clock=clock).time == "2026-11-30 14:32" and clock.calls == 3


#: Readings of the time in the modules the wakeup imports that the wakeup never reaches, each with its owner.
OTHER_CLOCK_READS = {
    ("supervisor/memory/sync.py", "sync_memory"): "stamps a failed sync's attempt; sync.py is another engineer's now",
    ("supervisor/memory/sync.py", "_record_success"): "stamps the sync record; sync.py is another engineer's now",
    ("supervisor/memory/decisions.py", "epoch_numbers"): "a cached listing of epochs is trusted only once the "
    "directory's mtime has settled (a filesystem's coarse mtime): a cache's freshness, not a stamp anyone reads",
}
_CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"), ("time", "time"),
                ("time", "time_ns"), ("time", "gmtime"), ("time", "localtime"), ("time", "strftime"),
                ("time", "monotonic"), ("time", "perf_counter")}


def _closure(module: str) -> set[Path]:
    """The files of ``module`` and of every supervisor module it imports at its top, transitively (read, not
    imported; an import inside a function or under TYPE_CHECKING is not followed)."""
    import ast
    import importlib.util

    files: set[Path] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # `from .units import UnitSpec` names a class, not a module
            continue
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        path = Path(spec.origin)
        if path in files:
            continue
        files.add(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        top = [n for n in ast.parse(path.read_text()).body
               if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))]
        for node in (n for stmt in top for n in ast.walk(stmt) if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parent = ".".join(parts[: len(parts) - node.level + 1])
                    base = f"{parent}.{base}" if base else parent
                todo.append(base)
                todo.extend(f"{base}.{a.name}" for a in node.names)  # `from . import decisions` names a module
            elif isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names)
        todo = [t for t in todo if t.startswith("supervisor")]
    return files


def _clock_reads(path: Path) -> list[tuple[str, str]]:
    """(function, call) for every call that reads the time in ``path``."""
    import ast

    tree = ast.parse(path.read_text())
    out: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and isinstance(child.func.value, ast.Name):
                call = (child.func.value.id, child.func.attr)
                pinned = call in {("time", "gmtime"), ("time", "localtime")} and child.args  # a given time: no reading
                pinned = pinned or (call == ("time", "strftime") and len(child.args) > 1
                                    and not (isinstance(child.args[1], ast.Call)))
                if call in _CLOCK_CALLS and not pinned:
                    out.append((here, ".".join(call)))
            visit(child, here)

    visit(tree, "<module>")
    return out


def test_the_wakeup_reads_no_clock_and_the_library_reads_it_only_through_its_clock():
    """Determinism over time, without moving the clock: nothing the wakeup imports reads the time, but the
    memory library's one clock (which only writers call) and the readings listed in OTHER_CLOCK_READS."""
    root = Path(__file__).resolve().parents[2]
    found = {}
    for path in _closure("supervisor.continuity.wakeup") | _closure("supervisor.memory"):
        for function, call in _clock_reads(path):
            found[(str(path.relative_to(root)), function)] = call
    assert found.pop(("supervisor/memory/clock.py", "system_clock")) == "datetime.now"
    assert set(found) == set(OTHER_CLOCK_READS), (f"new readings of the time: {sorted(set(found) - set(OTHER_CLOCK_READS))}; "
                                                  f"gone (drop them here): {sorted(set(OTHER_CLOCK_READS) - set(found))}")
    # and the scan sees a reading where there is one
    assert _clock_reads(root / "supervisor" / "continuity" / "records.py")


def test_deterministic_whatever_the_order_and_times_of_the_files(repo: Path):
    _populate(repo)
    first = build_wakeup(repo, "core", ["src/core"]).text
    small = build_wakeup(repo, "core", ["src/core"], budget=300).text
    assert small != first
    # the same store, its files written in another order with other modification times
    other = repo.parent / "copy"
    _copy_in_reverse(repo, other)
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
