"""The event index: SQLite FTS5 over transcripts' turns, agents' own records, decisions, engram, facts and cycles.

A cache over the files (:mod:`.sources`), kept in the state directory
(``<state>/events.db``, mode 0600, never committed) and rebuilt from them at
any time (:meth:`EventIndex.reindex`).  Standard library only: ``sqlite3``
with FTS5.

Tables: ``sources`` (one row per file, with what was read of it),
``events`` (kind, source, offset or line, time), ``texts`` (the event's text
and its grams) and two FTS5 indexes over ``texts`` (external content):
``ev_tri`` (``trigram`` tokenizer: any substring of three or more
characters, case-insensitive: code identifiers, Chinese words of three
characters and more) and ``ev_big`` (``unicode61`` over
:func:`.turns.grams`: two-character Chinese words and two-letter words).

**Search** (:meth:`EventIndex.search`, :mod:`.search`): every query word
must occur (as a substring; see :mod:`.turns` for short words).  Score =
bm25 relevance x ``2 ** (-age / half_life)``: of two equally relevant hits
the newer ranks first, and a hit one half-life old counts half.  Ranking
looks at the newest :data:`.search.POOL` matches (in the order they were
indexed, which FTS5 hands out first).
``totals`` keeps the count of events and of their characters (bm25's mean
length) as events come and go.

**Updates** (:meth:`EventIndex.update`) run one transaction per file or
transcript step (``BEGIN IMMEDIATE``), reading the file's state inside it,
so two writers (the daemon's indexer, a ``recall --reindex``) never index a
region twice.  WAL mode: searches never wait for a writer.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config.kinds import KINDS
from .sources import (EventKind, Links, Reading, Row, Source, SourceKind, UnitReadings, memory_rows, memory_sources,
                      reading_of)
from . import trails
from .scan import TranscriptScan
from .transcripts import Marks, Position, Step, step
from .search import POOL, EventHit, search
from .turns import Marker, grams

SCHEMA_VERSION = "3"  # 2: totals; 3: turns indexed as head and tail (shaping.py)
DEFAULT_HALF_LIFE_DAYS = 14.0
#: A growing long turn's tail is indexed again at most this often (seconds) ...
TAIL_REFRESH = 60.0
#: ... and as soon as its transcript has not changed for this long.
TAIL_QUIET = 10.0
_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sources(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, unit TEXT,
                     session TEXT, module TEXT, ino INTEGER, size INTEGER NOT NULL DEFAULT 0,
                     mtime_ns INTEGER NOT NULL DEFAULT 0, pos INTEGER NOT NULL DEFAULT 0,
                     turn_start INTEGER NOT NULL DEFAULT 0);
CREATE TABLE events(id INTEGER PRIMARY KEY, source INTEGER NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL,
                    time REAL NOT NULL, module TEXT);
CREATE INDEX events_by_source ON events(source, at);
CREATE TABLE texts(id INTEGER PRIMARY KEY, body TEXT NOT NULL, grams TEXT NOT NULL);
CREATE TABLE totals(events INTEGER NOT NULL, chars INTEGER NOT NULL);
INSERT INTO totals VALUES (0, 0);
CREATE VIRTUAL TABLE ev_tri USING fts5(body, content='texts', content_rowid='id', tokenize='trigram');
CREATE VIRTUAL TABLE ev_big USING fts5(grams, content='texts', content_rowid='id', tokenize='unicode61');
"""
_TABLES = ("ev_tri", "ev_big", "totals", "texts", "events", "sources", "meta")


@dataclass(frozen=True)
class UpdateResult:
    added: int  # events written (an open part rewritten counts again)
    files: int  # sources changed
    more: bool  # the budget ran out before every file was read


def default_db(state_dir: Path) -> Path:
    return Path(state_dir) / "events.db"


class IndexUnavailable(Exception):
    """A read-only open found no usable index (none yet, or one another version built)."""


class EventIndex:
    """One connection to the index (use it from one thread).

    ``readonly``: search only, never write (nothing is created; for a process
    that may not write the state directory, such as an agent's tools inside
    the fence); raises :class:`IndexUnavailable` when there is no index.

    ``live`` (the daemon's indexer): the tail of a long turn that is still
    growing is indexed again at most every :data:`TAIL_REFRESH` seconds, and
    once its transcript has been quiet for :data:`TAIL_QUIET` seconds (each
    step otherwise indexes it again, most of the indexer's work while agents
    stream); without it every update indexes everything it read.
    """

    def __init__(self, db: Path, root: Path, state_dir: Path, *,
                 markers: Callable[[str], Reading | Marker] | None = None, busy_timeout: float = 10.0,
                 readonly: bool = False, live: bool = False) -> None:
        self.db, self.root, self.state_dir = Path(db), Path(root), Path(state_dir)
        self.markers = markers or UnitReadings(None)
        self._marks = Marks()
        self._tails: dict[str, float] = {}  # transcript -> when its open tail was last indexed (monotonic)
        self._links = Links()
        self._scan = TranscriptScan()
        self.live = live
        self._busy = busy_timeout
        if readonly:
            self.conn = self._connect_readonly()
            return
        try:
            self.conn = self._connect()
        except sqlite3.DatabaseError:  # not a database, or damaged: it is a cache, start again
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.db}{suffix}")
            self.conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(self.db, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))  # SQLite's -wal/-shm follow
        conn = sqlite3.connect(self.db, timeout=self._busy, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # a cache: the last commits may go with a power cut
            _tune(conn)
            if self.live:  # the daemon's writer searches nothing: its pages stay in SQLite's bounded cache
                conn.execute("PRAGMA mmap_size=0")  # (mapped, every page a pass touched counted in its RSS)
            self._ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_readonly(self) -> sqlite3.Connection:
        if not self.db.is_file():
            raise IndexUnavailable(f"no event index at {self.db} yet: the daemon builds it, or run "
                                   "`agentd recall --reindex`")
        uri = f"{self.db.as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=self._busy, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        except sqlite3.OperationalError:
            # No -shm to share and none may be made here (a directory this process may not write):
            # with no -wal either, no writer is at work and the file is whole, so read it as it is.
            conn.close()
            if Path(f"{self.db}-wal").exists():
                raise
            conn = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=self._busy, isolation_level=None)
        _tune(conn)
        if self._meta(conn) != self._want():
            conn.close()
            raise IndexUnavailable(f"the event index at {self.db} is of another version or project: "
                                   "run `agentd recall --reindex`")
        return conn

    def _want(self) -> dict[str, str]:
        return {"version": SCHEMA_VERSION, "root": str(self.root), "state": str(self.state_dir)}

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        want = self._want()
        if self._meta(conn) == want:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self._meta(conn) != want:
                for table in _TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in _SCHEMA.strip().split(";\n"):
                    conn.execute(statement)
                conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(want.items()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _meta(conn: sqlite3.Connection) -> dict[str, str]:
        try:
            return dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            return {}

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> EventIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction (or a part of the caller's, when one is open)."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ writing
    def update(self, budget: int | None = None) -> UpdateResult:
        """Read what changed in the files; at most about ``budget`` transcript bytes (None: all).

        The memory files are looked at each time; the transcripts are those :class:`~.scan.TranscriptScan`
        says may have changed (the open ones; every one in a full pass), so a pass costs no more with
        thousands of old transcripts on disk.
        """
        transcripts = self._scan.transcripts(self.state_dir)
        full = self._scan.full
        present: set[str] = set()
        added = files = 0
        more = False
        for source in memory_sources(self.root, self.state_dir) + transcripts:
            listed, reading = source, None
            if source.kind is SourceKind.TRANSCRIPT:
                reading = reading_of(self.markers(source.unit or ""))
                if not reading.full and reading.kind in KINDS and KINDS[reading.kind].has_record:  # what the agent did and said: its own record
                    source = self._links.record(source) or source
            if source.path in present:
                continue  # a record two sessions link (the newest one's is read)
            present.add(source.path)
            if more:
                continue
            if self._signature(source.path) == source.signature:
                if reading is not None:  # unchanged (a transcript with more to read is stored with size -1)
                    self._scan.settled(listed)
                    self._tails.pop(listed.path, None)
                continue
            if reading is not None:
                read = self._record if source.kind is SourceKind.RECORD else self._transcript
                n, changed, spent, more = read(source, budget, reading)
                if budget is not None:
                    budget -= spent
                    more = more or budget <= 0
            else:
                n, changed = self._memory(source)
            added += n
            files += changed
        files += self._forget(present, full, more)
        return UpdateResult(added, files, more)

    def _signature(self, path: str) -> tuple[int, int, int] | None:
        row = self.conn.execute("SELECT ino, size, mtime_ns FROM sources WHERE path = ?", (path,)).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def _forget(self, present: set[str], full: bool, more: bool) -> int:
        """Drop the events of files that are gone: after a full pass, every file not seen; else the memory
        files not seen and the transcripts (and linked records) of sessions that left (pruned); how many."""
        gone_sessions = self._scan.gone()
        if more:  # the budget ran out before every file was seen: later
            self._scan.keep_gone(gone_sessions)
            return 0
        if full:
            paths = [p for (p,) in self.conn.execute("SELECT path FROM sources") if p not in present]
        else:
            paths = [p for (p,) in self.conn.execute("SELECT path FROM sources WHERE kind NOT IN (?, ?)",
                                                      (SourceKind.TRANSCRIPT.value, SourceKind.RECORD.value))
                     if p not in present]
            for unit, session in gone_sessions:
                paths += [p for (p,) in self.conn.execute(
                    "SELECT path FROM sources WHERE unit = ? AND session = ? AND kind IN (?, ?)",
                    (unit, session, SourceKind.TRANSCRIPT.value, SourceKind.RECORD.value)) if p not in present]
        if paths:
            with self._write():
                for path in paths:
                    self._drop(path, 0, forget=True)
        for path in paths:
            self._tails.pop(path, None)
            self._marks.forget(Path(path))
        for unit, session in gone_sessions:
            self._links.forget(str(self.state_dir / "transcripts" / unit / (session + ".record")))
        return len(paths)

    def reindex(self) -> UpdateResult:
        """Forget everything and read every file again, in one transaction (searches see the old index meanwhile)."""
        with self._write():
            self.conn.execute("INSERT INTO ev_tri(ev_tri) VALUES ('delete-all')")
            self.conn.execute("INSERT INTO ev_big(ev_big) VALUES ('delete-all')")
            for table in ("texts", "events", "sources"):
                self.conn.execute(f"DELETE FROM {table}")
            self.conn.execute("UPDATE totals SET events = 0, chars = 0")
            return self.update(None)

    def _source_id(self, source: Source) -> int:
        row = self.conn.execute("SELECT id FROM sources WHERE path = ?", (source.path,)).fetchone()
        if row is not None:
            return int(row[0])
        cur = self.conn.execute("INSERT INTO sources(path, kind, unit, session, module) VALUES (?, ?, ?, ?, ?)",
                                (source.path, source.kind.value, source.unit, source.session, source.module))
        return int(cur.lastrowid or 0)

    def _defer_tail(self, source: Source) -> bool:
        """Whether to leave out the open tail of a transcript's long turn this time (:data:`TAIL_REFRESH`)."""
        if not self.live or source.stat is None:
            return False
        last = self._tails.get(source.path)
        growing = time.time() - source.stat.st_mtime < TAIL_QUIET
        return growing and last is not None and time.monotonic() - last < TAIL_REFRESH

    def _memory(self, source: Source) -> tuple[int, int]:
        rows = memory_rows(source, self.root)  # read outside the lock; the signature is from before the read
        with self._write():
            self._drop(source.path, 0)
            sid = self._source_id(source)
            self._insert(sid, rows)
            self.conn.execute("UPDATE sources SET ino = ?, size = ?, mtime_ns = ? WHERE id = ?",
                              (*(source.signature or (None, 0, 0)), sid))
        return len(rows), 1

    def _transcript(self, source: Source, budget: int | None, reading: Reading) -> tuple[int, int, int, bool]:
        def read(was: Position, limit: int | None) -> Step | None:
            result = step(Path(source.path), source.session or "", was, reading.marker, self._marks, limit,
                          full=reading.full, defer_tail=self._defer_tail(source))
            if result is not None and result.open_tail and not result.deferred:
                self._tails[source.path] = time.monotonic()
            return result

        return self._steps(source, budget, read)

    def _record(self, source: Source, budget: int | None, reading: Reading) -> tuple[int, int, int, bool]:
        from ..session.redact import redact_text

        env = dict(reading.env)
        root = str(self.root.resolve())

        def read(was: Position, limit: int | None) -> Step | None:
            return trails.step(Path(source.path), source.agent or reading.kind, was, limit, root=root,
                               redact=lambda text: redact_text(text, env))

        return self._steps(source, budget, read)

    def _steps(self, source: Source, budget: int | None,
               read: Callable[[Position, int | None], Step | None]) -> tuple[int, int, int, bool]:
        """Steps of a growing file (a transcript or a record), one transaction each, until its end or ``budget``."""
        added = spent = changed = 0
        while True:
            with self._write():
                row = self.conn.execute("SELECT ino, size, mtime_ns, pos, turn_start FROM sources WHERE path = ?",
                                        (source.path,)).fetchone()
                was = Position(*row) if row is not None else Position()
                result = read(was, None if budget is None else max(budget - spent, 1))
                if result is None:
                    return added, changed, spent, False
                self._drop(source.path, result.drop_from)
                sid = self._source_id(source)
                self._insert(sid, result.rows)
                p = result.position
                self.conn.execute("UPDATE sources SET ino = ?, size = ?, mtime_ns = ?, pos = ?, turn_start = ? "
                                  "WHERE id = ?", (p.ino, p.size, p.mtime_ns, p.pos, p.turn_start, sid))
            added += len(result.rows)
            spent += result.consumed
            changed = 1
            if not result.more:
                return added, changed, spent, False
            if budget is not None and spent >= budget:
                return added, changed, spent, True

    def _insert(self, sid: int, rows: Sequence[Row]) -> None:
        if not rows:
            return
        first = (self.conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]) + 1
        ids = range(first, first + len(rows))
        texts = [(i, r.body, grams(r.body)) for i, r in zip(ids, rows)]
        self.conn.executemany("INSERT INTO events(id, source, kind, at, time, module) VALUES (?, ?, ?, ?, ?, ?)",
                              [(i, sid, r.kind.value, r.at, r.time, r.module) for i, r in zip(ids, rows)])
        self.conn.executemany("INSERT INTO texts(id, body, grams) VALUES (?, ?, ?)", texts)
        self.conn.executemany("INSERT INTO ev_tri(rowid, body) VALUES (?, ?)", [(i, b) for i, b, _ in texts])
        self.conn.executemany("INSERT INTO ev_big(rowid, grams) VALUES (?, ?)", [(i, g) for i, _, g in texts])
        self.conn.execute("UPDATE totals SET events = events + ?, chars = chars + ?",
                          (len(rows), sum(len(r.body) for r in rows)))

    def _drop(self, path: str, from_at: int, *, forget: bool = False) -> None:
        """Delete the events of ``path`` at or after ``from_at`` (and the file's row when ``forget``)."""
        row = self.conn.execute("SELECT id FROM sources WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        sid = row[0]
        gone = self.conn.execute("SELECT t.id, t.body, t.grams FROM events e JOIN texts t ON t.id = e.id "
                                 "WHERE e.source = ? AND e.at >= ?", (sid, from_at)).fetchall()
        if gone:
            ids = [(i,) for i, _, _ in gone]
            self.conn.executemany("INSERT INTO ev_tri(ev_tri, rowid, body) VALUES ('delete', ?, ?)",
                                  [(i, b) for i, b, _ in gone])
            self.conn.executemany("INSERT INTO ev_big(ev_big, rowid, grams) VALUES ('delete', ?, ?)",
                                  [(i, g) for i, _, g in gone])
            self.conn.executemany("DELETE FROM texts WHERE id = ?", ids)
            self.conn.executemany("DELETE FROM events WHERE id = ?", ids)
            self.conn.execute("UPDATE totals SET events = events - ?, chars = chars - ?",
                              (len(gone), sum(len(b) for _, b, _ in gone)))
        if forget:
            self.conn.execute("DELETE FROM sources WHERE id = ?", (sid,))

    # ------------------------------------------------------------------ reading
    def count(self) -> dict[str, int]:
        """Events per kind."""
        return dict(self.conn.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall())

    def search(self, words: Sequence[str], *, limit: int = 10, half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
               now: float | None = None, units: Sequence[str] = (), kinds: Sequence[EventKind] = (),
               pool: int = POOL) -> list[EventHit]:
        """The best ``limit`` events holding every word (see :mod:`.search` for the score)."""
        if half_life_days <= 0:
            raise ValueError(f"half-life {half_life_days!r}: give a number of days above 0")
        words = [w for w in (w.strip() for w in words) if w]
        if not words:
            raise ValueError("give at least one word to search for")
        return search(self.conn, words, limit=limit, half_life_days=half_life_days,
                      now=time.time() if now is None else now, units=units, kinds=kinds, pool=pool)


#: Bytes of the file read through a memory map (address space, not memory): a search reads its
#: candidates' pages scattered over the file, and a mapped page costs no read() and no copy (about
#: half the time of those reads at 100,000 turns).
MMAP_BYTES = 1 << 30


def _tune(conn: sqlite3.Connection) -> None:
    """Read through a memory map; ``exp()`` in SQL, also where SQLite was built without its math functions."""
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    try:
        conn.execute("SELECT exp(0)")
    except sqlite3.OperationalError:
        conn.create_function("exp", 1, math.exp, deterministic=True)
