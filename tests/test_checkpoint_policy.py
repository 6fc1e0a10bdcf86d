"""When a checkpoint is due, and the cycle records (pure, no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.adapters.base import ContextFigure
from supervisor.continuity.policy import due
from supervisor.continuity.records import CycleRecord, append_history, read_history
from supervisor.config.units import parse_unit


def spec(tmp_path: Path, context: str = ""):
    path = tmp_path / "u.toml"
    path.write_text('[agent]\ncommand = ["python"]\n[context]\nwindow = 1000\n' + context)
    return parse_unit(path)


def fig(used: int, window: int = 1000) -> ContextFigure:
    return ContextFigure(used=used, window=window, exact=False, source="test")


@pytest.mark.parametrize(
    ("used", "expected"),
    [(0, None), (699, None), (700, "threshold"), (899, "threshold"), (900, "hard_limit"), (5000, "hard_limit")],
)
def test_thresholds(tmp_path: Path, used: int, expected: str | None) -> None:
    assert due(spec(tmp_path), fig(used), session_age=1.0) == expected


def test_custom_thresholds_and_session_age(tmp_path: Path) -> None:
    s = spec(tmp_path, "checkpoint_at = 0.5\nhard_limit = 0.6\nmax_session_age = 60\n")
    assert due(s, fig(499), 1.0) is None
    assert due(s, fig(500), 1.0) == "threshold"
    assert due(s, fig(600), 1.0) == "hard_limit"
    assert due(s, fig(10), 59.0) is None
    assert due(s, fig(10), 60.0) == "max_session_age"
    assert due(s, None, 61.0) == "max_session_age"  # no figure at all still honours the age
    assert due(s, fig(10, window=0), 1.0) is None


def test_history_round_trip_tolerates_a_torn_last_line(tmp_path: Path) -> None:
    rec = CycleRecord(unit="api", trigger="threshold", old_session="s1", tokens_before=8000, wakeup_tokens=400)
    rec.finish_ratio()
    assert rec.ratio == 0.05
    append_history(tmp_path, rec)
    append_history(tmp_path, CycleRecord(unit="api", trigger="command", old_session="s2"))
    with open(tmp_path / "history" / "api.jsonl", "a") as fh:
        fh.write('{"unit": "api", "trig')  # a crash mid-write
    records = list(read_history(tmp_path, "api"))
    assert [r["old_session"] for r in records] == ["s1", "s2"]
    assert records[0]["ratio"] == 0.05
    assert list(read_history(tmp_path, "other")) == []
