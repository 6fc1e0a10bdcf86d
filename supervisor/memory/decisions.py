"""The decision logs: record a decision (with its snapshot), read the latest ones, scan all.

``decisions.log`` is the global log, ``decisions-<module>.log`` a module's.
When a live log holds :data:`EPOCH_SIZE` decisions it is renamed to the next
``<stem>-epoch-N.log``; readers walk epochs backwards only as far as needed,
and :func:`iter_all` (recall, doctor) covers every epoch.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from . import lineformat, snapshots
from .gitfiles import scope_hashes
from .lineformat import Decision, LineError
from .store import (
    AgentPaths,
    StoreError,
    append_line,
    format_time,
    read_state,
    require_store,
    snapshot_id,
    store_lock,
    validate_module,
    write_state,
)
from .tail import RawLine, all_lines, line_number, tail_lines
from .task import read_task

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

    def sort_key(self) -> tuple[str, int, int]:
        """Time, then snapshot sequence (global and increasing), then file position."""
        return (self.decision.time, self.decision.snapshot_seq, self.offset)


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
        time=format_time(now or datetime.now()),
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
) -> Recorded:
    """Validate, snapshot and append one decision; nothing is written if validation fails.

    Hashing the scope happens before taking the lock (it is the slow part);
    allocating the snapshot id, writing the snapshot, appending the line and
    rolling the epoch happen under the lock.
    """
    paths = AgentPaths(Path(root))
    require_store(paths)
    module = validate_module(module)
    draft = build_decision(text, why, tags=tags, files=files, alternatives=alternatives, now=now)
    scope = [p for p in scope_paths if p.strip()]
    hashed = scope_hashes(paths.root, scope)
    task = read_task(paths)
    log = paths.decisions(module)
    key = module or "global"
    with store_lock(paths):
        state = read_state(paths)
        seq = int(state["snapshot_seq"]) + 1
        sid = snapshot_id(seq)
        decision = dataclasses.replace(draft, snapshot=sid)
        line = lineformat.render(decision)
        snapshots.write_snapshot(
            paths,
            seq,
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
            previous_seq=state["last_snapshot_by_module"].get(key),
        )
        append_line(log, line)
        rolled = _maybe_roll(paths, module, state)
        state["snapshot_seq"] = seq
        state["last_snapshot"] = sid
        state["last_snapshot_by_module"][key] = seq
        snapshots.thin_old(paths, state, seq)
        write_state(paths, state)
    return Recorded(line=line, path=log, snapshot=sid, rolled_to=rolled)


def _count_lines(path: Path) -> int:
    count = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            count += chunk.count(b"\n")
    return count


def _maybe_roll(paths: AgentPaths, module: str | None, state: dict) -> Path | None:
    """Rename the live log to the next epoch once it holds EPOCH_SIZE lines (lock held)."""
    log = paths.decisions(module)
    if _count_lines(log) < EPOCH_SIZE:
        return None
    stem = paths.log_stem(module)
    info = state["logs"].setdefault(stem, {"epochs": 0})
    number = int(info.get("epochs", 0)) + 1
    while paths.epoch(module, number).exists():  # state lost or logs copied in
        number += 1
    target = paths.epoch(module, number)
    os.rename(log, target)
    info["epochs"] = number
    return target


# Reading --------------------------------------------------------------------------

def epoch_numbers(paths: AgentPaths, module: str | None) -> list[int]:
    """Archived epoch numbers of ``module``'s log, ascending (scans the directory)."""
    stem = paths.log_stem(module)
    rx = re.compile(re.escape(stem) + r"-epoch-(\d+)\.log")
    if not paths.dir.is_dir():
        return []
    return sorted(int(m.group(1)) for name in os.listdir(paths.dir) if (m := rx.fullmatch(name)))


def _latest_epoch(paths: AgentPaths, module: str | None) -> int:
    """Newest epoch number: from state.json when it agrees with the disk, else a scan."""
    info = read_state(paths)["logs"].get(paths.log_stem(module), {})
    number = int(info.get("epochs", 0))
    if number and paths.epoch(module, number).exists() and not paths.epoch(module, number + 1).exists():
        return number
    found = epoch_numbers(paths, module)
    return found[-1] if found else 0


def latest(paths: AgentPaths, module: str | None, count: int) -> tuple[list[Entry], list[BadLine]]:
    """The newest ``count`` decisions of one log (oldest first) and bad lines met on the way.

    Reads only the tail of the live log, then the tails of the newest epochs
    until ``count`` decisions are found.
    """
    entries: list[Entry] = []
    bad: list[BadLine] = []
    if count <= 0:
        return entries, bad
    files = [paths.decisions(module)]
    epoch = _latest_epoch(paths, module)
    while True:
        path = files[-1]
        need = count - len(entries)
        got: list[Entry] = []
        for raw in tail_lines(path, need + 2):
            item = _parse_raw(raw, path, module)
            (got if isinstance(item, Entry) else bad).append(item)  # type: ignore[arg-type]
        entries = got[-need:] + entries
        if len(entries) >= count or epoch <= 0:
            break
        files.append(paths.epoch(module, epoch))
        epoch -= 1
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
    found: set[str] = set()
    for name in os.listdir(paths.dir):
        if _GLOBAL_EPOCH_RE.fullmatch(name) or name == "decisions.log":
            continue
        m = _MODULE_LOG_RE.fullmatch(name)
        if m:
            found.add(m.group(1))
    return [None, *sorted(found)]


def files_of(paths: AgentPaths, module: str | None) -> list[Path]:
    """Every log file of ``module``, oldest epoch first, live log last."""
    out = [paths.epoch(module, n) for n in epoch_numbers(paths, module)]
    live = paths.decisions(module)
    if live.exists():
        out.append(live)
    return out


def iter_all(paths: AgentPaths, module: str | None) -> Iterator[Entry | BadLine]:
    """Every line of every epoch of ``module``'s log, parsed, oldest first."""
    for path in files_of(paths, module):
        for raw in all_lines(path):
            yield _parse_raw(raw, path, module)


def scan_bad_lines(paths: AgentPaths) -> list[BadLine]:
    """Every malformed or torn line in every decision log (for ``agentd doctor``)."""
    return [item for m in log_modules(paths) for item in iter_all(paths, m) if isinstance(item, BadLine)]


def check_module_exists(paths: AgentPaths, module: str | None) -> None:
    """Raise when ``module`` has no log at all (helps catch typos in --module)."""
    if module is not None and not files_of(paths, module):
        raise StoreError(f"no decision log for module {module!r} in {paths.rel(paths.dir)}")
