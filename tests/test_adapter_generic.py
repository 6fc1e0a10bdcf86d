"""The generic adapter: encoding, launch, context, and turn watching on real PTYs with the fake agent."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from supervisor.adapters import ADAPTERS, AdapterUnavailable, make_adapter
from supervisor.adapters.base import Turn
from supervisor.adapters.generic import (DEBOUNCE, DEBOUNCE_FACTOR, DEBOUNCE_MIN, DEFAULT_QUIET, WAKEUP_ENV, GenericAdapter,
                                        ScreenWatcher)
from supervisor.session.screen import Screen
from supervisor.session.pty import Session
from supervisor.config.settings import Settings
from supervisor.config.units import UnitLoadError, parse_unit
from tests.conftest import wait_until_async

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 15.0


def make(tmp_path: Path, agent: str = "", kind: str = "generic", command: list[str] | None = None, context: str = "") -> GenericAdapter:
    argv = command or [sys.executable, "-m", "supervisor.fakeagent"]
    text = f"[agent]\nkind = {json.dumps(kind)}\ncommand = {json.dumps(argv)}\n{agent}\n{context}\n"
    spec = parse_unit(tmp_path / "units" / "demo.toml", text)
    settings = Settings(project_root=tmp_path)
    adapter = make_adapter(spec, settings)
    assert isinstance(adapter, GenericAdapter)
    return adapter


# ---------------------------------------------------------------- pure parts


def test_every_kind_a_unit_may_name_has_its_adapter(tmp_path: Path) -> None:
    from supervisor.config.kinds import KINDS

    kinds = list(KINDS)  # the one list (config/kinds.py) that the unit file accepts
    assert set(kinds) == set(ADAPTERS) and "generic" in kinds
    for kind in kinds:
        spec = parse_unit(tmp_path / "u.toml", f'[agent]\nkind = "{kind}"\ncommand = ["/bin/true"]\n')
        adapter = make_adapter(spec, Settings(project_root=tmp_path))
        assert isinstance(adapter, ADAPTERS[kind]) and adapter.kind == kind
    with pytest.raises(UnitLoadError, match="unknown agent kind 'aider'"):
        parse_unit(tmp_path / "u.toml", '[agent]\nkind = "aider"\ncommand = ["/bin/true"]\n')


def test_a_kind_without_an_adapter_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(ADAPTERS, "codex")
    spec = parse_unit(tmp_path / "units" / "cx.toml", '[agent]\nkind = "codex"\ncommand = ["/bin/true"]\n')
    with pytest.raises(AdapterUnavailable, match=r"adapter 'codex' is not available yet \(unit cx: use kind = \"generic\"\)"):
        make_adapter(spec, Settings(project_root=tmp_path))
    assert issubclass(AdapterUnavailable, NotImplementedError)


def test_encode_one_line(tmp_path: Path) -> None:
    keys = make(tmp_path, "submit_pause = 0.25").encode("fix the bug")
    assert keys.steps == ((b"fix the bug", 0.25), (b"\r", 0.0))
    assert make(tmp_path).encode("héllo").payload() == "héllo\r".encode()
    assert make(tmp_path).encode("").payload() == b"\r"


def test_encode_several_lines_bracketed(tmp_path: Path) -> None:
    keys = make(tmp_path, "submit_pause = 0.1").encode("line one\nline two\n")
    assert keys.steps == ((b"\x1b[200~line one\nline two\n\x1b[201~", 0.1), (b"\r", 0.0))


def test_encode_several_lines_one_by_one(tmp_path: Path) -> None:
    keys = make(tmp_path, 'paste = "lines"\nsubmit_pause = 0.2').encode("a\nb\nc")
    assert keys.steps == ((b"a\r", 0.2), (b"b\r", 0.2), (b"c\r", 0.0))


def test_quit_keys(tmp_path: Path) -> None:
    assert make(tmp_path).quit().steps == ((b"\x04", 0.0),)
    keys = make(tmp_path, 'quit_command = "/quit"').quit()
    assert keys.payload() == b"/quit\r\x04" and keys.steps[0][1] >= 0.5


def test_interrupt_is_ctrl_c(tmp_path: Path) -> None:
    assert make(tmp_path).interrupt().payload() == b"\x03"


def test_launch_first_message_writes_the_wakeup_file_too(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    launch = adapter.launch("# Wakeup\nhello\n", "s1", {"PATH": "/bin"})
    assert launch.argv == [sys.executable, "-m", "supervisor.fakeagent"]
    assert launch.first_input == "# Wakeup\nhello\n" and launch.wakeup_via == "first-message"
    path = Path(launch.env[WAKEUP_ENV])
    assert path == adapter.state_dir("s1") / "wakeup.md"
    assert path.read_text() == "# Wakeup\nhello\n"
    assert path.is_relative_to(tmp_path / ".agentd")


def test_launch_file_none_and_no_wakeup(tmp_path: Path) -> None:
    by_file = make(tmp_path, 'wakeup_via = "file"').launch("W", "s2", {})
    assert by_file.first_input is None and by_file.wakeup_via == "file"
    assert Path(by_file.env[WAKEUP_ENV]).read_text() == "W"
    silent = make(tmp_path, 'wakeup_via = "none"').launch("W", "s3", {})
    assert silent.first_input is None and silent.wakeup_via == "none"
    assert Path(silent.env[WAKEUP_ENV]).read_text() == "W"
    nothing = make(tmp_path).launch(None, "s4", {})
    assert nothing.first_input is None and nothing.wakeup_via == "none" and WAKEUP_ENV not in nothing.env


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_watcher_logic_with_a_fake_clock() -> None:
    clock = FakeClock()
    watcher = ScreenWatcher(Screen(5, 40), re.compile(r"^> $"), 0.0, clock=clock)
    watcher.feed(b"banner\r\n> ")
    watcher.tick()
    assert watcher.state == Turn.UNKNOWN  # not quiet long enough yet
    clock.now += 0.2
    watcher.tick()
    assert watcher.idle and watcher.turns_ended == 1
    watcher.submitted()
    clock.now += 5
    watcher.tick()
    assert watcher.state == Turn.BUSY  # no output since the message: the old prompt does not count
    watcher.feed(b"do it\r\nworking\r\n")
    clock.now += 5
    watcher.tick()
    assert watcher.state == Turn.BUSY  # quiet, but no prompt on the cursor line
    watcher.feed(b"> ")
    watcher.tick()
    assert watcher.state == Turn.BUSY  # prompt, but not quiet for the debounce yet
    clock.now += 0.2
    watcher.tick()
    assert watcher.idle and watcher.turns_ended == 2


def test_watcher_quiet_rules_with_a_fake_clock() -> None:
    clock = FakeClock()
    default = ScreenWatcher(Screen(5, 40), None, 0.0, clock=clock)
    assert default.quiet == DEFAULT_QUIET
    quiet = ScreenWatcher(Screen(5, 40), None, 1.0, clock=clock)
    quiet.submitted()
    clock.now += 0.9
    quiet.tick()
    assert not quiet.idle
    clock.now += 0.2
    quiet.tick()
    assert quiet.idle  # quiet for 1 s since the submission, even without any output
    quiet.submitted()
    clock.now += 0.5
    quiet.feed(b"still working")
    clock.now += 0.9
    quiet.tick()
    assert not quiet.idle
    clock.now += 0.2
    quiet.tick()
    assert quiet.idle


# ---------------------------------------------------------------- real PTYs


@asynccontextmanager
async def running(adapter: GenericAdapter, tmp_path: Path, *flags: str, wakeup: str | None = None) -> AsyncIterator[tuple[Session, ScreenWatcher, Any]]:
    """Launch the fake agent through the adapter in a real PTY; kill it at the end."""
    session_id = f"t{time.monotonic_ns()}"
    base_env = dict(os.environ, PYTHONPATH=str(REPO), AGENTD_SESSION=session_id)
    launch = adapter.launch(wakeup, session_id, base_env)
    env = {**base_env, **launch.env}
    session = Session("demo", [*launch.argv, *flags], env=env, cwd=tmp_path, rows=24, cols=100,
                      transcript_dir=tmp_path / "transcripts", redact_env={}, session_id=session_id)
    session.spawn()
    watcher = adapter.watcher(session)
    session.add_listener(watcher.feed)
    session.attach(asyncio.get_running_loop())
    try:
        yield session, watcher, launch
    finally:
        session.signal_tree(signal.SIGKILL)
        deadline = time.monotonic() + TIMEOUT
        while session.reap() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        session.close()
        assert session.exit is not None, "the fake agent survived SIGKILL"


async def type_text(session: Session, adapter: GenericAdapter, watcher: ScreenWatcher, text: str) -> None:
    for data, pause in adapter.encode(text).steps:
        session.send(data)
        if pause:
            await asyncio.sleep(pause)
    watcher.submitted()


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_prompt_watcher_idle_busy_idle(tmp_path: Path) -> None:
    adapter = make(tmp_path, "prompt = '^fake> $'")

    async def scenario() -> None:
        async with running(adapter, tmp_path) as (session, watcher, _):
            assert await watcher.wait_idle(TIMEOUT)
            assert watcher.turns_ended == 1
            turns = watcher.turns_ended
            await type_text(session, adapter, watcher, "sleep 0.6")
            assert watcher.state == Turn.BUSY
            # Echoed, then silent for 0.6 s: with the prompt not on the cursor line it stays busy.
            assert not await watcher.wait_idle(0.4)
            assert await watcher.wait_turns(turns + 1, TIMEOUT)
            assert watcher.screen.cursor_line() == "fake> "
            assert "fake> sleep 0.6" in watcher.screen.lines()
            # Renders happen only when someone looks after a quiet moment, not per chunk.
            assert watcher.screen.renders < 40

    asyncio.run(scenario())


def test_quiet_fallback_without_prompt(tmp_path: Path) -> None:
    adapter = make(tmp_path, "quiet = 0.4")

    async def scenario() -> None:
        async with running(adapter, tmp_path) as (session, watcher, _):
            assert await watcher.wait_idle(TIMEOUT)
            await type_text(session, adapter, watcher, "work 3")
            start = time.monotonic()
            assert await watcher.wait_turns(2, TIMEOUT)
            assert time.monotonic() - start >= 0.4
            assert watcher.screen.renders == 0  # quiet mode never renders

    asyncio.run(scenario())


def test_prompt_that_never_matches_falls_back_to_quiet(tmp_path: Path) -> None:
    adapter = make(tmp_path, "prompt = '^never> $'\nquiet = 0.3")

    async def scenario() -> None:
        async with running(adapter, tmp_path) as (session, watcher, _):
            assert await watcher.wait_idle(TIMEOUT)
            assert not watcher.prompt_visible()

    asyncio.run(scenario())


def test_wakeup_as_first_message_and_bracketed_paste_arrive_whole(tmp_path: Path) -> None:
    adapter = make(tmp_path, "prompt = '^fake> $'")
    log = tmp_path / "input.jsonl"
    wakeup = "# Wakeup for demo\n\n" + "".join(f"- [{i:03d}] a fact about module {i}; ünïcode ok\n" for i in range(300))
    assert len(wakeup.encode()) > 12 * 1024

    async def scenario() -> None:
        async with running(adapter, tmp_path, "--input-log", str(log), wakeup=wakeup) as (session, watcher, launch):
            assert Path(launch.env[WAKEUP_ENV]).read_text() == wakeup
            assert session.env[WAKEUP_ENV] == launch.env[WAKEUP_ENV]
            assert await watcher.wait_idle(TIMEOUT)
            await type_text(session, adapter, watcher, launch.first_input)
            assert await watcher.wait_turns(2, TIMEOUT)
            await type_text(session, adapter, watcher, "first line\nsecond line\nthird")
            assert await watcher.wait_turns(3, TIMEOUT)
            await wait_until_async(lambda: len(read_log(log)) >= 2, TIMEOUT)
            messages = read_log(log)
            assert messages == [{"n": 1, "text": wakeup}, {"n": 2, "text": "first line\nsecond line\nthird"}]

    asyncio.run(scenario())


def test_paste_lines_mode_sends_each_line(tmp_path: Path) -> None:
    adapter = make(tmp_path, "prompt = '^fake> $'\npaste = \"lines\"")
    log = tmp_path / "input.jsonl"

    async def scenario() -> None:
        async with running(adapter, tmp_path, "--input-log", str(log)) as (session, watcher, _):
            assert await watcher.wait_idle(TIMEOUT)
            await type_text(session, adapter, watcher, "echo a\necho b")
            await wait_until_async(lambda: len(read_log(log)) >= 2, TIMEOUT)
            assert [m["text"] for m in read_log(log)] == ["echo a", "echo b"]

    asyncio.run(scenario())


def test_quit_keys_end_the_fake_agent(tmp_path: Path) -> None:
    adapter = make(tmp_path, "prompt = '^fake> $'")

    async def scenario() -> None:
        async with running(adapter, tmp_path) as (session, watcher, _):
            assert await watcher.wait_idle(TIMEOUT)
            for data, _pause in adapter.quit().steps:
                session.send(data)
            await wait_until_async(lambda: session.reap() is not None, TIMEOUT)
            assert session.exit is not None and session.exit.code == 0

    asyncio.run(scenario())


def test_context_is_the_transcript_estimate(tmp_path: Path) -> None:
    adapter = make(tmp_path, "prompt = '^fake> $'", context="[context]\nwindow = 5000")

    async def scenario() -> None:
        async with running(adapter, tmp_path) as (session, watcher, _):
            assert await watcher.wait_idle(TIMEOUT)
            before = adapter.context(session)
            await type_text(session, adapter, watcher, "work 40")
            assert await watcher.wait_turns(2, TIMEOUT)
            session.transcript.flush()
            after = adapter.context(session)
            assert (after.window, after.exact, after.source) == (5000, False, "transcript estimate")
            assert after.used == session.transcript.estimated_tokens
            assert after.used > before.used + 200  # 40 work lines is well over 200 tokens
            assert 0 < after.ratio < 1

    asyncio.run(scenario())


def test_debounce_adapts_to_the_pauses_inside_the_output() -> None:
    clock = FakeClock()
    watcher = ScreenWatcher(Screen(5, 40), re.compile(r"^> $"), 0.0, clock=clock)
    clock.now += 0.5  # the start-up is not a pause inside the output
    watcher.feed(b"banner\r\n")
    clock.now += 0.01
    watcher.feed(b"> ")
    assert watcher.debounce == DEBOUNCE_MIN
    assert watcher.due() == clock.now + DEBOUNCE_MIN  # a waiter wakes when the debounce ends, not at a tick
    clock.now += DEBOUNCE_MIN + 0.001
    watcher.tick()
    assert watcher.idle
    watcher.submitted()
    clock.now += 0.1  # the agent's thinking after a message is not a pause inside the output either
    watcher.feed(b"working\r\n")
    assert watcher.debounce == DEBOUNCE_MIN
    clock.now += 0.06  # a redraw in two steps: the prompt, then more output 60 ms later
    watcher.feed(b"> ")
    assert watcher.debounce == pytest.approx(DEBOUNCE_FACTOR * 0.06)
    clock.now += DEBOUNCE_MIN + 0.001
    watcher.tick()
    assert not watcher.idle  # quiet for the minimum, but this agent pauses longer than that
    clock.now += 0.1
    watcher.tick()
    assert watcher.idle
    watcher.feed(b"status\r\n")
    clock.now += 0.12  # never more than the debounce given
    watcher.feed(b"> ")
    assert watcher.debounce == DEBOUNCE


def test_a_wait_with_nothing_due_wakes_at_the_next_output() -> None:
    async def main() -> None:
        watcher = ScreenWatcher(Screen(5, 40), re.compile(r"^> $"), 0.0)
        assert watcher.next_wait(30.0) == 30.0  # nothing printed yet: nothing is due
        waiter = asyncio.ensure_future(watcher.wait_change(30.0))
        await asyncio.sleep(0)
        watcher.feed(b"> ")
        await asyncio.wait_for(waiter, 5.0)  # woken by the output, long before its 30 s
        assert 0 < watcher.next_wait(30.0) <= DEBOUNCE_MIN + 0.01

    asyncio.run(main())
