"""``engram.md``: append-only working notes, each confirmed or a hypothesis.

A line is ``- [YYYY-MM-DD HH:MM] [confirmed] text`` (or ``[hypothesis]``, or
``[auto]`` for what the supervisor wrote because the agent did not confirm a
checkpoint).  Anything else in the file (headings, prose) is kept but ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .store import AgentPaths, append_line, format_time, read_text, require_store, store_lock
from .tail import all_lines, tail_lines

KINDS = ("confirmed", "hypothesis", "auto")
ENGRAM_HEADER = (
    "# Engram\n\n"
    "Append-only working notes: `agentd note \"TEXT\" --confirmed|--hypothesis`.\n"
    "`agentd promote` moves confirmed notes into facts and archives the rest.\n\n"
)
_LINE_RE = re.compile(r"-\s*\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\]\s*\[(confirmed|hypothesis|auto)\]\s*(.+)", re.I)


@dataclass(frozen=True)
class Note:
    """One engram line."""

    time: str
    kind: str
    text: str
    line: int = 0  # 1-based line number, 0 when unknown (read from a tail)

    def render(self) -> str:
        return f"- [{self.time}] [{self.kind}] {self.text}"


def parse_line(text: str) -> Note | None:
    """The note on this line, or None for headings, prose and blank lines."""
    m = _LINE_RE.fullmatch(text.strip())
    if not m:
        return None
    return Note(m.group(1), m.group(2).lower(), m.group(3).strip())


def append_note(root: Path, text: str, kind: str, *, now: datetime | None = None) -> Note:
    """Append a note of ``kind`` (confirmed / hypothesis / auto) to engram.md."""
    paths = AgentPaths(Path(root))
    require_store(paths)
    if kind not in KINDS:
        raise ValueError(f"note kind {kind!r}: use one of {', '.join(KINDS)}")
    text = " ".join(text.split())
    if not text:
        raise ValueError("the note is empty: write what you learned or suspect")
    note = Note(format_time(now or datetime.now()), kind, text)
    with store_lock(paths):
        if not paths.engram.exists():
            paths.engram.write_text(ENGRAM_HEADER, encoding="utf-8")
        append_line(paths.engram, note.render())
    return note


def recent(paths: AgentPaths, count: int) -> list[Note]:
    """The newest ``count`` notes (oldest first), read from the file's tail."""
    out: list[Note] = []
    window = count * 2 + 8
    for raw in tail_lines(paths.engram, window):
        note = parse_line(raw.text)
        if note is not None:
            out.append(note)
    return out[-count:] if count > 0 else []


def all_notes(path: Path) -> list[Note]:
    """Every note of an engram file, with line numbers."""
    out = []
    lineno = 0
    for lineno, text in enumerate(read_text(path).splitlines(), start=1):
        note = parse_line(text)
        if note is not None:
            out.append(Note(note.time, note.kind, note.text, lineno))
    return out


def rewrite_keeping(paths: AgentPaths, keep: Iterable[Note], archived: list[Note], stamp: str) -> None:
    """Append ``archived`` notes to engram-archive.md and rewrite engram.md with ``keep`` (lock held)."""
    from .store import atomic_write

    if archived:
        if not paths.engram_archive.exists():
            paths.engram_archive.write_text("# Engram archive\n\n", encoding="utf-8")
        append_line(paths.engram_archive, f"## archived {stamp}")
        for note in archived:
            append_line(paths.engram_archive, note.render())
    atomic_write(paths.engram, ENGRAM_HEADER + "".join(n.render() + "\n" for n in keep))


def count_lines(path: Path) -> int:
    """Number of notes in ``path`` (used by doctor)."""
    return sum(1 for raw in all_lines(path) if parse_line(raw.text))
