"""``agentd init``: create the ``.agent/`` layout, idempotently, never overwriting.

:func:`ignore_state_dir` adds agentd's state directory (``.agentd/``:
transcripts, logs, the socket) to the project's ``.gitignore``, so it is never
committed; ``.agent/`` (the memory) stays tracked.
"""

from __future__ import annotations

from pathlib import Path

from .engram import ENGRAM_HEADER
from .gitmeta import ensure_git_metadata
from .store import AgentPaths, atomic_write, read_state, store_lock, write_if_missing, write_state
from .task import TASK_TEMPLATE

CONSTRAINTS_TEMPLATE = (
    "# Hard constraints\n\n"
    "<!-- One constraint per line, e.g. \"- Never push to main without review.\"\n"
    "     Always shown in full at wakeup, never trimmed. -->\n"
)
SUMMARY_TEMPLATE = "# Recent summary\n\n(no session summary yet)\n"
DECISIONS_README = (
    "# The .agent/ memory store\n\n"
    "Written by `agentd` (decide, note, fact, promote) and read by `agentd wakeup`.\n"
    "Commit it with the code, or share it between clones with `agentd sync`. Decision logs\n"
    "are append-only; edit constraints.md, current-task.md (the global task) and\n"
    "tasks/<module>.md by hand or with `agentd`/the MCP tools. local/ is this clone's own.\n"
)


def init_store(root: Path) -> list[Path]:
    """Create every missing file and directory of the store; return what was created."""
    paths = AgentPaths(Path(root))
    created: list[Path] = []
    if not paths.dir.exists():
        paths.dir.mkdir(parents=True)
        created.append(paths.dir)
    for directory in (paths.snapshots, paths.facts_dir):
        if not directory.exists():
            directory.mkdir(parents=True)
            created.append(directory)
    templates = {
        paths.constraints: CONSTRAINTS_TEMPLATE,
        paths.current_task: TASK_TEMPLATE,
        paths.engram: ENGRAM_HEADER,
        paths.decisions(None): "",
        paths.recent_summary: SUMMARY_TEMPLATE,
        paths.dir / "README.md": DECISIONS_README,
    }
    for path, text in templates.items():
        if write_if_missing(path, text):
            created.append(path)
    with store_lock(paths):
        if not paths.state.exists():
            write_state(paths, read_state(paths))
            created.append(paths.state)
    created += ensure_git_metadata(paths)  # union merges and per-clone files: safe across clones
    return created


GITIGNORE_COMMENT = "# agentd's state (transcripts, logs, socket): never commit it; .agent/ stays tracked"


def ignore_state_dir(root: Path, state_dir: Path) -> str | None:
    """Add ``state_dir`` (when inside ``root``) to ``root/.gitignore``; the entry added, if any.

    Idempotent: an entry already there (``.agentd``, ``.agentd/``, ``/.agentd/``)
    is left alone, as is a state directory outside the project.
    """
    root = Path(root)
    try:
        rel = Path(state_dir).resolve().relative_to(root.resolve())
    except ValueError:
        return None
    if not rel.parts:
        return None
    entry = "/" + rel.as_posix() + "/"
    path = root / ".gitignore"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    wanted = {entry, entry.rstrip("/"), entry.lstrip("/"), entry.strip("/")}
    if any(line.strip() in wanted for line in text.splitlines()):
        return None
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write(path, text + GITIGNORE_COMMENT + "\n" + entry + "\n")
    return entry
