"""Blocking screens as the real CLIs draw them (issue 27 §1), read back from raw captures.

tests/data/screens/*.raw are the bytes Codex 0.169.0 and Claude Code 2.1.328
wrote to a 40x120 PTY, offline (a loopback-only network namespace), with no
login, an unreachable base URL, a fake server answering 429, a newer version
in Codex's version.json, an untrusted git workdir.  Each is fed to the
adapter's :class:`~supervisor.adapters.screens.ScreenProbe` as the turn
watcher feeds it, and must be named with what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from supervisor.adapters import make_adapter
from supervisor.adapters.base import BlockKind
from supervisor.adapters.screens import ANIMATED_EVERY, QUIET, ScreenProbe, find_block
from supervisor.config.settings import Settings
from supervisor.config.units import parse_unit
from supervisor.schedule import usage_limit
from supervisor.session.cleantext import CleanTextFilter

DATA = Path(__file__).parent / "data" / "screens"


def capture(name: str) -> bytes:
    return (DATA / f"{name}.raw").read_bytes()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fed(kind: str, data: bytes, clock: Clock) -> ScreenProbe:
    probe = ScreenProbe(kind, 40, 120, clock=clock)
    for i in range(0, len(data), 97):  # in chunks, as a PTY delivers them
        probe.feed(data[i:i + 97])
    return probe


@pytest.mark.parametrize("name, kind", [
    ("codex-login", BlockKind.LOGIN), ("codex-trust", BlockKind.TRUST), ("codex-update", BlockKind.UPDATE),
    ("codex-unreachable", BlockKind.UNREACHABLE),
    ("claude-login", BlockKind.LOGIN), ("claude-retry", BlockKind.UNREACHABLE), ("claude-dns", BlockKind.UNREACHABLE),
    ("claude-gaveup", BlockKind.UNREACHABLE),
    ("codex-limit", None), ("claude-limit", None),  # a usage limit is the usage scanner's (a wait, not a screen)
])
def test_each_real_screen_is_recognised_once_output_is_quiet(name: str, kind: BlockKind | None) -> None:
    clock = Clock()
    probe = fed(name.split("-")[0], capture(name), clock)
    if probe.check() is not None:  # still printing (or an animated screen, looked at at once): fine either way
        assert probe.check() is kind
    clock.now += QUIET
    assert probe.check() is kind
    assert (probe.line != "") is (kind is not None)


def test_claudes_retry_countdown_is_named_although_its_output_never_pauses() -> None:
    """Claude Code redraws a spinner and a countdown several times a second while it retries: the screen
    is looked at every ANIMATED_EVERY seconds all the same (the bug: never named in 4.5 minutes)."""
    clock = Clock()
    probe = fed("claude", capture("claude-retry"), clock)
    spinner = b"\x1b[H\r\x1b[34B\x1b[38;5;174m\xe2\x9c\xbb\x1b[39m\x1b[40;1H\x1b[38;3H"
    named_at = None
    for step in range(40):  # 8 s of a frame every 0.2 s, a look every second as the watch does
        clock.now += 0.2
        probe.feed(spinner)
        if step % 5 == 4 and probe.check() is BlockKind.UNREACHABLE and named_at is None:
            named_at = step
    assert named_at is not None and named_at <= 5 * (ANIMATED_EVERY + 1)
    assert "ECONNREFUSED" in probe.line and "retrying" in probe.line
    # while it goes on, each look answers the same (no flicker between looks: the freeze's clock keeps running)
    for _ in range(10):
        clock.now += 0.2
        probe.feed(spinner)
        assert probe.check() is BlockKind.UNREACHABLE
    # the retry succeeded: the line is drawn over, and the probe stops following the output
    clock.now += ANIMATED_EVERY
    probe.feed(b"\x1b[35;1H\x1b[2K\xe2\x97\x8f Hello! How can I help?\x1b[40;1H")
    assert probe.check() is None
    renders = probe.screen.renders
    for _ in range(20):
        clock.now += 0.2
        probe.feed(b"streaming the answer ")
        assert probe.check() is None
    assert probe.screen.renders == renders  # a working agent's output is not rendered while it flows


def test_a_streaming_agent_is_never_rendered_while_it_prints() -> None:
    clock = Clock()
    probe = ScreenProbe("claude", 40, 120, clock=clock)
    for _ in range(50):
        clock.now += 0.2
        probe.feed(b"\x1b[2K\rSign in with ChatGPT is what the docs say; working on it\r\n")
        assert probe.check() is None
    assert probe.screen.renders == 0


def test_an_error_left_in_the_scrollback_is_not_a_blocked_screen() -> None:
    """Claude's "Please run /login" and "API Error" lines stay on screen after the next turn succeeds; only
    the composer's placeholder right after such an error says the agent still waits."""
    blocked = "❯ hello\n  ⎿  Not logged in · Please run /login\n\n────\n❯ Once fixed, resend your message\n────"
    assert find_block("claude", blocked) is BlockKind.LOGIN
    later = "❯ hello\n  ⎿  Not logged in · Please run /login\n❯ again\n● Hi! What next?\n────\n❯ \n────"
    assert find_block("claude", later) is None
    gave_up = "● API Error: Can't reach the API server (ENOTFOUND)\n────\n❯ Resend your message to try again\n────"
    assert find_block("claude", gave_up) is BlockKind.UNREACHABLE
    assert find_block("claude", gave_up.replace("Resend your message to try again", "")) is None
    # a model writing about the screens is not one
    assert find_block("codex", "the update check said Update available, we skip it") is None


def test_the_usage_limits_of_both_clis_are_seen_with_codexs_reset_time() -> None:
    def clean(name: str) -> str:
        f = CleanTextFilter()
        return f.feed(capture(name)) + f.finish()

    codex = usage_limit(clean("codex-limit"))
    assert codex is not None and "usage limit" in codex.line
    assert codex.reset_at is not None  # "try again at 1:42 PM." is on the line after, where the TUI wrapped it
    claude = usage_limit(clean("claude-limit"))
    assert claude is not None and "429" in claude.line


def _claude(tmp_path: Path):
    spec = parse_unit(tmp_path / "units" / "cc.toml", '[agent]\nkind = "claude"\ncommand = ["/opt/claude"]\n')
    adapter = make_adapter(spec, Settings(project_root=tmp_path))
    adapter.launch("W", "s1", {})
    return adapter


def test_the_adapters_say_what_to_do_about_each_screen(tmp_path: Path) -> None:
    adapter = _claude(tmp_path)
    s = SimpleNamespace(session_id="s1", env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    watcher = adapter.watcher(s)
    watcher.feed(capture("claude-dns"))
    adapter._runs["s1"].probe.last_output_at -= 2 * QUIET
    blocked = adapter.blocked(s)
    assert blocked is not None and blocked.kind is BlockKind.UNREACHABLE
    assert "http://127.0.0.1:9" in blocked.todo and "EAI_AGAIN" in blocked.todo and "ANTHROPIC_BASE_URL" in blocked.todo

    login = _claude(tmp_path / "b")
    watcher = login.watcher(s)
    watcher.feed(capture("claude-login"))
    login._runs["s1"].probe.last_output_at -= 2 * QUIET
    blocked = login.blocked(s)
    assert blocked is not None and blocked.kind is BlockKind.LOGIN and "ANTHROPIC_API_KEY" in blocked.todo

    binary = tmp_path / "bin" / "codex"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    spec = parse_unit(tmp_path / "units" / "cx.toml", f'[agent]\nkind = "codex"\ncommand = [{json.dumps(str(binary))}]\n'
                                                       '[codex]\nhome = "private"\n')
    for name, kind, words in (("codex-login", BlockKind.LOGIN, "codex login"), ("codex-update", BlockKind.UPDATE, "Skip"),
                              ("codex-unreachable", BlockKind.UNREACHABLE, "request_max_retries")):
        codex = make_adapter(spec, Settings(project_root=tmp_path))
        codex.launch(None, "s1", {})
        cs = SimpleNamespace(session_id="s1", env={}, cwd=tmp_path)
        codex.watcher(cs).feed(capture(name))
        codex._sessions["s1"].probe.last_output_at -= 2 * QUIET
        blocked = codex.blocked(cs)
        assert blocked is not None and blocked.kind is kind and words in blocked.todo, (name, blocked)
