"""Searching the event index: the candidates from FTS5, scored by bm25 x time decay in one SQL statement.

**What a hit is.**  Every query word must occur in the event's text, as a
substring, case-insensitively: words of three characters and more through
the ``trigram`` index, two-character Chinese and two-letter words through
the grams index (:mod:`.turns`), one character by scanning the text.

**The score** of an event is ``bm25 x 2 ** (-age / half_life)``.  bm25 is the
Okapi formula FTS5's own ``bm25()`` uses (k1 = 1.2, b = 0.75, an idf of
``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6), over the query words:
a word's frequency is how many times it occurs in the text (at least once:
it matched), the length is the text's characters against the mean of all
events (the ``totals`` table), ``N`` the events in the index and ``n`` those that
hold the word.  Of two equally relevant hits the newer ranks first, and a hit
one half-life old counts half.

**Why not FTS5's ``bm25()``.**  It counts, at every query, the events that
match each phrase, by walking every match: at 100,000 turns a word in most
of them (``pytest``, 83,000) cost about 50 ms of CPU in that count alone, and
so did the first word of ``Editing module_4711`` though the pair matches 13
events (``bench/RESULTS.md`` section 7).
Here ``n`` is counted on at most :data:`POOL` of the word's newest matches:
exact when the word has fewer, else estimated from their density
(``POOL x N / events since the oldest of them``), which moves every score of
a one-word query by the same factor (its order does not change) and the
weights of the words of a longer query slightly.

**Bounded work.**  Ranking looks at the newest :data:`POOL` events that hold
every word, in the order they were indexed (FTS5 hands them out in rowid
order, newest first, without reading the rest): a query that matches more
events than that is a common word, among whose hits the time decay decides
anyway.  Their ids are read once; one statement then scores them in SQLite
and returns the best, so Python sees only the hits it prints.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .sources import EventKind
from .turns import is_cjk, two_letter

#: Matches ranked per query (the newest); see the module docstring.
POOL = 2000
K1, B = 1.2, 0.75
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class EventHit:
    """One search result."""

    kind: EventKind
    unit: str | None
    session: str | None
    module: str | None
    time: float
    path: str
    at: int
    score: float
    text: str  # a snippet around the first query word found

    def where(self, root: Path) -> str:
        """How to open the spot: an ``agentd logs`` command, or ``path:line``."""
        if self.kind is EventKind.TURN:
            return f"agentd logs {self.unit} --session {self.session} --at {self.at}"
        try:
            rel = str(Path(self.path).relative_to(root))
        except ValueError:
            rel = self.path
        if self.kind is EventKind.STOPPED:
            return f"agentd history {self.unit}  ({rel}:{self.at})"
        if self.kind is EventKind.TRAIL:
            return f"{rel}:{self.at}  (its own record of session {self.session})"
        return f"{rel}:{self.at}"

    def render(self, root: Path) -> str:
        """Two lines: time, kind, unit or module, score and the snippet; then how to open it."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.time))
        owner = self.unit or self.module or "global"
        return f"{when}  {self.kind.value:<8} {owner:<12} {self.score:8.3f}  {self.text}\n    {self.where(root)}"

    def as_dict(self, root: Path) -> dict[str, object]:
        return {"kind": self.kind.value, "unit": self.unit, "session": self.session, "module": self.module,
                "time": self.time, "at": self.at, "path": self.path, "score": self.score, "text": self.text,
                "open": self.where(root)}


@dataclass(frozen=True)
class _Word:
    text: str  # lower case
    table: str | None  # the FTS5 table that finds it, None: a scan of the text
    match: str  # its MATCH expression there

    def candidates(self) -> tuple[str, list[object]]:
        """(SQL selecting the ``id`` of the events holding it, newest first; its arguments)."""
        if self.table is None:
            return "SELECT id FROM texts WHERE instr(lower(body), ?) > 0 ORDER BY id DESC", [self.text]
        return f"SELECT rowid AS id FROM {self.table} WHERE {self.table} MATCH ? ORDER BY rowid DESC", [self.match]


def words_of(words: Sequence[str]) -> list[_Word]:
    out = []
    for word in dict.fromkeys(words):
        if len(word) >= 3:
            out.append(_Word(word.lower(), "ev_tri", _phrase(word)))
        elif len(word) == 2 and (is_cjk(word) or two_letter(word)):
            out.append(_Word(word.lower(), "ev_big", _phrase(word)))
        else:
            out.append(_Word(word.lower(), None, ""))
    return out


def _phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _matches(words: Sequence[_Word], units: Sequence[str], kinds: Sequence[EventKind]) -> tuple[str, list[object]]:
    """SQL for the ids of the events that hold every word and pass the filters, newest first, and its arguments."""
    where: list[str] = []
    args: list[object] = []
    by_table: dict[str, list[str]] = {}
    for w in words:
        if w.table is not None:
            by_table.setdefault(w.table, []).append(w.match)
    tables = sorted(by_table, key=lambda t: t != "ev_tri")  # the trigram index drives when it has a word
    if tables:
        driver = tables[0]
        select, key = f"SELECT rowid AS id FROM {driver}", "rowid"
        where.append(f"{driver} MATCH ?")
        args.append(" ".join(by_table[driver]))
        for other in tables[1:]:
            where.append(f"rowid IN (SELECT rowid FROM {other} WHERE {other} MATCH ?)")
            args.append(" ".join(by_table[other]))
        scan = "rowid IN (SELECT id FROM texts WHERE instr(lower(body), ?) > 0)"
    else:  # only one-character words: scan the text
        select, key = "SELECT id FROM texts", "id"
        scan = "instr(lower(body), ?) > 0"
    for w in words:
        if w.table is None:
            where.append(scan)
            args.append(w.text)
    if units or kinds:
        cond = [f"s.unit IN ({', '.join('?' * len(units))})"] if units else []
        cond += [f"e.kind IN ({', '.join('?' * len(kinds))})"] if kinds else []
        where.append(f"{key} IN (SELECT e.id FROM events e JOIN sources s ON s.id = e.source WHERE {' AND '.join(cond)})")
        args += [*units, *(EventKind(k).value for k in kinds)]
    return f"{select} WHERE {' AND '.join(where)} ORDER BY {key} DESC", args


def _df(conn: sqlite3.Connection, ids: Sequence[int], total: int, pool: int) -> float:
    """How many events hold a word, from the ids of its newest matches (at most ``pool``, newest first):
    counted below ``pool``, estimated from their density beyond (see the module docstring)."""
    if len(ids) < pool:
        return float(len(ids))
    since = conn.execute("SELECT count(*) FROM events WHERE id >= ?", (ids[-1],)).fetchone()[0]
    return min(float(total), len(ids) * total / max(since, 1))


def _ids(conn: sqlite3.Connection, sql: str, args: Sequence[object], pool: int) -> list[int]:
    return [row[0] for row in conn.execute(f"{sql} LIMIT ?", (*args, pool))]


def idf(total: int, df: float) -> float:
    """FTS5's idf: ``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6."""
    value = math.log((total - df + 0.5) / (df + 0.5)) if total > 0 else 0.0
    return value if value > 0 else 1e-6


def search(conn: sqlite3.Connection, words: Sequence[str], *, limit: int, half_life_days: float, now: float,
           units: Sequence[str] = (), kinds: Sequence[EventKind] = (), pool: int = POOL) -> list[EventHit]:
    """The best ``limit`` events holding every word (see the module docstring)."""
    parsed = words_of(words)
    total, chars = conn.execute("SELECT events, chars FROM totals").fetchone() or (0, 0)
    mean = max(chars / total, 1.0) if total else 1.0
    matches, args = _matches(parsed, units, kinds)
    ids = _ids(conn, matches, args, pool)
    if not ids:
        return []
    if len(parsed) == 1 and not (units or kinds):  # the candidates are all the word's newest matches
        weights = [idf(total, _df(conn, ids, total, pool))]
    else:
        weights = [idf(total, _df(conn, _ids(conn, *w.candidates(), pool), total, pool)) for w in parsed]
    tfs, terms, targs = [], [], []
    for n, (_, weight) in enumerate(zip(parsed, weights)):
        # occurrences (non-overlapping) of the word in the lower-cased text; at least one: it matched
        tfs.append(f"max(1, (length(t.body) - length(replace(lower(t.body), ?, ''))) / ?) AS tf{n}")
        terms.append(f"? * tf{n} * {K1 + 1} / (tf{n} + {K1} * ({1 - B} + {B} * dl / ?))")
        targs += [weight, mean]
    decay = math.log(2) / (half_life_days * 86400.0)
    # each word counted once per text (MATERIALIZED: not again where the score uses it); the bodies are
    # read again only for the rows returned
    sql = ("WITH m(id) AS (SELECT value FROM json_each(?)), "
           f"f AS MATERIALIZED (SELECT m.id AS id, length(t.body) AS dl, {', '.join(tfs)} "
           "FROM m JOIN texts t ON t.id = m.id), "
           f"r AS (SELECT f.id, e.time, ({' + '.join(terms)}) * exp((e.time - ?) * ?) AS score "
           "FROM f JOIN events e ON e.id = f.id ORDER BY score DESC, e.time DESC, f.id DESC LIMIT ?) "
           "SELECT e.kind, s.unit, s.session, coalesce(e.module, s.module), e.time, s.path, e.at, t.body, r.score "
           "FROM r JOIN events e ON e.id = r.id JOIN sources s ON s.id = e.source JOIN texts t ON t.id = r.id "
           "ORDER BY r.score DESC, r.time DESC, r.id DESC")
    params = [json.dumps(ids), *(x for w in parsed for x in (w.text, len(w.text))), *targs, now, decay, limit * 3]
    hits: list[EventHit] = []
    seen: set[tuple[str, str]] = set()
    for kind, unit, session, module, when, path, at, body, score in conn.execute(
            sql, params):
        if (kind, body) in seen:
            continue  # the same line twice (a union merge, an epoch and its live log)
        seen.add((kind, body))
        hits.append(EventHit(EventKind(kind), unit, session, module, when, path, at, score, snippet(body, words)))
        if len(hits) >= limit:
            break
    return hits


def snippet(body: str, words: Sequence[str], width: int = 240) -> str:
    """About ``width`` characters of ``body`` around the first query word found, on one line."""
    low = body.lower()
    found = [i for i in (low.find(w.lower()) for w in words) if i >= 0]
    start = max(0, min(found) - width // 4) if found else 0
    text = _SPACE.sub(" ", body[start:start + width]).strip()
    return ("…" if start > 0 else "") + text + ("…" if start + width < len(body) else "")
