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
).map(lambda fs: tuple(f for f in fs if f.strip() == f and f.lower() not in lineformat.NO_FILES and not set(f) & set("，、")))


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


# ------------------------------------------------------------------ each rule of the line at its edge
def test_a_line_cut_inside_a_backslash_escape_is_torn_but_an_escaped_backslash_is_whole():
    whole = lineformat.render(Decision(time="2026-11-30 14:32", decision="a", why="because x, so y\\"))
    assert whole.endswith("so y\\\\")
    assert lineformat.parse(whole).why == "because x, so y\\"
    with pytest.raises(LineError, match="inside a backslash escape"):
        lineformat.parse(whole[:-1])
    with pytest.raises(LineError, match="inside a backslash escape"):
        lineformat.parse(whole + "\\\\\\")


@pytest.mark.parametrize("none", ["none", "None", "NONE", "-", "无"])
def test_files_none_is_no_file(none):
    head = "[2026-11-30 14:32] decision: a | why: because x, so y | files: "
    assert lineformat.parse(head + none).files == ()
    assert lineformat.parse(head + f"src/a.py, {none}, src/b.py").files == ("src/a.py", "src/b.py")


def test_every_chinese_and_english_label_names_its_field():
    line = ("[2024-05-01 14:32] 决定：用适配器 | 原因：由于接口不同，因此隔离 | 文件：a.ts，b.ts、c.ts | 快照：snapshot-7 "
            "| 备选方案：直接调用 | 标签：arch，naming、deps task")
    d = lineformat.parse(line)
    assert (d.decision, d.why, d.files, d.snapshot, d.alternatives) == (
        "用适配器", "由于接口不同，因此隔离", ("a.ts", "b.ts", "c.ts"), "snapshot-7", "直接调用")
    assert d.tags == ("arch", "naming", "deps", "task") and d.snapshot_seq == 7
    english = lineformat.parse("[2024-05-01 14:32] [a] [b.c-1] DECISION: x | Why: because y, so z | Files: f "
                               "| Snapshot: snapshot-0009 | Alternatives: w | note: kept | 标签: t")
    assert (english.decision, english.files, english.snapshot_seq, english.alternatives) == ("x", ("f",), 9, "w")
    assert english.tags == ("a", "b.c-1", "t") and english.extra == (("note", "kept"),)


def test_unknown_fields_are_kept_in_order_and_rendered_back():
    d = lineformat.parse("[2026-11-30 14:32] decision: a | why: because x, so y | ticket: T-1 | owner: ann\\|bob")
    assert d.extra == (("ticket", "T-1"), ("owner", "ann|bob"))
    assert lineformat.render(d) == "[2026-11-30 14:32] decision: a | why: because x, so y | ticket: T-1 | owner: ann\\|bob"


@pytest.mark.parametrize(("line", "error"), [
    ("[2026-11-30 14:32] decision: a | why: because x, so y | no label here", "has no 'label:' prefix"),
    ("[2026-11-30 14:32] decision: a | why: because x, so y | why: because z, so w", "appears twice"),
    ("[2026-11-30 14:32] decision:  | why: because x, so y", "no 'decision:'"),
    ("[2026-11-30 14:32] decision: a | why: ", "no 'why:'"),
    ("2026-11-30 14:32 decision: a | why: because x, so y", "does not start with a [YYYY-MM-DD HH:MM] timestamp"),
])
def test_each_malformed_part_is_named(line, error):
    with pytest.raises(LineError, match=error.replace("[", r"\[").replace("(", r"\(")):
        lineformat.parse(line)


def test_empty_fields_between_bars_are_skipped():
    d = lineformat.parse("[2026-11-30 14:32]   decision: a |  | why: because x, so y | ")
    assert (d.decision, d.why, d.files, d.extra) == ("a", "because x, so y", (), ())


def test_render_writes_only_what_is_set_and_escapes_it():
    d = Decision(time="2026-11-30 14:32", decision="a|b", why="because x\ny, so z\r", tags=("arch", "t2"),
                 files=("src/a,b.py", "c\\d"), snapshot="snapshot-014", alternatives="p | q")
    line = lineformat.render(d)
    assert line == ("[2026-11-30 14:32] [arch] [t2] decision: a\\|b | why: because x\\ny, so z | "
                    "files: src/a\\,b.py, c\\\\d | snapshot: snapshot-014 | alternatives: p \\| q")
    assert lineformat.parse(line) == Decision(time=d.time, decision="a|b", why="because x\ny, so z", tags=d.tags,
                                              files=d.files, snapshot=d.snapshot, alternatives="p | q")
    assert lineformat.render(Decision(time="2026-11-30 14:32", decision="a", why="w")) == \
        "[2026-11-30 14:32] decision: a | why: w"


def test_escape_and_unescape():
    assert lineformat.escape("a\\b|c,d\r\ne") == "a\\\\b\\|c,d\\ne"
    assert lineformat.escape("a,b", comma=True) == "a\\,b"
    assert lineformat._unescape("plain") == "plain"
    assert lineformat._unescape("a\\nb\\|c\\\\d\\,e") == "a\nb|c\\d,e"
    assert lineformat._unescape("end\\") == "end\\"  # a lone backslash at the end stays
    assert lineformat._split_unescaped("a,b\\,c,d\\", ",") == ["a", "b\\,c", "d\\"]
    assert lineformat._split_unescaped("a|b", "|") == ["a", "b"]
    assert lineformat._split_unescaped("a\\|", "|") == ["a\\|"]  # an escaped separator at the very end


@pytest.mark.parametrize("why", ["since it is slow, therefore we cache", "due to load, thus a queue",
                                 "given that it leaks, hence the pool", "because of A, which means B",
                                 "由于接口不同，因此隔离", "因为慢，因而缓存"])
def test_every_cause_and_conclusion_word(why):
    lineformat.check_why(why)


def test_the_why_rule_names_its_form_and_the_text():
    with pytest.raises(LineError) as no_cause:
        lineformat.check_why("it is better")
    assert str(no_cause.value) == f"{lineformat.WHY_RULE}; no cause found in 'it is better'"
    assert "'because <cause>, so <conclusion>'" in lineformat.WHY_RULE and "因为…所以…" in lineformat.WHY_RULE
    with pytest.raises(LineError, match="no conclusion after the cause in 'so what, because'"):
        lineformat.check_why("so what, because")


def test_tags_are_short_words():
    assert lineformat.check_tag("a" * 32) == "a" * 32 and lineformat.check_tag("v1.2-rc_3") == "v1.2-rc_3"
    for bad in ("a" * 33, "", "-lead", "has space", "中文"):
        with pytest.raises(LineError, match="is not usable"):
            lineformat.check_tag(bad)


def test_snapshot_numbers_and_sort_keys():
    def d(snapshot: str) -> Decision:
        return Decision(time="2026-11-30 14:32", decision="a", why="w", snapshot=snapshot)

    assert d("snapshot-014").snapshot_seq == 14 and d("").snapshot_seq == -1
    assert d("snapshot-01JDZ8Q4X5Y6Z7A8B9C0D1E2F3").snapshot_seq == -1
    assert d("").snapshot_key == "" and d("snapshot-014").snapshot_key == "0:000000000014"
    assert d("snapshot-01JDZ8Q4X5Y6Z7A8B9C0D1E2F3").snapshot_key == "1:01JDZ8Q4X5Y6Z7A8B9C0D1E2F3"
