"""Repair what a union merge of two clones' ``.agent/`` can leave behind (store lock held).

A union merge never loses a line, but where one side rewrote a file (an
epoch roll cut its block from the top of the live log, ``promote`` archived
notes, a fact's status changed) and the other appended next to it, the
rewritten lines come back as well.  Readers already skip such repeats; this writes the files
clean so they stay small and every clone ends with the same bytes:

* a decision line that appears earlier in its log family (epochs oldest
  first, then the live log) is dropped from the later place;
* an engram note already in ``engram-archive.md`` (or earlier in the file)
  is dropped from the later place; headings and prose are kept;
* a fact id that appears twice keeps one line (:func:`.facts.merge_duplicates`).

Nothing else is changed, and a file is only rewritten (atomically) when a
line goes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import decisions, engram, facts
from .store import AgentPaths, atomic_write, read_text


def _dedupe_family(files: list[Path], is_record: Callable[[str], bool]) -> list[Path]:
    """Drop every record line already seen earlier in ``files``; return the files rewritten."""
    seen: set[str] = set()
    changed = []
    for path in files:
        text = read_text(path)
        if not text:
            continue
        kept = []
        dropped = False
        for line in text.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            if body.strip() and is_record(body):
                if body in seen:
                    dropped = True
                    continue
                seen.add(body)
            kept.append(line)
        if dropped:
            atomic_write(path, "".join(kept))
            changed.append(path)
    return changed


def normalize(paths: AgentPaths) -> list[Path]:
    """Clean every decision log family, the engram and the facts; return the files rewritten."""
    changed: list[Path] = []
    for module in decisions.log_modules(paths):
        changed += _dedupe_family(decisions.files_of(paths, module), lambda line: True)
    changed += _dedupe_family([paths.engram_archive, paths.engram], lambda line: engram.parse_line(line) is not None)
    for module in facts.modules(paths):
        if facts.rewrite_if_duplicated(paths, module):
            changed.append(paths.facts(module))
    return changed
