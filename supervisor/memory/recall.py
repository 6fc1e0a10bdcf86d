"""``agentd recall``: deterministic keyword and path search over decisions, facts and engram.

No model and no embeddings: an item matches when every word appears in it
(case-insensitive substring; a decision's time and snapshot id and a fact's
id count as words of it, so ``agentd recall snapshot-01JD...`` finds exactly one
decision), when its files match ``--path`` (a scope glob; either side may be
the glob), when it carries ``--tag``, and when it belongs to ``--module``.
Results are newest first; ties keep a fixed order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import decisions, engram, facts
from .gitfiles import matches
from .store import AgentPaths, validate_module

KINDS = ("decision", "fact", "engram")


@dataclass(frozen=True)
class Hit:
    """One recalled item."""

    kind: str
    time: str
    module: str | None
    text: str
    where: str  # "path:line" or "path" relative to the project root
    order: tuple[str, int]  # tie-breaker: (snapshot sort key or "", position)

    def render(self) -> str:
        return f"{self.text}    ({self.kind}, {self.module or 'global'}, {self.where})"


def _path_match(files: Iterable[str], pattern: str) -> bool:
    return any(matches(f, [pattern]) or matches(pattern, [f]) for f in files)


def _words_match(text: str, words: Sequence[str]) -> bool:
    low = text.lower()
    return all(w.lower() in low for w in words)


def recall(
    root: Path,
    words: Sequence[str] = (),
    *,
    tag: str | None = None,
    path: str | None = None,
    modules: Sequence[str] = (),
    kinds: Sequence[str] = KINDS,
    limit: int | None = None,
) -> list[Hit]:
    """Every matching item, newest first (see the module docstring).

    ``modules`` restricts decisions, facts and engram notes to those modules
    ("global" is the global log and the notes without a module).
    """
    paths = AgentPaths(Path(root))
    for m in modules:
        if m != "global":
            validate_module(m)
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"kind {k!r}: use one of {', '.join(KINDS)}")
    words = [w for w in words if w.strip()]
    hits: list[Hit] = []
    if "decision" in kinds:
        hits += _decisions(paths, words, tag, path, modules)
    if "fact" in kinds and tag is None:
        hits += _facts(paths, words, path, modules)
    if "engram" in kinds and path is None:
        hits += _engram(paths, words, tag, modules)
    hits.sort(key=lambda h: (h.time, h.order), reverse=True)
    return hits[:limit] if limit is not None else hits


def _decisions(
    paths: AgentPaths, words: Sequence[str], tag: str | None, pattern: str | None, modules: Sequence[str]
) -> list[Hit]:
    if not modules:
        wanted = decisions.log_modules(paths)
    else:
        wanted = list(dict.fromkeys(None if m == "global" else m for m in modules))
    out = []
    for mod in wanted:
        for pos, item in enumerate(decisions.iter_all(paths, mod)):
            if not isinstance(item, decisions.Entry):
                continue
            d = item.decision
            line_text = " ".join([d.time, d.decision, d.why, d.alternatives, " ".join(d.files), " ".join(d.tags),
                                  d.snapshot])
            if tag is not None and tag not in d.tags:
                continue
            if pattern is not None and not _path_match(d.files, pattern):
                continue
            if not _words_match(line_text, words):
                continue
            tags = "".join(f"[{t}] " for t in d.tags)
            text = f"[{d.time}] {tags}{d.decision} | why: {d.why}"
            if d.files:
                text += " | files: " + ", ".join(d.files)
            if d.snapshot:
                text += f" | {d.snapshot}"
            out.append(Hit("decision", d.time, mod, text, paths.rel(item.path), (d.snapshot_key, pos)))
    return out


def _facts(paths: AgentPaths, words: Sequence[str], pattern: str | None, modules: Sequence[str]) -> list[Hit]:
    out = []
    for pos, fact in enumerate(facts.load_all(paths)):
        mod = None if fact.module == "global" else fact.module
        if modules and fact.module not in modules:
            continue
        src_path = fact.source.rsplit(":", 1)[0] if ":" in fact.source else fact.source
        if pattern is not None and not _path_match([src_path], pattern):
            continue
        if not _words_match(f"{fact.id} {fact.text} {fact.source}", words):
            continue
        text = f"[{fact.id}] [{fact.status}] {fact.text} | source: {fact.source}"
        where = f"{paths.rel(paths.facts(mod))}:{fact.line}"
        out.append(Hit("fact", fact.added, mod, text, where, ("", pos)))
    return out


def _engram(paths: AgentPaths, words: Sequence[str], tag: str | None, modules: Sequence[str]) -> list[Hit]:
    out = []
    for path in (paths.engram_archive, paths.engram):
        for pos, note in enumerate(engram.all_notes(path)):
            if tag is not None and tag != note.kind:
                continue
            if modules and (note.module or "global") not in modules:
                continue
            if not _words_match(note.render(), words):
                continue
            rank = 1 if path == paths.engram else 0
            out.append(Hit("engram", note.time, note.module, note.render(), f"{paths.rel(path)}:{note.line}",
                           ("", rank * 10**9 + pos)))
    return out
