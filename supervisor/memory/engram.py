"""``engram.md``: append-only working notes, each confirmed or a hypothesis.

A line is ``- [YYYY-MM-DD HH:MM] [confirmed] [@core] text`` (or
``[hypothesis]``, or ``[auto]`` for what the supervisor wrote because the agent
did not confirm a checkpoint).  ``[@core]`` names the module the note belongs
to; a line without it is global (every line written before modules were
recorded is).  A module's wakeup shows its own notes and the global ones,
never another module's.  Anything else in the file (headings, prose) is kept
but ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .clock import Clock, moment, system_clock
from .store import AgentPaths, append_line, format_time, read_text, require_store, store_lock, validate_module
from .tail import tail_lines

KINDS = ("confirmed", "hypothesis", "auto")
ENGRAM_HEADER = (
    "# Engram\n\n"
    "Append-only working notes: `agentd note \"TEXT\" --confirmed|--hypothesis`.\n"
    "`agentd promote` moves confirmed notes into facts and archives the rest.\n\n"
)
_LINE_RE = re.compile(
    r"-\s*\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\]\s*\[(confirmed|hypothesis|auto)\]\s*(?:\[@([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\]\s*)?(.+)",
    re.I,
)


@dataclass(frozen=True)
class Note:
    """One engram line; ``module`` None is a global note."""

    time: str
    kind: str
    text: str
    line: int = 0  # 1-based line number, 0 when unknown (read from a tail)
    module: str | None = None

    def render(self) -> str:
        tag = f" [@{self.module}]" if self.module else ""
        return f"- [{self.time}] [{self.kind}]{tag} {self.text}"

    def visible_to(self, module: str | None) -> bool:
        """Shown in ``module``'s briefing: its own notes and the global ones."""
        return self.module is None or self.module == module


def parse_line(text: str) -> Note | None:
    """The note on this line, or None for headings, prose and blank lines."""
    m = _LINE_RE.fullmatch(text.strip())
    if not m:
        return None
    return Note(m.group(1), m.group(2).lower(), m.group(4).strip(), module=m.group(3))


def append_note(
    root: Path, text: str, kind: str, *, module: str | None = None, now: datetime | None = None,
    clock: Clock = system_clock,
) -> Note:
    """Append a note of ``kind`` (confirmed / hypothesis / auto) for ``module`` (None: global) to engram.md."""
    paths = AgentPaths(Path(root))
    require_store(paths)
    module = validate_module(module)
    if kind not in KINDS:
        raise ValueError(f"note kind {kind!r}: use one of {', '.join(KINDS)}")
    text = " ".join(text.split())
    if not text:
        raise ValueError("the note is empty: write what you learned or suspect")
    note = Note(format_time(moment(now, clock)), kind, text, module=module)
    with store_lock(paths):
        if not paths.engram.exists():
            paths.engram.write_text(ENGRAM_HEADER, encoding="utf-8")
        append_line(paths.engram, note.render())
    return note


def recent(paths: AgentPaths, count: int, module: str | None = None, *, every_module: bool = False) -> list[Note]:
    """The newest ``count`` notes visible to ``module`` (oldest first), read from the file's tail.

    ``every_module``: all notes whatever their module.  The window read from
    the end grows until enough notes are found or the file is read whole.
    """
    if count <= 0:
        return []
    window = count * 2 + 8
    while True:
        raws = tail_lines(paths.engram, window)
        seen: set[str] = set()
        out: list[Note] = []
        for raw in raws:
            note = parse_line(raw.text)
            if note is not None and (every_module or note.visible_to(module)) and raw.text not in seen:
                seen.add(raw.text)
                out.append(note)
        if len(out) >= count or len(raws) < window:
            return out[-count:]
        window *= 4


def all_notes(path: Path) -> list[Note]:
    """Every note of an engram file, with line numbers."""
    out = []
    lineno = 0
    for lineno, text in enumerate(read_text(path).splitlines(), start=1):
        note = parse_line(text)
        if note is not None:
            out.append(Note(note.time, note.kind, note.text, lineno, note.module))
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


