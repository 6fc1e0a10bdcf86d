"""``agentd status`` tells the truth (issue 27 §2): crashes and cycles apart, planned exits, what to do first.

Rendered from status rows as the daemon answers them (supervisor/daemon/commands.py
``status_row``), at the widths people have: piped (no limit), 100 columns, and
``--full``.
"""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from supervisor.cli import fast
from supervisor.cli.app import cli
from supervisor.cli.render import render_status

TODO = ("Codex is not logged in: run `codex login` with CODEX_HOME set to the unit's home, or set OPENAI_API_KEY "
        "in [agent] env; then `agentd restart api-codex`")


def _row(unit: str, **extra: Any) -> dict[str, Any]:
    row = {"unit": unit, "state": "running", "pid": 4242, "uptime": 270.0, "restarts": 0, "crashes": 0, "cycles": 0,
           "last_exit": None, "last_exit_planned": None, "cpu_seconds": 1.5, "rss_bytes": 5_000_000,
           "memory_bytes": 5_000_000, "scope": "watched, not enforced (no landlock)",
           "context": {"exact": False, "used": 1_000, "window": 200_000, "ratio": 0.005, "window_source": "agent"},
           "activity": None, "reason": None}
    row.update(extra)
    return row


def _answer(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"daemon": {"version": "0.1.0", "pid": 9, "uptime": 300.0, "project_root": "/srv/p"}, "units": list(rows)}


HEALTHY = _row("fake", cycles=19, restarts=0, last_exit="signal SIGTERM", last_exit_planned=True,
               last_checkpoint={"trigger": "threshold", "flush": "verified", "ratio": 0.456})
BLOCKED = _row("api-codex", blocked={"screen": "login", "todo": TODO, "freeze": "blocked_screen", "action": "notify",
                                     "after": 120, "since": "x", "for": 3.0})
CRASHY = _row("worker", crashes=4, restarts=4, last_exit="exit 1", last_exit_planned=False)


def _table_line(text: str, unit: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(unit + " ")]
    return line


def test_cycles_are_not_crashes_and_a_planned_exit_says_so() -> None:
    text = render_status(_answer(HEALTHY, CRASHY))
    header = text.splitlines()[1]
    assert "CRASHES" in header and "CYCLES" in header and "RESTARTS" not in header
    cells = _table_line(text, "fake").split()
    assert cells[4:6] == ["0", "19"]  # CRASHES 0, CYCLES 19
    assert "planned (signal SIGTERM)" in _table_line(text, "fake")
    crashy = _table_line(text, "worker")
    assert crashy.split()[4:6] == ["4", "0"] and "planned" not in crashy and "exit 1" in crashy
    # the checkpoint's ratio is the wakeup's, and says so
    assert "wakeup 45.6% of the context before" in _table_line(text, "fake")


def test_a_blocked_unit_says_what_to_do_at_100_columns() -> None:
    text = render_status(_answer(HEALTHY, BLOCKED), limit=100)
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "running (blocked: login)" in _table_line(text, "api-codex")
    below = text.split("\n", 2)[2]
    # the NOTE was cut: what to do is below the table, whole, wrapped, and the full view is offered
    joined = " ".join(line.strip() for line in below.splitlines())
    assert "api-codex: blocked: login: " + TODO in joined
    assert "agentd status --full" in text
    # the healthy unit's cut note is not repeated (nothing to do)
    assert "fake:" not in below


def test_nothing_is_repeated_when_nothing_was_cut() -> None:
    text = render_status(_answer(HEALTHY, BLOCKED))  # piped: never cut
    assert TODO in _table_line(text, "api-codex")
    assert "--full" not in text and text.count(TODO) == 1


def test_full_puts_every_note_below_the_table_whole() -> None:
    text = render_status(_answer(HEALTHY, BLOCKED), limit=100, full=True)
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "NOTE" not in text.splitlines()[1]
    joined = " ".join(text.split("\n", 1)[1].split())
    assert "api-codex blocked: login: " + TODO in joined
    assert "scope: watched, not enforced (no landlock)" in joined and "wakeup 45.6%" in joined


def test_status_full_and_l_reach_the_renderer_on_both_paths() -> None:
    assert fast.parse(["status", "--full", "web"])[2:] == (["web"], False, True)
    assert fast.parse(["status", "-l"])[2:] == ([], False, True)
    assert fast.parse(["status"])[2:] == ([], False, False)
    result = CliRunner().invoke(cli, ["status", "--help"])
    assert "--full" in result.output and "-l" in result.output
