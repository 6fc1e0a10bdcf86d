"""The decision logs: record a decision (with its snapshot), read the latest ones, scan all.

``decisions.log`` is the global log, ``decisions-<module>.log`` a module's.
When a live log holds :data:`EPOCH_SIZE` decisions, its oldest
:data:`EPOCH_SIZE` lines move to the next ``<stem>-epoch-N.log`` and are cut
from its top (the live log itself is never renamed nor deleted, see
:func:`_maybe_roll`); readers walk epochs backwards only as far as needed,
and :func:`iter_all` (recall, doctor) covers every epoch.

Logs merged from two clones (union merges, see :mod:`.sync`) may hold a line
twice or a little out of time order; readers skip repeated lines and order
by time, then snapshot id, so every clone reads the same decisions the same way.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from . import lineformat, snapshots
from .clock import Clock, moment, system_clock
from .gitfiles import scope_hashes
from .lineformat import Decision, LineError
from .ids import snapshot_id_for, ulid
from .store import (
    AgentPaths,
    append_line,
    atomic_write,
    format_time,
    read_state,
    require_store,
    store_lock,
    validate_module,
    write_state,
)
from .tail import RawLine, all_lines, line_number, tail_lines
from .task import effective_task

EPOCH_SIZE = 50
_GLOBAL_EPOCH_RE = re.compile(r"decisions-epoch-(\d+)\.log")
_MODULE_LOG_RE = re.compile(r"decisions-(.+?)(?:-epoch-(\d+))?\.log")


@dataclass(frozen=True)
class Entry:
    """A parsed decision and where it came from."""

    decision: Decision
    module: str | None
    path: Path
    offset: int

    def sort_key(self) -> tuple[str, str, int]:
        """Time, then snapshot id (increasing, comparable across hosts), then file position."""
        return (self.decision.time, self.decision.snapshot_key, self.offset)


@dataclass(frozen=True)
class BadLine:
    """A line that could not be parsed (torn or malformed)."""

    path: Path
    line: int
    text: str
    reason: str

    def describe(self, paths: AgentPaths) -> str:
        snippet = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"{paths.rel(self.path)}:{self.line}: {self.reason}: {snippet!r}"


@dataclass(frozen=True)
class Recorded:
    """Result of :func:`record_decision`."""

    line: str
    path: Path
    snapshot: str
    rolled_to: Path | None


def _parse_raw(raw: RawLine, path: Path, module: str | None) -> Entry | BadLine:
    """Parse one line; a last line without its newline is a torn write even if it parses."""
    if not raw.complete:
        reason = "torn line (no newline at the end of the file; a hand-written log must end with a newline)"
        return BadLine(path, line_number(path, raw.offset), raw.text, reason)
    try:
        d = lineformat.parse(raw.text)
    except LineError as exc:
        return BadLine(path, line_number(path, raw.offset), raw.text, str(exc))
    return Entry(d, module, path, raw.offset)


# Recording ------------------------------------------------------------------------

def build_decision(
    text: str,
    why: str,
    *,
    tags: Sequence[str] = (),
    files: Sequence[str] = (),
    alternatives: str = "",
    now: datetime | None = None,
    clock: Clock = system_clock,
) -> Decision:
    """Validate the inputs of a decision (raises :class:`LineError` with the rule)."""
    text = " ".join(text.split())
    why = " ".join(why.split())
    if not text:
        raise LineError("the decision text is empty: state what was decided")
    lineformat.check_why(why)
    for tag in tags:
        lineformat.check_tag(tag)
    clean_files = tuple(f.strip() for part in files for f in part.split(",") if f.strip())
    return Decision(
        time=format_time(moment(now, clock)),
        decision=text,
        why=why,
        tags=tuple(dict.fromkeys(tags)),
        files=clean_files,
        alternatives=" ".join(alternatives.split()),
    )


def record_decision(
    root: Path,
    text: str,
    why: str,
    *,
    module: str | None = None,
    tags: Sequence[str] = (),
    files: Sequence[str] = (),
    alternatives: str = "",
    scope_paths: Sequence[str] = (),
    now: datetime | None = None,
    by: str | None = None,
    clock: Clock = system_clock,
) -> Recorded:
    """Validate, snapshot and append one decision; nothing is written if validation fails.

    Hashing the scope happens before taking the lock (it is the slow part).
    Under the lock, in this order, so that a kill at any point leaves no two
    decisions sharing a snapshot: the new id is reserved (``local/state.json``
    saved first, and the id is a ULID greater than every id this store handed
    out, whose file must not exist yet); the snapshot is written; the line is
    appended; the log is rolled.  A kill before the append leaves at most an
    unreferenced snapshot, never a line pointing at another decision's.
    ``by``: the unit whose agent asked for it (the daemon's memory channel), kept as a ``by:`` field.
    """
    paths = AgentPaths(Path(root))
    require_store(paths)
    module = validate_module(module)
    when = moment(now, clock)
    draft = build_decision(text, why, tags=tags, files=files, alternatives=alternatives, now=when)
    scope = [p for p in scope_paths if p.strip()]
    hashed = scope_hashes(paths.root, scope)
    task = effective_task(paths, module)
    log = paths.decisions(module)
    with store_lock(paths):
        state = read_state(paths)
        previous = _previous_snapshot(paths, state, module)
        sid = _reserve_snapshot_id(paths, state, when, module)
        decision = dataclasses.replace(draft, snapshot=sid, extra=(("by", by),) if by else ())
        line = lineformat.render(decision)
        snapshots.write_snapshot(
            paths,
            sid,
            time=decision.time,
            module=module,
            decision=decision.decision,
            why=decision.why,
            tags=decision.tags,
            named_files=decision.files,
            log=paths.rel(log),
            task_head=task.head(),
            state=task.state,
            scope=scope,
            scope_files=hashed,
            previous=previous,
        )
        append_line(log, line)
        rolled = _maybe_roll(paths, module)
    return Recorded(line=line, path=log, snapshot=sid, rolled_to=rolled)


def _previous_snapshot(paths: AgentPaths, state: dict, module: str | None) -> str | None:
    """The snapshot of the log's latest decision: this clone's note of it, else the log's tail (lock held)."""
    noted = (state.get("last_by_log") or {}).get(paths.log_stem(module))
    if isinstance(noted, str) and paths.snapshot(noted).exists():
        return noted
    entries = [e for e in latest(paths, module, 1)[0] if e.decision.snapshot]
    return entries[-1].decision.snapshot if entries else None


def _reserve_snapshot_id(paths: AgentPaths, state: dict, when: datetime, module: str | None) -> str:
    """A snapshot id no decision has used, saved in ``local/state.json`` before anything else (lock held).

    The id is a ULID above every id this store handed out (``last_snapshot``)
    whose file does not exist.  Saving it first means that however the
    process dies afterwards, the id is never handed out again.
    """
    last = state.get("last_snapshot") or ""
    after = last.removeprefix("snapshot-") if last.startswith("snapshot-") else None
    while True:
        sid = snapshot_id_for(ulid(when, after=after))
        if not paths.snapshot(sid).exists():
            break
        after = sid.removeprefix("snapshot-")
    state["last_snapshot"] = sid
    state.setdefault("last_by_log", {})[paths.log_stem(module)] = sid
    snapshots.thin_old(paths, state, sid)
    write_state(paths, state)
    return sid


def _end_of_line(data: bytes, count: int) -> int:
    """The offset just after the ``count``-th newline of ``data`` (which holds at least that many)."""
    pos = -1
    for _ in range(count):
        pos = data.index(b"\n", pos + 1)
    return pos + 1


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _maybe_roll(paths: AgentPaths, module: str | None) -> Path | None:
    """Move the live log's oldest EPOCH_SIZE lines to the next epoch while it holds that many (lock held).

    The block is written to a new epoch file first, then the live log is
    rewritten without it (both atomically); the live log is never renamed nor
    deleted.  To git, a roll on one clone is then a new file and lines gone
    from the top of ``decisions.log``, and the other clone's appends are lines
    added at its bottom: the union merge keeps both, with no conflict, and
    :mod:`.normalize` drops the rolled lines the union brings back.  (Renaming
    the live log made git see a rename, which moved the other clone's new
    lines into the epoch, or, when the other clone's log differed enough, a
    modify/delete conflict on ``decisions.log``.)  Two clones that roll
    different blocks into the same epoch number add one path twice; the union
    merges that too, and readers count a repeated line once.

    A roll cut short between its two writes left the block in both files;
    the next roll finds the newest epoch equal to the block and only cuts it.
    """
    log = paths.decisions(module)
    data = _read_bytes(log) or b""
    target = None
    while data.count(b"\n") >= EPOCH_SIZE:
        cut = _end_of_line(data, EPOCH_SIZE)
        block, data = data[:cut], data[cut:]
        number = _latest_epoch(paths, module)
        if number == 0 or _read_bytes(paths.epoch(module, number)) != block:
            number += 1
            atomic_write(paths.epoch(module, number), block)
            state = read_state(paths)
            state.setdefault("epochs", {})[paths.log_stem(module)] = number
            write_state(paths, state)  # a cache for readers (see _latest_epoch)
        atomic_write(log, data)
        target = paths.epoch(module, number)
    return target


# Reading --------------------------------------------------------------------------

def epoch_numbers(paths: AgentPaths, module: str | None) -> list[int]:
    """Archived epoch numbers of ``module``'s log, ascending (scans the directory, or :data:`_EPOCHS`)."""
    try:
        st = os.stat(paths.dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    stamp = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    key = (str(paths.dir), paths.log_stem(module))
    have = _EPOCHS.get(key)
    if have is not None and have[0] == stamp:
        return list(have[1])
    rx = re.compile(re.escape(key[1]) + r"-epoch-(\d+)\.log")
    numbers = sorted(int(m.group(1)) for name in os.listdir(paths.dir) if (m := rx.fullmatch(name)))
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS:
        _EPOCHS[key] = (stamp, tuple(numbers))
    return numbers


#: Epoch numbers per (store, log) as of the store directory's (inode, mtime, ctime): a file made, removed or
#: renamed in it changes them.  A listing taken within :data:`_SETTLED_NS` of the directory's last change is not
#: kept (file times are coarse: a second change in the same tick would not show), so it is never stale.
_EPOCHS: dict[tuple[str, str], tuple[tuple[int, int, int], tuple[int, ...]]] = {}
_SETTLED_NS = 2_000_000_000


def _latest_epoch(paths: AgentPaths, module: str | None) -> int:
    """Newest epoch number on disk (0 when the log never rolled).

    This clone's cache (``local/state.json``) is trusted when the disk agrees
    (epoch N exists, N+1 does not), which costs two ``stat`` calls; otherwise
    (a fresh clone, epochs merged in from another) the directory is scanned.
    """
    cached = (read_state(paths).get("epochs") or {}).get(paths.log_stem(module))
    if isinstance(cached, int) and cached > 0 and paths.epoch(module, cached).exists() \
            and not paths.epoch(module, cached + 1).exists():
        return cached
    found = epoch_numbers(paths, module)
    return found[-1] if found else 0


#: Extra lines read beyond what is asked, so that lines a merge left slightly out of order are still seen.
MERGE_SLACK = 16


def latest(paths: AgentPaths, module: str | None, count: int) -> tuple[list[Entry], list[BadLine]]:
    """The newest ``count`` decisions of one log (oldest first) and bad lines met on the way.

    Reads only the tail of the live log, then the tails of the newest epochs
    until ``count`` decisions are found; a line seen twice counts once.
    """
    entries: list[Entry] = []
    bad: list[BadLine] = []
    if count <= 0:
        return entries, bad
    seen: set[str] = set()
    path = paths.decisions(module)
    epoch = _latest_epoch(paths, module)
    while True:
        for raw in tail_lines(path, count + MERGE_SLACK):
            if raw.text in seen:
                continue
            seen.add(raw.text)
            item = _parse_raw(raw, path, module)
            (entries if isinstance(item, Entry) else bad).append(item)  # type: ignore[arg-type]
        if len(entries) >= count or epoch <= 0:
            break
        path = paths.epoch(module, epoch)
        epoch -= 1
    entries.sort(key=Entry.sort_key)
    return entries[-count:], bad


def latest_merged(paths: AgentPaths, module: str | None, count: int) -> tuple[list[Entry], list[BadLine]]:
    """Newest ``count`` decisions of ``module`` and the global log, merged by time (oldest first)."""
    entries, bad = latest(paths, None, count)
    if module is not None:
        more, more_bad = latest(paths, module, count)
        entries += more
        bad += more_bad
    entries.sort(key=Entry.sort_key)
    return entries[-count:] if count > 0 else [], bad


def log_modules(paths: AgentPaths) -> list[str | None]:
    """Every module with a log or epoch on disk (None is the global log), global first."""
    if not paths.dir.is_dir():
        return [None]
    found = {m.group(1) for name in os.listdir(paths.dir)
             if not _GLOBAL_EPOCH_RE.fullmatch(name) and (m := _MODULE_LOG_RE.fullmatch(name))}
    return [None, *sorted(found)]


def files_of(paths: AgentPaths, module: str | None) -> list[Path]:
    """Every log file of ``module``, oldest epoch first, live log last."""
    out = [paths.epoch(module, n) for n in epoch_numbers(paths, module)]
    live = paths.decisions(module)
    if live.exists():
        out.append(live)
    return out


def iter_all(paths: AgentPaths, module: str | None) -> Iterator[Entry | BadLine]:
    """Every line of every epoch of ``module``'s log, parsed, in file order; a repeated line once."""
    seen: set[str] = set()
    for path in files_of(paths, module):
        for raw in all_lines(path):
            if raw.text in seen:
                continue
            seen.add(raw.text)
            yield _parse_raw(raw, path, module)


def scan_bad_lines(paths: AgentPaths) -> list[BadLine]:
    """Every malformed or torn line in every decision log (for ``agentd doctor``)."""
    return [item for m in log_modules(paths) for item in iter_all(paths, m) if isinstance(item, BadLine)]


