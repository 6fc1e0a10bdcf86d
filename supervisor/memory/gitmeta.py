"""The git settings that make ``.agent/`` safe to share between clones.

``agentd init`` (and every ``agentd sync``) makes sure two files exist in
``.agent/`` with these lines, adding only the lines that are missing and
never removing a line someone else put there:

* ``.agent/.gitattributes``: the append-only files merge with git's built-in
  ``union`` driver, so two clones that both appended never conflict and both
  sides' lines are kept (readers then skip a line seen twice).  Task files
  are not union-merged: two versions of one "State at interruption" would be
  worse than a conflict, which ``agentd sync`` resolves by keeping this
  clone's version (the other stays in the memory branch's history).
* ``.agent/.gitignore``: ``local/`` (the lock, the ``state.json`` cache, the
  sync record) and the per-clone files of older versions stay out of the
  shared history.
"""

from __future__ import annotations

from pathlib import Path

from .store import AgentPaths, atomic_write, read_text

GITATTRIBUTES = (
    "# agentd: append-only memory files merge line by line, keeping both sides' lines (never a conflict)",
    "decisions*.log merge=union",
    "engram.md merge=union",
    "engram-archive.md merge=union",
    "facts/*.md merge=union",
    "constraints.md merge=union",
)
GITIGNORE = (
    "# agentd: this clone's own state (lock, caches, sync record), never shared",
    "/local/",
    "/.lock",
    "/state.json",
)


def ensure_lines(path: Path, lines: tuple[str, ...]) -> bool:
    """Append the lines of ``lines`` that ``path`` lacks (atomically); True when the file changed."""
    text = read_text(path)
    present = {ln.strip() for ln in text.splitlines()}
    missing = [ln for ln in lines if ln.strip() not in present]
    if not missing:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    atomic_write(path, text + "".join(ln + "\n" for ln in missing))
    return True


def ensure_git_metadata(paths: AgentPaths) -> list[Path]:
    """Make sure ``.agent/.gitattributes`` and ``.agent/.gitignore`` carry agentd's lines; return the files changed."""
    changed = []
    for name, lines in ((".gitattributes", GITATTRIBUTES), (".gitignore", GITIGNORE)):
        path = paths.dir / name
        if ensure_lines(path, lines):
            changed.append(path)
    return changed
