"""supervisor.session.screen: a raw tail rendered by pyte on demand, with real ANSI."""

from __future__ import annotations

import pyte
import pytest

from supervisor.session.screen import DEFAULT_TAIL, Screen

CSI = b"\x1b["


def test_plain_lines_and_prompt_cursor_line() -> None:
    screen = Screen(5, 20)
    screen.feed(b"banner\r\nline two\r\nfake> ")
    assert screen.lines()[:3] == ["banner", "line two", "fake>"]
    # The cursor line keeps the prompt's trailing space (cursor after it).
    assert screen.cursor_line() == "fake> "
    assert screen.cursor() == (2, 6)


def test_colours_are_not_text() -> None:
    screen = Screen(4, 40)
    screen.feed(b"\x1b[1;32mPassed\x1b[0m 3 tests\r\n\x1b[38;5;208m>\x1b[0m ")
    assert screen.lines()[0] == "Passed 3 tests"
    assert screen.cursor_line() == "> "
    assert screen.render().buffer[0][0].fg == "green"


def test_cursor_moves_and_erase_line_redraw() -> None:
    screen = Screen(6, 30)
    # A spinner redrawn in place with \r and erase-line, then a status line
    # written at an absolute position, then the cursor parked on the prompt row.
    screen.feed(b"working |\r\x1b[Kworking /\r\x1b[Kdone\r\n")
    screen.feed(CSI + b"5;1H" + b"status: ok" + CSI + b"3;1H" + b"$ ")
    lines = screen.lines()
    assert lines[0] == "done"
    assert lines[4] == "status: ok"
    assert screen.cursor_line() == "$ "
    assert screen.cursor() == (2, 2)


def test_clear_screen_hides_earlier_output() -> None:
    screen = Screen(4, 30)
    screen.feed(b"old output\r\nmore old\r\n")
    screen.feed(CSI + b"H" + CSI + b"2J" + b"fresh> ")
    assert screen.lines() == ["fresh>", "", "", ""]
    assert screen.cursor_line() == "fresh> "
    # The render started at the clear: the old bytes were not even parsed.
    assert b"old output" not in screen.raw_tail()


def test_alternate_screen_shows_what_is_drawn_in_it() -> None:
    screen = Screen(5, 40)
    screen.feed(b"shell history\r\n$ agent\r\n")
    screen.feed(CSI + b"?1049h" + CSI + b"H" + b"\x1b[7m Agent TUI \x1b[0m" + CSI + b"4;3H" + b"> ")
    lines = screen.lines()
    assert "shell history" not in screen.text()
    assert lines[0] == " Agent TUI"
    assert screen.cursor_line() == "  > "
    assert screen.render().buffer[0][1].reverse


def test_text_right_of_cursor_is_kept() -> None:
    screen = Screen(3, 30)
    # An input box: "│ > " then the right border, cursor moved back after "> ".
    screen.feed("│ > ".encode() + CSI + b"20G" + "│".encode() + CSI + b"5G")
    line = screen.cursor_line()
    assert line.startswith("│ > ") and line.endswith("│")


def test_scrolling_keeps_the_last_rows() -> None:
    screen = Screen(3, 20)
    screen.feed(b"".join(b"line %d\r\n" % i for i in range(10)) + b"> ")
    assert screen.lines() == ["line 8", "line 9", ">"]


def test_utf8_split_across_feeds() -> None:
    screen = Screen(2, 20)
    data = "héllo → ".encode()
    for i in range(len(data)):
        screen.feed(data[i:i + 1])
    assert screen.cursor_line() == "héllo → "


def test_render_is_cached_until_new_output() -> None:
    screen = Screen(4, 20)
    screen.feed(b"a\r\n> ")
    first = screen.render()
    assert screen.render() is first
    screen.cursor_line()
    screen.lines()
    assert screen.renders == 1
    screen.feed(b"x")
    assert screen.render() is not first
    assert screen.renders == 2
    assert screen.cursor_line() == "> x"


def test_resize_renders_at_the_new_size() -> None:
    screen = Screen(4, 20)
    screen.feed(b"> ")
    assert len(screen.render().display[0]) == 20
    screen.resize(10, 50)
    assert isinstance(screen.render(), pyte.Screen)
    assert len(screen.render().display) == 10 and len(screen.render().display[0]) == 50


def test_tail_cut_mid_sequence_starts_at_a_line() -> None:
    screen = Screen(4, 40, tail=64)
    # Fill well past the tail with coloured lines; whatever the cut, no half
    # escape sequence shows up as text.
    for i in range(50):
        screen.feed(b"\x1b[1;36mline %03d\x1b[0m\r\n" % i)
    screen.feed(b"> ")
    assert screen.cursor_line() == "> "
    assert all("[" not in line and ";" not in line for line in screen.lines())
    assert "line 049" in screen.lines()


def test_feeding_20_mb_costs_one_bounded_render() -> None:
    screen = Screen(40, 120)
    chunk = b"\x1b[1;32mReading\x1b[0m src/module.py: +3 -4 the quick brown fox\r\n" * 300
    total = 0
    while total < 20 * 1024 * 1024:
        screen.feed(chunk)
        total += len(chunk)
    screen.feed(b"fake> ")
    assert screen.fed_bytes == total + 6
    assert screen.renders == 0  # feeding never runs the emulator
    assert screen.cursor_line() == "fake> "
    screen.lines()
    assert screen.renders == 1
    assert screen.rendered_bytes <= DEFAULT_TAIL
    # The ring buffer never holds more than twice the tail.
    assert len(screen._buf) <= 2 * DEFAULT_TAIL


def test_huge_single_chunk_keeps_only_the_tail() -> None:
    screen = Screen(4, 20, tail=1024)
    screen.feed(b"x" * 100_000 + b"\r\n> ")
    assert len(screen._buf) == 1024
    assert screen.cursor_line() == "> "


@pytest.mark.parametrize("rows,cols,tail", [(0, 10, 10), (10, 0, 10), (10, 10, 0)])
def test_bad_sizes_are_rejected(rows: int, cols: int, tail: int) -> None:
    with pytest.raises(ValueError):
        Screen(rows, cols, tail)


def _whole(screen: Screen) -> tuple[list[str], tuple[int, int], int]:
    """What pyte shows of the whole kept tail (no cut to the last lines): the reference for the cut."""
    whole = pyte.Screen(screen.cols, screen.rows)
    data = bytes(screen._buf[-screen.tail:])
    if len(screen._buf) > screen.tail or screen._trimmed:
        data = data[data.find(b"\n") + 1:]
    pyte.ByteStream(whole).feed(data)
    return whole.display, (whole.cursor.y, whole.cursor.x), len(data)


def test_plain_output_renders_only_its_last_lines_with_the_same_screen() -> None:
    """Plain text (no cursor moves but newlines) is rendered from its last ``rows`` lines: the same
    screen and cursor as the whole tail, for a fraction of pyte's work."""
    import random

    rng = random.Random(19)
    pieces = [b"line of text\r\n", b"x" * 130 + b"\r\n", b"\r\n", b"50%\r60%\r\n", b"\x1b[31mred\x1b[0m\r\n",
              b"tab\there\r\n", "ünï\r\n".encode(), b"back\x08\x08ck\r\n", b"no newline yet", b"\n",
              b"y" * 20 + b"\r\n", b"z" * 80, b"\r", b"\x1b]0;title\x07"]
    moves = [b"\x1b[H", b"\x1b[2;5H", b"\x1bM", b"\x1b[A", b"\x0b"]
    cut = 0
    for trial in range(240):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 150)))
        if trial % 3 == 0:  # cursor moves: the whole tail is rendered
            data += rng.choice(moves) + b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        rows, cols = rng.choice([(5, 20), (40, 120), (24, 80)])
        screen = Screen(rows, cols, tail=rng.choice([DEFAULT_TAIL, 2048]))
        screen.feed(data)
        shown = screen.render()
        display, cursor, whole = _whole(screen)
        assert (shown.display, (shown.cursor.y, shown.cursor.x)) == (display, cursor), data[-400:]
        cut += screen.rendered_bytes < whole
        if trial % 3 == 0:
            assert screen.plain_tail() is None
    assert cut > 100  # most plain tails were cut to their last lines


def test_a_plain_flood_renders_a_screenful_not_the_tail() -> None:
    screen = Screen(40, 120)
    screen.feed(b"000000001 agent output line abcdefghijklmnopqrstuvwxyz0123456789\r\n" * 2000)
    assert screen.lines()[-2].startswith("000000001 agent output line") and screen.cursor() == (39, 0)
    assert screen.rendered_bytes < 40 * 100 < DEFAULT_TAIL


def test_a_blocking_screen_is_found_without_rendering_plain_output_that_cannot_show_one() -> None:
    from supervisor.adapters.base import BlockKind
    from supervisor.adapters.screens import screen_block

    screen = Screen(40, 120)
    screen.feed(b"\x1b[32mbuilding\x1b[0m module 3 of 9\r\n" * 500)
    assert screen_block("generic", screen) is None
    assert screen.renders == 0  # plain text with none of the screens' words: nothing to render
    screen.feed(b"Do you \x1b[1mtrust\x1b[0m the files in this folder?\r\n")
    assert screen_block("generic", screen) is BlockKind.TRUST and screen.renders == 1
    drawn = Screen(10, 60)  # drawn with cursor moves, one character at a time: always rendered
    drawn.feed(b"".join(b"\x1b[3;%dH%c" % (i + 1, c) for i, c in enumerate(b"Trust this folder?")))
    assert screen_block("generic", drawn) is BlockKind.TRUST
