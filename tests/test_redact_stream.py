"""The redactor's stream mechanics, pinned where the mutation run found them loose (bench/mutation).

Pure: no process.  The secret rules themselves are tests/test_secret_matcher.py's; here, what a stream
releases when: the raw bytes at a flush, an unfinished escape that is no terminal string, the line moves
of the clean text at the cut, and the two index helpers (a held tail's raw index, the released text with
spans and moves) against plain reference implementations.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.session.cleantext import split_text, text_runs
from supervisor.session.redact import REDACTED, Redactor, _cut_text


def test_flush_releases_the_raw_bytes_with_the_escapes_inside_the_held_part() -> None:
    r = Redactor()
    assert r.feed(b"x \x1b[1mghp_R4\x1b[0mnD0m") == b"x \x1b[1m"
    assert r.flush() == b"ghp_R4\x1b[0mnD0m"  # the raw bytes, escape included (the text would lose it)
    assert r.pending == 0 and r.flush() == b""


def test_an_unfinished_escape_is_released_at_once_unless_it_may_begin_a_string() -> None:
    r = Redactor()
    assert r.feed(b"hello\x1b[") == b"hello\x1b[" and r.pending == 0  # a CSI cannot hold a key: out now
    assert r.feed(b"31mworld ") == b"31mworld "
    r = Redactor()
    assert r.feed(b"hello\x1b]0;ti") == b"hello" and r.pending > 0  # a title may: held until it ends
    assert r.feed(b"tle\x07 ") == b"\x1b]0;title\x07 "


def test_a_line_move_at_the_cut_is_released_with_the_text_before_it() -> None:
    r = Redactor()
    r.feed_text(b"a context line long enough ")  # what was released before: the context of what follows
    raw, text = r.feed_text(b"two \x1b[Bghp_R4nD0m")
    assert (raw, text) == (b"two \x1b[B", b"two \n")  # the move belongs to the released part
    assert r.flush_text() == (b"ghp_R4nD0m", b"ghp_R4nD0m")


def test_a_line_move_inside_the_held_part_waits_with_it() -> None:
    r = Redactor()
    r.feed_text(b"a context line long enough ")
    raw, text = r.feed_text(b"two ghp_R4\x1b[BnD0m")
    assert (raw, text) == (b"two ", b"two ")  # no newline yet: its move is in what is held
    assert r.flush_text() == (b"ghp_R4\x1b[BnD0m", b"ghp_R4\nnD0m")


# -- the helpers against references ---------------------------------------------------------------

_PIECES = st.sampled_from([b"a", b"b", b"ab", b" ", b"\x1b[1m", b"\x1b[0m", b"\x1b[2B", b"1m", b"\x1b[31m", b"\r"])


def _raw_index(body: bytes, t: int) -> int:
    """Where text index ``t`` of ``body`` is in the raw bytes, the slow and obvious way."""
    for text_start, raw_start, length in text_runs(body):
        if text_start <= t < text_start + length:
            return raw_start + (t - text_start)
    return len(body)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=12), data=st.data())
def test_a_held_tails_raw_index_is_where_its_text_starts(pieces: list[bytes], data: st.DataObject) -> None:
    body = b"".join(pieces)
    text, _moves = split_text(body)
    if not text:
        return
    t = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    if b"\x1b[2B" in body or b"\r" in body:  # the helper is only asked where the text has no line moves after t
        return
    assert Redactor._tail_raw(body, len(body), text, t) == _raw_index(body, t)


def test_a_held_tail_whose_bytes_also_follow_an_escape_is_found_the_slow_way() -> None:
    body = b"1m\x1b[1m1m"  # the text is "1m1m"; its last two bytes match the raw tail, its first two do too
    text, _ = split_text(body)
    assert text == b"1m1m"
    assert Redactor._tail_raw(body, len(body), text, 0) == 0
    assert Redactor._tail_raw(body, len(body), text, 2) == 6
    body = b"m\x1b[31mX"  # "mX": the raw tail "mX" ends the escape, so it is not where the text's "m" is
    text, _ = split_text(body)
    assert (text, Redactor._tail_raw(body, len(body), text, 0)) == (b"mX", 0)


def test_a_name_released_before_its_value_still_marks_the_value() -> None:
    r = Redactor()
    assert r.feed(b"passwd") == b"passwd"  # nothing to hold yet: it is out
    assert r.feed(b" = hunter2hunter2 ok") == b" = [REDACTED] ok"  # the released name is still its context


def _cut_reference(q: bytes, b: int, cut: int, merged: list[tuple[int, int, bool]], moves: list[int]) -> bytes:
    """q[b:cut], each span replaced by the marker (a move inside a span after it), a newline per move."""
    at = [m + b for m in moves if m <= cut - b]
    out = bytearray()
    p = b
    spans = {s: (e, mark) for s, e, mark in merged}
    while p <= cut:
        if p in spans:
            out += b"\n" * at.count(p)
            e, mark = spans[p]
            out += REDACTED if mark else b""
            out += b"\n" * sum(1 for m in at if p < m < e)
            p = e
            continue
        out += b"\n" * at.count(p)
        if p == cut:
            break
        out += q[p:p + 1]
        p += 1
    return bytes(out)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_the_released_text_is_the_text_with_markers_and_a_newline_per_move(data: st.DataObject) -> None:
    b = data.draw(st.integers(min_value=0, max_value=4))
    q = b"c" * b + data.draw(st.binary(min_size=1, max_size=24).map(lambda x: bytes(65 + c % 26 for c in x)))
    cut = data.draw(st.integers(min_value=b, max_value=len(q)))
    bounds = sorted(set(data.draw(st.lists(st.integers(min_value=b, max_value=cut), max_size=6))))
    merged = [(bounds[i], bounds[i + 1], data.draw(st.booleans())) for i in range(0, len(bounds) - 1, 2)]
    moves = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(q) - b), max_size=5)))
    assert _cut_text(q, b, cut, merged, moves) == _cut_reference(q, b, cut, merged, moves)


def test_the_released_text_around_spans_and_moves() -> None:
    q = b"ctxABCDEFGH"
    assert _cut_text(q, 3, 11, [(5, 8, True)], [1]) == b"A\nB" + REDACTED + b"FGH"  # a move before a span
    assert _cut_text(q, 3, 11, [(5, 8, True)], [2]) == b"AB\n" + REDACTED + b"FGH"  # at its start: before it
    assert _cut_text(q, 3, 11, [(5, 8, True)], [3]) == b"AB" + REDACTED + b"\nFGH"  # inside: after the marker
    assert _cut_text(q, 3, 11, [(5, 8, True)], [6]) == b"AB" + REDACTED + b"F\nGH"  # after the last span
    assert _cut_text(q, 3, 9, [(5, 8, True)], [6, 7]) == b"AB" + REDACTED + b"F\n"  # past the cut: not yet
