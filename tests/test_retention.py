"""Transcript retention (issue 31 §3): a unit keeps its newest sessions' transcripts, every file of each."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from supervisor.config.settings import SettingsError, load_settings
from supervisor.session.pty import Session
from supervisor.session.retention import prune


def session_id(n: int) -> str:
    return f"20261201T1000{n:02d}.000000-{n:06x}"


def make(directory: Path, n: int, record: bool = True) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    sid = session_id(n)
    for suffix in (".log", ".txt", ".marks.jsonl") + ((".record",) if record else ()):
        (directory / f"{sid}{suffix}").write_text(f"session {n}\n")


def sessions(directory: Path) -> list[int]:
    return sorted(int(p.name[13:15]) for p in directory.glob("*.txt"))


def test_the_newest_sessions_are_kept_with_every_file_of_theirs(tmp_path: Path) -> None:
    d = tmp_path / "unit"
    for n in range(10):
        make(d, n, record=n % 2 == 0)
    (d / "notes-of-a-person.md").write_text("not a session's\n")
    gone = prune(d, 4, current=session_id(9))
    assert gone == [session_id(n) for n in range(6)]
    assert sessions(d) == [6, 7, 8, 9]
    left = sorted(p.name for p in d.iterdir())
    assert "notes-of-a-person.md" in left
    assert not [name for name in left if name.startswith(tuple(session_id(n) for n in range(6)))]
    assert (d / f"{session_id(6)}.record").exists() and (d / f"{session_id(7)}.marks.jsonl").exists()
    assert prune(d, 4, current=session_id(9)) == []  # nothing more to do


def test_keep_zero_keeps_every_one_and_the_current_session_always_stays(tmp_path: Path) -> None:
    d = tmp_path / "unit"
    for n in range(5):
        make(d, n)
    assert prune(d, 0, current=session_id(4)) == [] and sessions(d) == list(range(5))
    # a session that asks for the prune is never removed, even when others look newer (a clock stepped back)
    make(d, 7)
    assert prune(d, 2, current=session_id(0)) == [session_id(n) for n in (1, 2, 3)]
    assert sessions(d) == [0, 4, 7]


def test_older_ids_of_whole_seconds_go_by_when_they_were_written(tmp_path: Path) -> None:
    d = tmp_path / "unit"
    d.mkdir()
    for i, name in enumerate(("20250101T000000-bbbbbb", "20250101T000000-aaaaaa", "20250101T000000-cccccc")):
        for suffix in (".log", ".txt"):
            (d / f"{name}{suffix}").write_text("x")
            t = time.time() - 100 + i
            os.utime(d / f"{name}{suffix}", (t, t))
    assert prune(d, 1, current="x") == ["20250101T000000-bbbbbb", "20250101T000000-aaaaaa"]
    assert [p.name for p in d.glob("*.txt")] == ["20250101T000000-cccccc.txt"]


def test_a_session_that_starts_prunes_its_units_older_transcripts(tmp_path: Path) -> None:
    d = tmp_path / "t"
    for n in range(6):
        make(d, n)

    async def go() -> Session:
        session = Session("u", [sys.executable, "-c", "print('hi')"], env=dict(os.environ), cwd=tmp_path, rows=24,
                          cols=80, transcript_dir=d, redact_env={}, keep=3)
        session.spawn()
        session.attach(asyncio.get_running_loop())
        deadline = time.monotonic() + 30
        while len(list(d.glob("*.txt"))) > 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        while session.reap() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        session.close()
        return session

    session = asyncio.run(go())
    names = sorted(p.stem for p in d.glob("*.txt"))
    assert names == [session_id(4), session_id(5), session.session_id]


def test_the_setting_is_checked_with_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTD_TRANSCRIPT_KEEP", "1")
    with pytest.raises(SettingsError, match=r"transcript_keep.*AGENTD_TRANSCRIPT_KEEP.*at least 2.*or 0 to keep"):
        load_settings(project_root=tmp_path)
    monkeypatch.setenv("AGENTD_TRANSCRIPT_KEEP", "many")
    with pytest.raises(SettingsError, match="transcript_keep"):
        load_settings(project_root=tmp_path)
    monkeypatch.delenv("AGENTD_TRANSCRIPT_KEEP")
    assert load_settings(project_root=tmp_path).transcript_keep == 100
    monkeypatch.setenv("AGENTD_TRANSCRIPT_KEEP", "0")
    assert load_settings(project_root=tmp_path).transcript_keep == 0
