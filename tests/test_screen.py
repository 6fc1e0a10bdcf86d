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
