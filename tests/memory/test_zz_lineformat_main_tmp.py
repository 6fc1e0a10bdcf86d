"""The decision line: round trip, the Chinese-label format, the why rule, torn lines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.memory import lineformat
from supervisor.memory.lineformat import Decision, LineError

text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=60).map(
    lambda s: " ".join(s.split())
).filter(bool)
times = st.builds(
    lambda y, mo, d, h, mi: f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}",
    st.integers(2000, 2099), st.integers(1, 12), st.integers(1, 28), st.integers(0, 23), st.integers(0, 59),
)
tags = st.lists(st.from_regex(lineformat.TAG_RE, fullmatch=True), max_size=3, unique=True).map(tuple)
files = st.lists(
    st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs")), min_size=1, max_size=20), max_size=4
).map(lambda fs: tuple(f for f in fs if f.strip() == f and f not in ("无", "-", "none") and not set(f) & set("，、")))


@given(times, text, text, tags, files, st.integers(0, 5000), st.one_of(st.just(""), text))
def test_render_parse_round_trip(time, decision, why, tags, files, snap, alternatives):
    d = Decision(time=time, decision=decision, why=why, tags=tags, files=files,
                 snapshot=f"snapshot-{snap:03d}", alternatives=alternatives)
    line = lineformat.render(d)
    assert "\n" not in line
    assert lineformat.parse(line) == d


def test_issue_example_line():
    d = lineformat.parse(
        "[2026-11-30 14:32] [arch] decision: use adapters | why: because vendors differ, so we isolate them "
        "| files: src/a/*.py, src/b.py | snapshot: snapshot-014 | alternatives: one big class"
    )
    assert d.tags == ("arch",)
    assert d.files == ("src/a/*.py", "src/b.py")
    assert d.snapshot_seq == 14
    assert d.alternatives == "one big class"


def test_chinese_labels():
    d = lineformat.parse(
        "[2024-05-01 14:32] 决策：接口层采用适配器模式 | 理由：因为供应商接口不同，所以隔离它们 | "
        "影响文件：src/adapters/*.ts、src/index.ts | 快照：snapshot-014 | 替代方案：直接调用"
    )
    assert d.time == "2024-05-01 14:32"
    assert d.decision == "接口层采用适配器模式"
    assert d.why.startswith("因为")
    assert d.files == ("src/adapters/*.ts", "src/index.ts")
    assert d.snapshot == "snapshot-014"
    assert d.alternatives == "直接调用"


@given(text.filter(lambda s: "|" not in s and "\\" not in s), text.filter(lambda s: "|" not in s and "\\" not in s))
def test_chinese_parser_property(decision, why):
    d = lineformat.parse(f"[2024-05-01 14:32] 决策：{decision} | 理由：{why}")
    assert (d.decision, d.why) == (decision.strip(), why.strip())


@pytest.mark.parametrize(
    "line",
    [
        "",
        "decision: no timestamp | why: because a, so b",
        "[2026-11-30 14:32] [arch] why: because a, so b",  # no decision
        "[2026-11-30 14:32] [arch] decision: torn before the why",
        "[2026-11-30 14:32] [arch] decision: x | why: because a, so b | fi",  # torn mid-field
        "[2026-11-30 14:3",  # torn in the timestamp
        "[2026-11-30 14:32] decision: a | decision: b | why: because a, so b",
    ],
)
def test_malformed_lines_raise(line):
    with pytest.raises(LineError):
        lineformat.parse(line)


@given(times, text, text)
def test_every_strict_prefix_of_a_line_is_rejected_or_a_prefix_decision(time, decision, why):
    line = lineformat.render(Decision(time=time, decision=decision, why=why))
    for cut in range(len(line)):
        try:
            d = lineformat.parse(line[:cut])
        except LineError:
            continue
        # a torn line may still parse; then it is visibly shorter than the original
        assert d != lineformat.parse(line)


@pytest.mark.parametrize("why", ["because the API is slow, so we cache", "since x; therefore y",
                                 "因为接口不同，所以用适配器", "Because of A. So B."])
def test_why_rule_accepts_cause_and_conclusion(why):
    lineformat.check_why(why)


@pytest.mark.parametrize("why", ["it is better", "so we cache because it is slow", "because it is slow",
                                 "also fine", "所以用适配器"])
def test_why_rule_rejects(why):
    with pytest.raises(LineError, match="cause and a conclusion"):
        lineformat.check_why(why)
