"""The inbox is woken by inotify, not a poll (issue 29: idle CPU): real inotify, real files, a real loop.

With 50 idle agents the inbox's five passes a second were half the daemon's idle CPU. Now a pass runs
when a request arrives (or at the latest every ``ALIVE_EVERY`` seconds, made an hour here, so a request
served proves the wake-up), and where inotify cannot be had the inboxes are polled as before.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from supervisor.daemon import dirwake, inbox as inbox_mod
from supervisor.daemon.dirwake import DirWake
from supervisor.daemon.inbox import Inbox
from supervisor.durable import atomic_write
from supervisor.memory.channel import encode_request, ensure_inbox
from supervisor.memory.scaffold import init_store
from tests.conftest import wait_until_async


def _spec(module: str) -> SimpleNamespace:
    return SimpleNamespace(module=module, scope=SimpleNamespace(paths=()), agent=SimpleNamespace(env={}))


def request(box: Path, ident: str, text: str) -> None:
    atomic_write(box / f"{ident}.req", encode_request("note", {"text": text, "kind": "hypothesis"}))


# ---------------------------------------------------------------------- DirWake itself
def test_a_request_wakes_and_the_daemons_own_files_do_not(tmp_path: Path) -> None:
    inbox, state, _passes = _inbox(tmp_path, ("a",))
    box = ensure_inbox(state, "a")

    async def main() -> None:
        woken = asyncio.Event()
        watch = inbox._open_watch(asyncio.get_running_loop(), woken)  # the inbox's own filter
        assert watch is not None
        try:
            assert watch.watch(str(box)) and watch.paths == [str(box)]
            # inotify queues an event when the call returns: reading the queue now sees them all
            atomic_write(box / "00000000000000aa.reply", b"{}")  # the daemon's reply: temp file, rename
            (box / ".alive").touch()
            os.utime(box / ".alive")  # the heartbeat
            (box / "notes.txt").write_text("an agent's stray file")
            watch._readable()
            assert not woken.is_set()
            request(box, "00000000000000ab", "hello")
            watch._readable()
            assert woken.is_set()
            woken.clear()
            assert watch.watch(str(state / "inbox"))
            ensure_inbox(state, "b")  # a unit's first session creates its inbox: watched at the next pass
            watch._readable()
            assert woken.is_set()
        finally:
            watch.close()

    asyncio.run(main())


def test_a_link_is_never_watched_and_a_removed_directory_is_forgotten(tmp_path: Path) -> None:
    box, elsewhere = tmp_path / "box", tmp_path / "elsewhere"
    box.mkdir()
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    woken: list[int] = []

    async def main() -> None:
        watch = DirWake(lambda: woken.append(1))
        watch.attach(asyncio.get_running_loop())
        try:
            assert not watch.watch(str(tmp_path / "link"))  # an agent's swapped-in link: nothing of its choosing
            assert not watch.watch(str(tmp_path / "missing"))
            assert watch.watch(str(box))
            box.rmdir()
            await wait_until_async(lambda: woken, 10, what="the removal's wake-up")
            await wait_until_async(lambda: not watch.watching(str(box)), 10, what="the watch to be forgotten")
            box.mkdir()
            assert watch.watch(str(box))  # its successor is watched anew
        finally:
            watch.close()
        assert watch.fd == -1 and watch.paths == []

    asyncio.run(main())


# ---------------------------------------------------------------------- the inbox, woken
def _inbox(tmp_path: Path, units: tuple[str, ...], **kw: object) -> tuple[Inbox, Path, list[int]]:
    root = tmp_path / "proj"
    root.mkdir()
    init_store(root)
    state = root / ".agentd"
    inbox = Inbox(root, state, lambda: {u: _spec(u) for u in units}, **kw)  # type: ignore[arg-type]
    passes: list[int] = []
    real = inbox.collect

    def counted(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        passes.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    inbox.collect = counted  # type: ignore[method-assign]
    return inbox, state, passes


def test_a_request_to_an_idle_inbox_is_served_without_polling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbox_mod, "ALIVE_EVERY", 3600.0)  # no fallback pass within the test
    inbox, state, passes = _inbox(tmp_path, ("a", "b"), interval=0.001)
    boxes = {u: ensure_inbox(state, u) for u in ("a",)}  # b's inbox does not exist yet

    async def main() -> None:
        served = asyncio.ensure_future(inbox.run())
        try:
            await wait_until_async(lambda: passes, 10, what="the first pass")
            request(boxes["a"], "00000000000000c1", "from a")
            await wait_until_async(lambda: (boxes["a"] / "00000000000000c1.reply").exists(), 30, what="a's reply")
            # a poll every millisecond would have made hundreds of passes while a's worker process ran
            assert len(passes) <= 6, len(passes)
            # an inbox created after the start (a unit's first session) is watched and served too
            b = ensure_inbox(state, "b")
            await asyncio.sleep(0)
            await wait_until_async(lambda: str(b) in _watched(inbox), 10, what="b's inbox watched")
            request(b, "00000000000000c2", "from b")
            await wait_until_async(lambda: (b / "00000000000000c2.reply").exists(), 30, what="b's reply")
        finally:
            served.cancel()

    asyncio.run(main())
    engram = (tmp_path / "proj" / ".agent" / "engram.md").read_text()
    assert "[@a] from a" in engram and "[@b] from b" in engram


def _watched(inbox: Inbox) -> list[str]:
    return inbox._watch.paths if getattr(inbox, "_watch", None) is not None else []


def test_without_inotify_the_inboxes_are_polled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_a: object, **_k: object) -> None:
        raise OSError(24, "inotify_init1: Too many open files")

    monkeypatch.setattr(inbox_mod, "DirWake", refused)
    monkeypatch.setattr(inbox_mod, "ALIVE_EVERY", 3600.0)
    inbox, state, passes = _inbox(tmp_path, ("a",), interval=0.01)
    box = ensure_inbox(state, "a")

    async def main() -> None:
        served = asyncio.ensure_future(inbox.run())
        try:
            await wait_until_async(lambda: passes, 10, what="the first pass")
            request(box, "00000000000000d1", "polled")
            await wait_until_async(lambda: (box / "00000000000000d1.reply").exists(), 30, what="the polled reply")
            assert len(passes) > 2  # found by a later pass of the poll, not by a wake-up
        finally:
            served.cancel()

    asyncio.run(main())


def test_dirwake_reports_an_unusable_inotify_as_oserror(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoInotify:
        def inotify_init1(self, _flags: int) -> int:
            return -1

    monkeypatch.setattr(dirwake, "_libc", NoInotify())
    with pytest.raises(OSError, match="inotify_init1"):
        DirWake(lambda: None)
