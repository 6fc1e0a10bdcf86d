"""Issue 13 item 8: one oversized item is cut (with the command that shows it whole), not the whole briefing.

And the determinism of the briefing over its newer inputs: per-module tasks,
notes tagged with their module, the sync record, cut items.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from supervisor.continuity.wakeup import build_wakeup, cut_text, item_cap
from supervisor.memory import AgentPaths, add_fact, append_note, record_decision, update_task_state
from supervisor.tokens import estimate_tokens

from .conftest import T0

WHY = "because it must be decided, so we decide"


def _project(root: Path) -> None:
    paths = AgentPaths(root)
    paths.constraints.write_text("# Hard constraints\n\n- Never touch src/ui.ts.\n")
    update_task_state(paths, "lexer done; next: the parser", task="Rewrite the parser in src/core/a.py", module="core")
    for i in range(6):
        record_decision(root, f"older decision {i}", WHY, module="core", files=["src/core/b.py"],
                        scope_paths=["src/core"], now=T0 + timedelta(minutes=i))
    append_note(root, "tokens are bytes", "confirmed", module="core", now=T0)
    append_note(root, "the lexer may be slow", "hypothesis", module="core", now=T0)
    add_fact(root, "core", "one is one", "src/core/a.py:1", now=T0)


def test_a_100kb_decision_is_cut_and_the_rest_stays(repo: Path):
    _project(repo)
    huge = "x" * 100_000
    big = record_decision(repo, f"adopt the giant plan {huge}", WHY, module="core", scope_paths=["src/core"],
                          now=T0 + timedelta(minutes=30))
    w = build_wakeup(repo, "core", ["src/core"])
    assert w.tokens <= w.budget == 2500
    assert w.cut and not w.trimmed  # cutting the one item was enough: no section had to go
    text = w.text
    # everything else is still there: engram, snapshot, files, the older decisions
    assert "tokens are bytes" in text.split("## Engram: confirmed")[1]
    assert "the lexer may be slow" in text.split("## Engram: hypotheses")[1]
    assert f"{big.snapshot} at " in text.split("## Snapshot of the latest decision")[1]
    assert "src/core/a.py" in text.split("## Module files")[1]
    latest = text.split("## Latest decisions")[1].split("## Snapshot")[0]
    assert all(f"older decision {i}" in latest for i in range(2, 6))
    assert "lexer done; next: the parser" in text and "one is one" in text
    # the cut item says how much went and the exact command that prints it whole
    m = re.search(r"… \[cut ([\d,]+) chars to fit; whole: (agentd recall --kind decision (snapshot-\w+))\]", latest)
    assert m and m.group(3) == big.snapshot
    assert int(m.group(1).replace(",", "")) > 99_000
    out = subprocess.run([sys.executable, "-m", "supervisor", "--root", str(repo), *m.group(2).split()[1:]],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert huge in out and out.count("\n") == 1  # exactly that decision, whole


def test_cut_text_fits_its_limit_for_any_text():
    for text in ("a" * 5000, "决" * 3000, ("ab决" * 900)):
        for limit in (40, 100, 333):
            out = cut_text(text, limit, "agentd recall --kind decision snapshot-X")
            assert estimate_tokens(out) <= limit and out.endswith("whole: agentd recall --kind decision snapshot-X]")
    assert cut_text("short", 40, "x") == "short"
    assert item_cap(2500) == 250 and item_cap(100) == 40


def test_small_budgets_still_cut_before_trimming(repo: Path):
    _project(repo)
    record_decision(repo, "y" * 20_000, WHY, module="core", now=T0 + timedelta(minutes=30))
    w = build_wakeup(repo, "core", ["src/core"], budget=900)
    assert w.tokens <= 900 and w.cut
    assert "- Never touch src/ui.ts." in w.text


def test_deterministic_over_module_tasks_notes_sync_record_and_cuts(repo: Path, tmp_path: Path):
    _project(repo)
    paths = AgentPaths(repo)
    update_task_state(paths, "global state", task="Ship 1.0")
    update_task_state(paths, "web state", task="Web task", module="web")
    append_note(repo, "a web note", "confirmed", module="web", now=T0)
    append_note(repo, "a global note", "confirmed", now=T0)
    record_decision(repo, "z" * 30_000, WHY, module="core", now=T0 + timedelta(minutes=40))
    paths.sync_state.write_text(json.dumps({
        "time": "2026-11-30 15:00", "remote": "origin", "branch": "agentd-memory", "commit": "ab" * 20,
        "received": {"decisions": ["[2026-11-30 14:59] decision: from the other host | why: because b, so c | snapshot: snapshot-01M8RWR33N10M4MVJN5VXQEHMH"]},
        "received_total": 1,
    }))
    first = build_wakeup(repo, "core", ["src/core"], budget=1200)
    assert first.cut and "from the other host" in first.text and "a global note" in first.text
    assert "Web task" not in first.text and "a web note" not in first.text
    assert build_wakeup(repo, "core", ["src/core"], budget=1200).text == first.text
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    assert build_wakeup(copy, "core", ["src/core"], budget=1200).text == first.text  # no path or clock in it


def test_a_cut_hand_written_decision_without_snapshot_points_at_a_recall_that_finds_it(repo: Path):
    _project(repo)
    paths = AgentPaths(repo)
    with paths.decisions("core").open("a") as fh:  # hand-written: no snapshot id to name it by
        fh.write(f"[2026-11-30 15:30] decision: hand written {'w' * 30_000} | why: because we typed it, so it stays\n")
    w = build_wakeup(repo, "core", ["src/core"])
    m = re.search(r"whole: (agentd recall --kind decision --module core '2026-11-30 15:30' [^\]]+)\]", w.text)
    assert m, w.text
    out = subprocess.run([sys.executable, "-m", "supervisor", "--root", str(repo), *shlex.split(m.group(1))[1:]],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.count("\n") == 1 and "w" * 30_000 in out
