"""The known-answer queries of the event tests (tests/test_eventindex.py), asked again by the bench.

Issue 29 changed what the event index keeps (a turn's head and tail, a Codex
or Claude Code session from its own record, the wakeup's echo left out): this
shows which answers each way of indexing still finds.  Each case builds the
test's files in a fresh project, indexes them with the unit's reading
(``[agent] index`` "summary", the default, then "full") and asks the test's
query; the answer is what the test asserts.  ``python -m bench.events``
prints the table in section 7 of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from supervisor.eventindex import EventIndex, EventKind, UnitReadings, default_db
from supervisor.memory import append_note, init_store, record_decision
from supervisor.trail.records import write_link

SESSION = "20261201T100000-aaaaaa"
DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TEST_COMMAND = "python3 tests/check_parser.py"  # tests/trail_scenario.py


class Project:
    def __init__(self, base: Path, full: bool) -> None:
        self.root = base / "proj"
        self.root.mkdir()
        init_store(self.root)
        self.state = self.root / ".agentd"
        self.full = full
        self.unit("demo")

    def unit(self, name: str, kind: str = "generic") -> None:
        units = self.root / "units"
        units.mkdir(exist_ok=True)
        prompt = 'prompt = "fake> $"\n' if kind == "generic" else ""
        (units / f"{name}.toml").write_text(f'[agent]\nkind = "{kind}"\ncommand = ["x"]\n{prompt}'
                                            f'index = "{"full" if self.full else "summary"}"\n')

    def transcript(self, unit: str = "demo", session: str = SESSION) -> Path:
        path = self.state / "transcripts" / unit / f"{session}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def index(self) -> EventIndex:
        ix = EventIndex(default_db(self.state), self.root, self.state, markers=UnitReadings(self.root / "units"))
        ix.update()
        return ix


def _decision(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
    record_decision(p.root, "接口层采用适配器模式", "因为供应商的接口不同，所以隔离它们", module="core")
    return ["适配"], "the decision, .agent/decisions-core.log:1", lambda ix: [
        (h.kind, h.where(p.root)) for h in ix.search(["适配"])] == [(EventKind.DECISION, ".agent/decisions-core.log:1")]


def _identifier(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
    p.transcript().write_text("banner\nfake> run the tests\nReading src/scope.py\n"
                              "fake> why does ScopeGuard.changed() drop events?\nlooking at it\nfake> ")
    return ["scopeguard.changed"], "one turn, at byte 48", lambda ix: [
        (h.kind, h.at) for h in ix.search(["scopeguard.changed"])] == [(EventKind.TURN, 48)]


def _newer(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
    for when in (datetime(2026, 11, 1, 12, 0), datetime(2026, 11, 29, 12, 0)):
        append_note(p.root, "the retry loop hides timeouts in fetch_remote", "confirmed", now=when)
    now = datetime(2026, 11, 30, 12, 0).timestamp()
    return ["fetch_remote"], "both notes, the newer first", lambda ix: [
        h.time for h in ix.search(["fetch_remote"], now=now)] == [datetime(2026, 11, 29, 12, 0).timestamp(),
                                                                   datetime(2026, 11, 1, 12, 0).timestamp()]


def _stopped(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
    history = p.state / "history"
    history.mkdir(parents=True)
    (history / "demo.jsonl").write_text(
        '{"unit":"demo","started":"2026-11-30T11:00:00Z","where_you_stopped":{"files in flight":["src/parser_v2.py"]}}\n')
    return ["parser_v2"], "where the cycle stopped, history line 1", lambda ix: [
        (h.kind, h.at) for h in ix.search(["parser_v2"])] == [(EventKind.STOPPED, 1)]


def _short_words(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
    p.unit("web")
    p.unit("api")
    p.transcript("web").write_text("fake> db migration for io layer\nfake> 接 only\n")
    p.transcript("api").write_text("fake> db migration again\n")
    return ["db", "migration"], "a turn of each unit", lambda ix: {
        h.unit for h in ix.search(["db", "migration"])} == {"web", "api"} and len(ix.search(["接"])) == 1


def _flood(where: str) -> Callable[[Project], tuple[list[str], str, Callable[[EventIndex], bool]]]:
    at, answer = {"head": (2, "found"), "150 KB in": (2000, "full text only (inside its 256 KiB cap)"),
                  "middle": (20_000, "not found: past the cap (`agentd logs --at` opens it)"),
                  "end": (39_999, "found")}[where]
    needle = f"the_needle_{where.replace(' ', '_')}"

    def case(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
        lines = [f"flood line {i:07d} {'x' * 60}\n" for i in range(40_000)]
        lines[at] = needle + "\n"
        p.transcript().write_text("fake> cat big.log\n" + "".join(lines) + "fake> ")
        return [needle], f"a 3 MB turn, line {at + 1}: {answer}", lambda ix: len(ix.search([needle])) == 1

    return case


def _wakeup(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
    from supervisor.continuity.wakeup import build_wakeup

    record_decision(p.root, "use zstd_codec_choice for caches", "because it is fast, so we use it", module="core")
    briefing = build_wakeup(p.root, "core").text
    for n, session in enumerate((SESSION, "20261201T110000-bbbbbb")):
        p.transcript(session=session).write_text(f"fake> {briefing}\nworking on it, part {n}\nfake> ")
    return ["zstd_codec_choice"], "the decision only (not each session's wakeup)", lambda ix: [
        h.kind for h in ix.search(["zstd_codec_choice"])] == [EventKind.DECISION]


def _record(kind: str) -> Callable[[Project], tuple[list[str], str, Callable[[EventIndex], bool]]]:
    def case(p: Project) -> tuple[list[str], str, Callable[[EventIndex], bool]]:
        p.unit("agent", kind)
        text = p.transcript("agent")
        text.write_text("› TRAIL: make the parser\nredraw redraw\n")
        record = p.root.parent / f"{kind}.jsonl"
        name = "codex_rollout" if kind == "codex" else "claude_transcript"
        record.write_bytes((DATA / f"{name}_trail.jsonl").read_bytes())
        write_link(text, kind, record)
        words = [TEST_COMMAND, "exit 1" if kind == "codex" else "exit 2"]  # as the two recordings ended
        answer = "one trail event: the command and its exit status (full text: the screen, not the record)"
        return words, answer, lambda ix: [h.kind for h in ix.search(words)] == [EventKind.TRAIL]

    return case


#: (label, case, what the tests assert with index = "summary", with "full": found or not)
CASES: list[tuple[str, Callable[[Project], tuple[list[str], str, Callable[[EventIndex], bool]]], bool, bool]] = [
    ("a Chinese decision by a two-character word", _decision, True, True),
    ("a turn by a code identifier", _identifier, True, True),
    ("equal notes: the newer ranks first", _newer, True, True),
    ("where a cycle stopped", _stopped, True, True),
    ("two-letter and one-character words", _short_words, True, True),
    ("a flood turn: its head", _flood("head"), True, True),
    ("a flood turn: 150 KB in", _flood("150 KB in"), False, True),
    ("a flood turn: its middle (1.5 MB in)", _flood("middle"), False, False),
    ("a flood turn: its end", _flood("end"), True, True),
    ("a decision the wakeup repeats", _wakeup, True, True),
    ("Codex: the failing check and its exit", _record("codex"), True, False),
    ("Claude Code: the failing check and its exit", _record("claude"), True, False),
]


def run() -> list[dict[str, object]]:
    """Each case under both readings: its query, the expected answer, whether each reading finds it."""
    rows = []
    for label, case, want_summary, want_full in CASES:
        row: dict[str, object] = {"case": label, "want_summary": want_summary, "want_full": want_full}
        for full in (False, True):
            base = Path(tempfile.mkdtemp(prefix="known-"))
            try:
                p = Project(base, full)
                words, expected, check = case(p)
                with p.index() as ix:
                    row["summary" if not full else "full"] = bool(check(ix))
                row["query"], row["expected"] = words, expected
            finally:
                shutil.rmtree(base, ignore_errors=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    print(json.dumps(run(), ensure_ascii=False, indent=1))
