"""The scope guard: see file changes as they happen, attribute them to a unit, judge them, undo them.

Three parts, kept apart so that the daemon can wire them together on its loop:

* **Watching** (:class:`ChangeWatcher`).  Changes are seen through inotify (the
  ``watchdog`` library), not by polling ``git status``: polling costs a walk of
  the whole work tree every period, however little changed, and sees a change
  only at the next period; inotify costs nothing while nothing changes and
  reports a write within milliseconds.  ``on_change(relpath)`` is called once
  per burst of writes to a file, from the watcher's own thread.

* **Policy** (pure functions, no I/O): :func:`forbid_globs_from_constraints`,
  :func:`attribute`, :func:`check`, :func:`overlaps`.  Globs have the project's
  semantics (:func:`supervisor.memory.gitfiles.matches`): ``*`` stays within a
  directory, ``**`` crosses directories, a plain path names a file or a whole
  directory.

* **Undo** (:func:`revert`, :func:`content_digest`): put a file back to its
  content in ``HEAD``, else to the blob a snapshot recorded, else move the new
  file into a quarantine directory.  Nothing is ever deleted: the content being
  replaced is copied into the quarantine directory first.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import stat
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from .memory.gitfiles import matches

log = structlog.get_logger("agentd.scopeguard")
# watchdog (7.x) warns when a directory's watch is added twice while it is being created; harmless.
warnings.filterwarnings("ignore", message="Callback with id .* already exists", category=RuntimeWarning)

DEFAULT_IGNORE: tuple[str, ...] = (".git", ".agent", ".agentd", ".venv", "node_modules", "__pycache__")
#: Prefix of the temporary files :func:`revert` writes; the watcher never reports them.
TEMP_PREFIX = ".agentd-revert-"
GIT_TIMEOUT = 60.0


# --------------------------------------------------------------------------- watching


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
        debounce: float = 0.2,
        max_delay: float = 1.0,
    ) -> None:
        self.root = Path(root).absolute()
        self._root = os.fspath(self.root)
        self.on_change = on_change
        self._ignore_names = frozenset(i.strip("/") for i in ignore if "/" not in i.strip("/"))
        self._ignore_prefixes = tuple(i.strip("/") for i in ignore if "/" in i.strip("/"))
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


# --------------------------------------------------------------------------- policy

_FORBID_LINE = re.compile(r"^\s*(?:[-*+]\s+)?forbid\s*:\s*(?P<globs>.*)$", re.IGNORECASE)


def forbid_globs_from_constraints(text: str) -> list[str]:
    """The forbidden globs that ``constraints.md`` declares.

    Format: a line that is ``forbid: GLOB[, GLOB...]``, optionally as a list
    item (``- forbid: ...``, ``* forbid: ...``) and with any indentation;
    ``forbid`` is case-insensitive.  Globs are separated by commas (or
    whitespace), and may each be wrapped in backticks or quotes.  A ``#``
    preceded by a space starts a comment.  Lines inside fenced code blocks
    (```` ``` ```` or ``~~~``) are documentation, not rules, and are ignored,
    as is "forbid:" anywhere but at the start of a line.  Examples::

        - forbid: migrations/**
        forbid: db/schema.sql, db/*.sql   # the DBA owns these
        * Forbid: `vendor/**`

    Duplicates are dropped; order is kept.
    """
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            continue
        if fence is not None:
            continue
        m = _FORBID_LINE.match(line)
        if not m:
            continue
        globs = re.split(r"\s+#", m.group("globs"), maxsplit=1)[0]
        for raw in re.split(r"[,\s]+", globs):
            glob = raw.strip().strip("`'\"").strip()
            if glob and glob not in out:
                out.append(glob)
    return out


@dataclass
class Candidate:
    """A running unit that could have made a change.

    ``workdir_rel`` is its session's working directory relative to the project
    root ("" or "." for the root itself); ``busy`` means mid-turn;
    ``last_output_age`` is seconds since its agent last printed anything.
    """

    unit: str
    workdir_rel: str
    scope: list[str]
    forbid: list[str]
    shared: list[str]
    busy: bool
    last_output_age: float


@dataclass
class Attribution:
    """Who made a change: ``unit`` (None when unknown), ``candidates`` (see :func:`attribute`), and why."""

    unit: str | None
    candidates: list[str]
    why: str


#: Output within this many seconds counts as "active" for :func:`attribute`.
RECENT_OUTPUT = 5.0


def _under(path: str, directory: str) -> bool:
    d = directory.strip().strip("/")
    if d.startswith("./"):
        d = d[2:]
    return d in ("", ".") or path == d or path.startswith(d + "/")


def _allowed(path: str, c: Candidate) -> bool:
    return check(path, c.scope, c.forbid, ()) is None


def attribute(path: str, candidates: Sequence[Candidate], *, recent: float = RECENT_OUTPUT) -> Attribution:
    """Attribute a change of ``path`` to one of the running units, or say it cannot.

    The heuristic, in order:

    1. The units whose session runs in a directory containing ``path`` (its
       working directory is ``path``'s directory or an ancestor).  One such
       unit: it is the one.  None: every running unit is considered instead,
       but then only an *active* one (see 2) is ever blamed, since nobody runs
       where the file is.
    2. Among several, the *active* ones: busy (mid-turn), or with output
       within ``recent`` seconds.  Exactly one active: it is the one.  None
       active: all of them stay in the running.
    3. Among those still several, the ones for which the change is allowed
       (inside their scope, not forbidden): exactly one, it is the one.  So an
       ambiguous change is never blamed on a unit it would be a violation for
       when another unit was allowed to make it.
    4. Otherwise: ambiguous, ``unit`` is None.

    ``candidates`` of the result names the units the choice was finally made
    among (for an ambiguous result, every unit that may have made it).

    Limits: the kernel does not say which process wrote a file, so this is a
    guess from where sessions run and when they were active.  A change a
    person makes in a directory where exactly one agent runs is blamed on that
    agent; two agents active in the same directory are told apart only by
    their scopes; a write that lands seconds after a turn ended may still be
    given to the unit that was busy then only if it printed within ``recent``.
    """
    if not candidates:
        return Attribution(None, [], "no unit is running")
    pool = [c for c in candidates if _under(path, c.workdir_rel)]
    where = "runs in a directory containing it"
    nobody_here = not pool
    if nobody_here:
        pool = list(candidates)
        where = "is running (none runs in a directory containing it)"
    if len(pool) == 1 and not nobody_here:
        c = pool[0]
        return Attribution(c.unit, [c.unit], f"{c.unit} is the only unit whose session {where}")
    active = [c for c in pool if c.busy or c.last_output_age <= recent]
    if len(active) == 1:
        c = active[0]
        how = "is mid-turn" if c.busy else f"printed {c.last_output_age:.1f}s ago"
        return Attribution(c.unit, [c.unit], f"of the units whose session {where}, only {c.unit} {how}")
    if nobody_here and not active:
        return Attribution(None, [c.unit for c in pool], f"no unit runs in a directory containing {path}, and none was active")
    pool = active or pool
    allowed = [c for c in pool if _allowed(path, c)]
    names = [c.unit for c in pool]
    state = "active" if active else "idle"
    if len(allowed) == 1:
        c = allowed[0]
        return Attribution(c.unit, [c.unit], f"{len(pool)} units were {state} ({', '.join(names)}); only {c.unit} may change {path}")
    if allowed:
        names = [c.unit for c in allowed]
        return Attribution(None, names, f"ambiguous: {', '.join(names)} were {state} and may all change {path}")
    return Attribution(None, names, f"ambiguous: {', '.join(names)} were {state} and none may change {path}")


@dataclass
class Violation:
    """A change that breaks a rule: the path, and the rule as one line (names the constraint)."""

    path: str
    rule: str
    kind: str = field(default="scope")  # "scope" | "forbid" | "constraints"


def _quote_list(globs: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{g}"' for g in globs) + "]"


def check(path: str, unit_scope: Sequence[str], unit_forbid: Sequence[str], global_forbid: Sequence[str]) -> Violation | None:
    """The violation a change of ``path`` is, or None.

    Forbidden globs win over the scope: the unit's ``[scope] forbid`` first,
    then constraints.md's ``forbid:`` lines, then the scope itself (an empty
    scope means no restriction).
    """
    for glob in unit_forbid:
        if glob.strip() and matches(path, [glob]):
            return Violation(path, f'forbidden by [scope] forbid = "{glob}"', "forbid")
    for glob in global_forbid:
        if glob.strip() and matches(path, [glob]):
            return Violation(path, f"forbidden by constraints.md: forbid: {glob}", "constraints")
    scope = [g for g in unit_scope if g.strip()]
    if scope and not matches(path, scope):
        return Violation(path, f"outside scope: [scope] paths = {_quote_list(scope)}", "scope")
    return None


class ScopeLike(Protocol):
    """What :func:`overlaps` needs of a scope (``units.ScopeSection`` fits)."""

    @property
    def paths(self) -> Sequence[str]: ...

    @property
    def forbid(self) -> Sequence[str]: ...

    @property
    def shared(self) -> Sequence[str]: ...


def _synthetic(glob: str) -> list[str]:
    g = glob.strip()
    if g.startswith("./"):
        g = g[2:]
    g = g.rstrip("/").replace("**", "x").replace("*", "x").replace("?", "x")
    return [g, f"{g}/x"] if g else ["x"]


def overlaps(a: ScopeLike, b: ScopeLike, project_files: Iterable[str]) -> str | None:
    """An example path both scopes may write, or None when they are disjoint.

    A path both may write is inside both ``paths`` (empty: the whole project)
    and forbidden by neither's ``forbid``.  It is not an overlap when it also
    matches both units' ``shared`` globs.  Examples are looked for first among
    ``project_files`` (in their order), then among synthetic paths made from
    each glob (``**``, ``*`` and ``?`` become ``x``, and the same with ``/x``
    appended, for a path below a directory), then among one glob's example
    put below the other's (``tools`` against ``**/*.py`` gives ``tools/x.py``).

    Limits: the synthetic paths miss overlaps such as ``a/*/c`` against
    ``a/b/*`` when no project file shows them (``a/b/c`` is not tried).
    """
    a_paths = [g for g in a.paths if g.strip()] or ["**"]
    b_paths = [g for g in b.paths if g.strip()] or ["**"]
    a_shared = [g for g in a.shared if g.strip()]
    b_shared = [g for g in b.shared if g.strip()]

    def both(p: str) -> bool:
        if check(p, a_paths, a.forbid, ()) is not None or check(p, b_paths, b.forbid, ()) is not None:
            return False
        return not (a_shared and b_shared and matches(p, a_shared) and matches(p, b_shared))

    for p in project_files:
        if both(p):
            return p
    singles = [p for glob in (*a_paths, *b_paths) for p in _synthetic(glob)]
    # one glob's example below the other's (``tools`` against ``**/*.py``: ``tools/x.py``)
    pairs = [
        f"{outer.removesuffix('/x')}/{inner.removeprefix('x/')}"
        for g, h in ((a_paths, b_paths), (b_paths, a_paths))
        for og in g
        for ih in h
        for outer in _synthetic(og)[:1]
        for inner in _synthetic(ih)[:1]
    ]
    for p in (*singles, *pairs):
        if both(p):
            return p
    return None


# --------------------------------------------------------------------------- undo


def _git(root: Path, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=GIT_TIMEOUT, check=False)


def content_digest(path: Path) -> str:
    """A digest of what is at ``path`` now: ``sha256:...`` of a file, ``symlink:TARGET``, or ``absent``.

    The daemon records it after :func:`revert`, and ignores a change event
    whose path still has that digest (the event its own revert caused).
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return f"other:{stat.S_IFMT(st.st_mode):o}"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _safe_target(root: Path, path: str) -> Path:
    rel = path[2:] if path.startswith("./") else path
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"{path!r} is not a path inside the project")
    target = root / rel
    real_root = root.resolve()
    parent = target.parent
    # the nearest existing ancestor must be inside the project (no escape through a symlinked dir)
    while not parent.exists() and parent != root:
        parent = parent.parent
    if not parent.resolve().is_relative_to(real_root):
        raise ValueError(f"{path!r} leads outside the project (through a symlink)")
    return target


def _head_entry(root: Path, rel: str) -> tuple[str, str, str] | None:
    """(mode, type, hash) of ``rel`` in HEAD, or None (untracked, no HEAD, or not a repository)."""
    out = _git(root, ["ls-tree", "-z", "--full-tree", "HEAD", "--", rel])
    if out.returncode != 0 or not out.stdout:
        return None
    meta, _, name = out.stdout.split(b"\0")[0].decode("utf-8", "surrogateescape").partition("\t")
    if name != rel:
        return None
    mode, kind, obj = meta.split(" ")
    return mode, kind, obj


def _blob_bytes(root: Path, rel: str, blob: str) -> bytes | None:
    """Work-tree bytes of ``blob`` as checkout would write them for ``rel`` (smudge/eol filters applied)."""
    if not re.fullmatch(r"[0-9a-f]{7,64}", blob):
        return None
    out = _git(root, ["cat-file", f"--path={rel}", "--filters", blob])
    if out.returncode != 0:
        out = _git(root, ["cat-file", "blob", blob])  # e.g. a smudge filter that is not installed
    return out.stdout if out.returncode == 0 else None


def _quarantine_path(rel: str, quarantine_dir: Path, stamp: str) -> Path:
    dest = Path(quarantine_dir) / stamp / rel
    n = 1
    while dest.exists() or dest.is_symlink():
        dest = Path(quarantine_dir) / f"{stamp}.{n}" / rel
        n += 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest


def _quarantine(target: Path, rel: str, quarantine_dir: Path, stamp: str, *, copy: bool = False) -> Path:
    """Move (or copy) ``target`` to ``quarantine_dir/<stamp>/<rel>`` (a fresh directory if taken)."""
    dest = _quarantine_path(rel, quarantine_dir, stamp)
    if copy:
        shutil.copy2(target, dest, follow_symlinks=False)
        return dest
    try:
        os.replace(target, dest)
    except OSError:  # another file system
        shutil.move(os.fspath(target), os.fspath(dest))
    return dest


def _write_atomic(target: Path, data: bytes, mode: int | None, symlink: bool, *, executable: bool = False) -> None:
    """Replace ``target`` by ``data`` atomically: temporary file beside it, fsync, rename, fsync the directory.

    ``mode`` None: a new file's usual mode (0666, or 0777 when ``executable``, less the umask).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{TEMP_PREFIX}{secrets.token_hex(6)}.tmp"
    try:
        if symlink:
            os.symlink(os.fsdecode(data), tmp)
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777 if executable else 0o666)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if mode is not None:
                    os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def revert(root: Path, path: str, snapshot: dict[str, Any] | None, quarantine_dir: Path) -> str:
    """Put ``path`` back as it was; a one-line account of what was done.

    Where the content comes from, in order:

    1. ``HEAD``, when the file is tracked there (``git cat-file --filters``:
       the bytes ``git checkout`` would write, which are the blob's bytes
       unless the repository sets smudge or end-of-line filters);
    2. else the blob ``snapshot["files"][path]`` (a snapshot's hashes were
       stored with ``hash-object -w``);
    3. else (the file is new) it is moved into ``quarantine_dir``.

    Whatever is replaced is first copied into ``quarantine_dir/<time>/<path>``,
    so nothing the agent wrote is lost.  Writes are atomic (a temporary file
    in the same directory, fsync, rename); the file keeps its current mode
    (or HEAD's executable bit when it had been deleted).  No shell is used.
    The content from git is the committed one: edits to that file left
    uncommitted before the unit started are not what comes back (they are in
    the snapshot, if one was taken since).
    """
    root = Path(root)
    target = _safe_target(root, path)
    rel = target.relative_to(root).as_posix()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    exists = target.is_symlink() or target.exists()
    if exists and target.is_dir() and not target.is_symlink():
        return f"{rel} is a directory; not reverted"

    data: bytes | None = None
    source = ""
    git_mode = "100644"
    entry = _head_entry(root, rel)
    if entry is not None:
        git_mode, kind, obj = entry
        if kind != "blob":
            return f"{rel} is a {'submodule' if kind == 'commit' else kind} in HEAD; not reverted"
        data = _blob_bytes(root, rel, obj)
        source = "HEAD"
    if data is None and snapshot:
        blob = (snapshot.get("files") or {}).get(rel)
        if blob:
            data = _blob_bytes(root, rel, blob)
            source = f"{snapshot.get('id', 'snapshot')} (blob {blob[:12]})"
    symlink = git_mode == "120000"

    if data is None:
        if not exists:
            return f"{rel}: nothing to revert (absent, and neither HEAD nor the snapshot has it)"
        dest = _quarantine(target, rel, quarantine_dir, stamp)
        return f"{rel}: new file (not in HEAD nor in the snapshot), moved to {dest}"

    if exists:
        if symlink and target.is_symlink() and os.fsencode(os.readlink(target)) == data:
            return f"{rel}: already as in {source}; nothing to do"
        if not symlink and not target.is_symlink() and target.read_bytes() == data:
            return f"{rel}: already as in {source}; nothing to do"
        mode = None if target.is_symlink() else stat.S_IMODE(os.lstat(target).st_mode)
        kept = _quarantine(target, rel, quarantine_dir, stamp, copy=True)
        _write_atomic(target, data, mode, symlink, executable=git_mode == "100755")
        return f"{rel}: restored from {source}; the changed content was copied to {kept}"
    _write_atomic(target, data, None, symlink, executable=git_mode == "100755")
    return f"{rel}: deleted file restored from {source}"
