"""Watching the project for file changes (inotify through ``watchdog``, never ``git status`` polling).

Polling costs a walk of the whole work tree every period, however little
changed, and sees a change only at the next period; inotify costs nothing
while nothing changes and reports a write within milliseconds.
``on_change(relpath)`` is called once per burst of writes to a file, from the
watcher's own thread.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from .revert import TEMP_PREFIX

log = structlog.get_logger("agentd.scope")
# watchdog (7.x) warns when a directory's watch is added twice while it is being created; harmless.
warnings.filterwarnings("ignore", message="Callback with id .* already exists", category=RuntimeWarning)

DEFAULT_IGNORE: tuple[str, ...] = (".git", ".agent", ".agentd", ".venv", "node_modules", "__pycache__")


class ChangeWatcher:
    """Calls ``on_change(relpath)`` for each file of ``root`` created, modified, moved or deleted.

    ``relpath`` is relative to ``root``, '/'-separated.  A move reports both
    the old and the new path (the old one is, in effect, deleted), and so does
    each file of a directory moved within the project.  Paths with a
    component named in ``ignore`` (or under an ``ignore`` entry containing
    '/', taken as a path from the root) are never reported, nor are
    directories themselves: only files (and symlinks).

    **Debouncing.**  Events only record "path P changed at time T" in a dict
    (the watchdog thread never sleeps, so no event is lost); a worker thread
    calls ``on_change(P)`` once P has been quiet for ``debounce`` seconds, or at
    the latest ``max_delay`` seconds after the first event of the burst, so a
    file written continuously is still reported.  ``on_change`` runs on that
    worker thread, never on an asyncio loop: the daemon hands it over with
    ``loop.call_soon_threadsafe``.  The same path may be reported again later
    (another burst, or the event of the daemon's own revert): handlers must be
    idempotent (compare :func:`content_digest`).

    **Cost.**  One recursive watchdog watch on the root: inotify costs nothing
    while nothing changes, whatever the project's size, but it takes one
    kernel watch per directory (about 1 KB each), ignored directories
    included: watchdog has no public way to skip a subtree, and splitting the
    root into one watch per top-level directory was tried and rejected,
    because a directory moved between two watches leaves watchdog reporting
    its later changes under the old path too.  A project whose
    ``node_modules`` holds more directories than ``fs.inotify.max_user_watches``
    makes :meth:`start` fail with an OSError that says so.

    **Limits.**  A directory moved out of the project in one ``rename`` is
    not reported (inotify names only the directory, and which files it held
    is not known here).  If the kernel's event queue overflows, watchdog
    rebuilds its watches but the lost events are not reported.
    """

    def __init__(
        self,
        root: Path,
        on_change: Callable[[str], None],
        ignore: Sequence[str] = DEFAULT_IGNORE,
        *,
        ignore_paths: Sequence[str] = (),
        debounce: float = 0.2,
        max_delay: float = 1.0,
    ) -> None:
        self.root = Path(root).absolute()
        self._root = os.fspath(self.root)
        self.on_change = on_change
        self._ignore_names = frozenset(i.strip("/") for i in ignore if "/" not in i.strip("/"))
        # ``ignore_paths``: paths from the root, with or without a '/' (agentd's state directory, units/)
        self._ignore_prefixes = tuple(i.strip("/") for i in [*(i for i in ignore if "/" in i.strip("/")), *ignore_paths]
                                      if i.strip("/"))
        self.debounce = debounce
        self.max_delay = max(max_delay, debounce)
        self._cond = threading.Condition()
        self._pending: dict[str, tuple[float, float]] = {}  # path -> (first event, last event)
        self._stopping = False
        self._started = False
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._handler: _Handler | None = None
        self._watched: dict[str, Any] = {}  # top-level directory -> its recursive watch
        self._dir_ops: list[tuple[str | None, str | None]] = []  # (gone, new) top-level dirs, for the worker

    # -- life cycle

    def start(self) -> None:
        """Start watching (OSError when inotify cannot watch ``root``)."""
        if self._started:
            raise RuntimeError("ChangeWatcher.start() called twice")
        self._started = True
        self._observer = Observer()
        self._observer.daemon = True
        self._handler = _Handler(self)
        # No kernel watch on ignored directories (.agentd's transcripts are written
        # all the time): the root alone, plus one recursive watch per other top-level
        # directory; top-level directories created later are added by the worker.
        self._observer.schedule(self._handler, self._root, recursive=False)
        for entry in sorted(os.scandir(self._root), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False) and not self.ignored(entry.name):
                self._watch_dir(entry.name)
        try:
            self._observer.start()
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot watch {self._root} (inotify watch limit? see fs.inotify.max_user_watches): {exc}"
            ) from exc
        self._worker = threading.Thread(target=self._run, name="scopeguard-debounce", daemon=True)
        self._worker.start()
        log.debug("scopeguard.watching", root=self._root)

    def stop(self) -> None:
        """Stop watching and join both threads (idempotent; pending changes are dropped)."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            if self._observer.is_alive() and threading.current_thread() is not self._observer:
                self._observer.join()
        if self._worker is not None and threading.current_thread() is not self._worker:
            self._worker.join()

    def __enter__(self) -> ChangeWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- called from the watchdog thread

    def _rel(self, abspath: str | bytes) -> str | None:
        p = os.fsdecode(abspath)
        if p == self._root or not p.startswith(self._root + os.sep):
            return None
        return p[len(self._root) + 1 :].replace(os.sep, "/")

    def ignored(self, rel: str) -> bool:
        """True when ``rel`` is never reported (an ignored component, prefix, or a revert temp file)."""
        parts = rel.split("/")
        if any(part in self._ignore_names for part in parts) or parts[-1].startswith(TEMP_PREFIX):
            return True
        return any(rel == p or rel.startswith(p + "/") for p in self._ignore_prefixes)

    def _watch_dir(self, name: str) -> None:
        if name in self._watched:
            return
        try:
            self._watched[name] = self._observer.schedule(self._handler, os.path.join(self._root, name), recursive=True)
        except OSError as exc:  # gone again, or the watch limit
            log.warning("scopeguard.watch_failed", directory=name, error=str(exc))

    def _unwatch_dir(self, name: str) -> None:
        watch = self._watched.pop(name, None)
        if watch is not None:
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError):
                pass

    def _note_dir(self, gone: str | None, new: str | None) -> None:
        """A top-level directory appeared, left, or was renamed: the worker fixes the watches."""
        gone = gone if gone is not None and "/" not in gone and gone in self._watched else None
        new = new if new is not None and "/" not in new and not self.ignored(new) else None
        if gone is None and new is None:
            return
        with self._cond:
            self._dir_ops.append((gone, new))
            self._cond.notify()

    def _apply_dir_op(self, gone: str | None, new: str | None) -> None:
        # A watch follows the inode: the old name's watch must go, or a renamed
        # directory's files would go on being reported under the old path.
        if gone is not None:
            self._unwatch_dir(gone)
        if new is None:
            return
        self._watch_dir(new)
        for dirpath, dirnames, filenames in os.walk(os.path.join(self._root, new)):
            dirnames[:] = [d for d in dirnames if not self.ignored(d)]
            for f in filenames:
                rel = self._rel(os.path.join(dirpath, f))
                self._note(rel)  # written before the watch existed, or moved in
                if gone is not None and rel is not None:
                    self._note(gone + rel[len(new):])  # the file left its old path

    def _note(self, rel: str | None) -> None:
        if rel is None or self.ignored(rel):
            return
        now = time.monotonic()
        with self._cond:
            first = self._pending.get(rel, (now, now))[0]
            self._pending[rel] = (first, now)
            self._cond.notify()

    # -- the worker thread

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    dir_ops, self._dir_ops = self._dir_ops, []
                    if dir_ops:
                        break
                    now = time.monotonic()
                    due = [p for p, (first, last) in self._pending.items() if now - last >= self.debounce or now - first >= self.max_delay]
                    if due:
                        break
                    timeout = None
                    if self._pending:
                        timeout = min(min(last + self.debounce, first + self.max_delay) for first, last in self._pending.values()) - now
                    self._cond.wait(timeout)
                if dir_ops:
                    due = []
                for p in due:
                    del self._pending[p]
            for gone, new in dir_ops:
                self._apply_dir_op(gone, new)
            for p in sorted(due):
                try:
                    self.on_change(p)
                except Exception:  # a failing handler must not stop the watcher
                    log.exception("scopeguard.on_change_failed", path=p)


class _Handler(FileSystemEventHandler):
    """Turns watchdog events into :meth:`ChangeWatcher._note` calls (never blocks)."""

    REPORTED = frozenset({"created", "modified", "moved", "deleted"})

    def __init__(self, watcher: ChangeWatcher) -> None:
        super().__init__()
        self.w = watcher

    def dispatch(self, event: Any) -> None:
        # Directories: watchdog itself reports the files of a directory moved
        # or created inside the watch; opened / closed: the write was "modified".
        if event.is_directory:
            if event.event_type == "created":
                self.w._note_dir(None, self.w._rel(event.src_path))
            elif event.event_type == "moved":
                self.w._note_dir(self.w._rel(event.src_path), self.w._rel(event.dest_path))
            elif event.event_type == "deleted":
                self.w._note_dir(self.w._rel(event.src_path), None)
            return
        if event.event_type not in self.REPORTED:
            return
        self.w._note(self.w._rel(event.src_path))
        if event.event_type == "moved" and event.dest_path:
            self.w._note(self.w._rel(event.dest_path))
