"""``facts/<module>.md``: stable facts, each tied to the source lines it came from.

One fact per line, each with its id::

    - [F-k3x9q2mz] [valid] The loader reads etc/agentd.toml first | source: supervisor/settings.py:96-103 | sha: 1f2e3d4c5b6a | added: 2026-11-30 14:32

Ids are random (:func:`.ids.new_fact_id`), so two clones never mint the same
one; old ``F-7`` ids still parse.  Because a fact is one line, files edited
on two clones merge line by line (``merge=union``); a fact whose line was
changed on both sides then appears twice, and :func:`merge_duplicates` keeps
one deterministically (an invalidation wins, then stale over valid, then
the greater line), which every reader applies and ``agentd sync`` writes back.

``sha`` is a hash of the cited lines; ``agentd fact check`` re-reads them and
marks the fact ``stale`` when they changed (and ``valid`` again if they are
restored).  ``agentd fact invalidate`` marks a fact ``invalid`` and keeps it,
with the reason, because history matters.  Facts promoted from the engram cite
``engram`` and have no hash; they never go stale.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from . import engram
from .clock import Clock, moment, system_clock
from .ids import IdError, new_fact_id, parse_fact_id
from .lineformat import _split_unescaped, _unescape, escape
from .store import (
    GLOBAL,
    AgentPaths,
    StoreError,
    atomic_write,
    format_time,
    read_text,
    require_store,
    store_lock,
    validate_module,
)

_RANK = {"valid": 0, "stale": 1, "invalid": 2}
_HEAD_RE = re.compile(r"-\s*\[(F-[0-9A-Za-z]+)\]\s*\[(valid|stale|invalid)\]\s*(.*)")
_SOURCE_RE = re.compile(r"(?P<path>[^:]+):(?P<start>\d+)(?:-(?P<end>\d+))?")


@dataclass(frozen=True)
class Fact:
    """One fact of a module."""

    id: str
    status: str
    text: str
    module: str
    source: str = ""  # "path:start-end", or "engram" for promoted notes
    sha: str = ""
    added: str = ""
    invalid_why: str = ""
    line: int = 0

    def render(self) -> str:
        fields = [f"- [{self.id}] [{self.status}] {escape(self.text)}", f"source: {escape(self.source or 'engram')}"]
        if self.sha:
            fields.append(f"sha: {self.sha}")
        if self.added:
            fields.append(f"added: {self.added}")
        if self.invalid_why:
            fields.append(f"invalid: {escape(self.invalid_why)}")
        return " | ".join(fields)


def parse_line(text: str, module: str, line: int = 0) -> Fact | None:
    """The fact on this line, or None for anything else."""
    m = _HEAD_RE.fullmatch(text.strip())
    if not m:
        return None
    parts = _split_unescaped(m.group(3), "|")
    values: dict[str, str] = {}
    for part in parts[1:]:
        label, _, value = part.partition(":")
        values[label.strip()] = _unescape(value.strip())
    return Fact(
        id=m.group(1),
        status=m.group(2),
        text=_unescape(parts[0].strip()),
        module=module,
        source=values.get("source", ""),
        sha=values.get("sha", ""),
        added=values.get("added", ""),
        invalid_why=values.get("invalid", ""),
        line=line,
    )


def parse_source(source: str) -> tuple[str, int, int]:
    """``path:start[-end]`` → (path, start, end); raises :class:`StoreError`."""
    m = _SOURCE_RE.fullmatch(source.strip())
    if not m:
        raise StoreError(f"source {source!r}: expected PATH:LINE or PATH:START-END (e.g. src/app.py:10-24)")
    start = int(m.group("start"))
    end = int(m.group("end") or start)
    if start < 1 or end < start:
        raise StoreError(f"source {source!r}: line range must be 1-based and START <= END")
    return m.group("path"), start, end


def lines_hash(root: Path, source: str) -> str:
    """Hash of the cited lines; raises :class:`StoreError` if the file or lines are missing."""
    rel, start, end = parse_source(source)
    path = root / rel
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except (FileNotFoundError, IsADirectoryError):
        raise StoreError(f"source {source!r}: {rel} does not exist under {root}") from None
    if end > len(lines):
        raise StoreError(f"source {source!r}: {rel} has only {len(lines)} lines")
    chunk = "\n".join(ln.rstrip() for ln in lines[start - 1 : end])
    return hashlib.sha256(chunk.encode("utf-8")).hexdigest()[:12]


def load(paths: AgentPaths, module: str | None) -> list[Fact]:
    """Every fact of ``module`` (None: global), in file order, one per id (:func:`merge_duplicates`)."""
    name = module or GLOBAL
    out = []
    for lineno, text in enumerate(read_text(paths.facts(module)).splitlines(), start=1):
        fact = parse_line(text, name, lineno)
        if fact is not None:
            out.append(fact)
    return merge_duplicates(out)


def merge_duplicates(facts: list[Fact]) -> list[Fact]:
    """One fact per id, where the first copy stood: invalid > stale > valid, then the greater line.

    The choice depends only on the copies, not on their order, so every
    clone that merges the same two versions keeps the same line.
    """
    best: dict[str, Fact] = {}
    order: list[str] = []
    for fact in facts:
        have = best.get(fact.id)
        if have is None:
            order.append(fact.id)
            best[fact.id] = fact
        elif (_RANK[fact.status], fact.render()) > (_RANK[have.status], have.render()):
            best[fact.id] = replace(fact, line=have.line)
    return [best[i] for i in order]


def rewrite_if_duplicated(paths: AgentPaths, module: str | None) -> bool:
    """Rewrite ``module``'s facts file with one line per id when a merge left an id twice (lock held)."""
    lines = read_text(paths.facts(module)).splitlines()
    count = sum(1 for text in lines if parse_line(text, module or GLOBAL) is not None)
    merged = load(paths, module)
    if count == len(merged):
        return False
    _save(paths, module, merged)
    return True


def modules(paths: AgentPaths) -> list[str | None]:
    """Modules with a facts file (None for global)."""
    if not paths.facts_dir.is_dir():
        return []
    names = sorted(p.stem for p in paths.facts_dir.glob("*.md"))
    return [None if n == GLOBAL else n for n in names]


def load_all(paths: AgentPaths) -> list[Fact]:
    return [f for m in modules(paths) for f in load(paths, m)]


def _save(paths: AgentPaths, module: str | None, facts: list[Fact]) -> None:
    header = f"# Facts: {module or GLOBAL}\n\nStable facts with their sources; written by `agentd fact` and `agentd promote`.\n\n"
    atomic_write(paths.facts(module), header + "".join(f.render() + "\n" for f in facts))


def _next_id(paths: AgentPaths, taken: set[str] | None = None) -> str:
    """A fresh fact id, unused in this store (lock held); random, so other clones cannot mint it too."""
    if taken is None:
        taken = {f.id for f in load_all(paths)}
    ident = new_fact_id(taken)
    taken.add(ident)
    return ident


def add_fact(root: Path, module: str | None, text: str, source: str, *, now: datetime | None = None,
             clock: Clock = system_clock) -> Fact:
    """Record a fact citing ``source`` (``path:line[-line]``) with the hash of those lines."""
    paths = AgentPaths(Path(root))
    require_store(paths)
    module = validate_module(module)
    text = " ".join(text.split())
    if not text:
        raise StoreError("the fact is empty: state the fact")
    sha = lines_hash(paths.root, source)
    with store_lock(paths):
        fact = Fact(
            id=_next_id(paths),
            status="valid",
            text=text,
            module=module or GLOBAL,
            source=source.strip(),
            sha=sha,
            added=format_time(moment(now, clock)),
        )
        _save(paths, module, [*load(paths, module), fact])
    return fact


def current_status(root: Path, fact: Fact) -> str:
    """What the status should be now: invalid stays invalid; others valid or stale by hash."""
    if fact.status == "invalid" or not fact.sha:
        return fact.status
    try:
        return "valid" if lines_hash(root, fact.source) == fact.sha else "stale"
    except StoreError:
        return "stale"


def check_facts(root: Path) -> list[tuple[Fact, str]]:
    """Re-read every source; rewrite statuses; return (fact, new status) for every change."""
    paths = AgentPaths(Path(root))
    require_store(paths)
    changes: list[tuple[Fact, str]] = []
    with store_lock(paths):
        for module in modules(paths):
            facts = load(paths, module)
            updated = []
            for fact in facts:
                status = current_status(paths.root, fact)
                if status != fact.status:
                    changes.append((fact, status))
                updated.append(replace(fact, status=status))
            if updated != facts:
                _save(paths, module, updated)
    return changes


def invalidate(root: Path, fact_id: str, why: str, *, now: datetime | None = None,
               clock: Clock = system_clock) -> Fact:
    """Mark fact ``fact_id`` invalid with the reason; it stays in the file."""
    paths = AgentPaths(Path(root))
    require_store(paths)
    why = " ".join(why.split())
    if not why:
        raise StoreError("say why the fact is invalid (--why)")
    try:
        fact_id = parse_fact_id(fact_id)
    except IdError as exc:
        raise StoreError(str(exc)) from None
    with store_lock(paths):
        for module in modules(paths):
            facts = load(paths, module)
            for i, fact in enumerate(facts):
                if fact.id.upper() == fact_id.upper():
                    stamp = format_time(moment(now, clock))
                    facts[i] = replace(fact, status="invalid", invalid_why=f"{why} ({stamp})")
                    _save(paths, module, facts)
                    return facts[i]
    raise StoreError(f"no fact {fact_id} in {paths.rel(paths.facts_dir)} (see `agentd fact list`)")


def promote(root: Path, module: str | None = None, *, now: datetime | None = None,
            clock: Clock = system_clock) -> list[Fact]:
    """Move confirmed engram notes into facts; archive the notes; keep open hypotheses.

    With ``module``: that module's notes and the global ones go to its facts;
    other modules' notes stay in the engram untouched.  Without: every note,
    each to its own module's facts (global notes to the global facts).
    Returns the new facts.
    """
    paths = AgentPaths(Path(root))
    require_store(paths)
    module = validate_module(module)
    stamp = format_time(moment(now, clock))
    with store_lock(paths):
        notes = engram.all_notes(paths.engram)
        mine = [n for n in notes if module is None or n.visible_to(module)]
        target = {id(n): (module if module is not None else n.module) for n in mine}
        keep = [n for n in notes if n.kind == "hypothesis" or id(n) not in target]
        taken = {f.id for f in load_all(paths)}
        new: dict[str | None, list[Fact]] = {}
        for note in mine:
            if note.kind != "confirmed":
                continue
            dest = target[id(note)]
            new.setdefault(dest, []).append(Fact(
                id=_next_id(paths, taken),
                status="valid",
                text=note.text,
                module=dest or GLOBAL,
                source="engram",
                added=note.time,
            ))
        for dest in sorted(new, key=lambda m: m or ""):
            _save(paths, dest, load(paths, dest) + new[dest])
        archived = [n for n in mine if n.kind != "hypothesis"]
        engram.rewrite_keeping(paths, keep, archived, stamp)
    return [f for dest in sorted(new, key=lambda m: m or "") for f in new[dest]]
