"""The memory store as git trees, for ``agentd sync``: which files travel, read, written back, committed (libgit2).

:func:`memory_file` is the set ``sync`` carries: the files agentd writes in
``.agent/`` (the top files of :data:`TOP_FILES`, the decision logs and their
epochs, ``tasks/<module>.md``, ``facts/<module>.md``,
``snapshots/snapshot-<id>.json``).  Anything else (a file an agent dropped
there, a symlink) is left out and named; a remote's such file never reaches
``.agent/``.  ``local/`` and temporary files are this clone's, never shared.
Files are read as their bytes are on disk (:mod:`.worktree`) and every tree
holds regular files only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .ids import snapshot_sort_key
from .store import AgentPaths, atomic_write

if TYPE_CHECKING:
    from .gitrepo import Repo

EXCLUDED_TOP = frozenset({"local", ".lock", "state.json"})
#: The files agentd writes at the top of ``.agent/`` (besides the decision logs).
TOP_FILES = frozenset({"constraints.md", "current-task.md", "engram.md", "engram-archive.md", "recent-summary.md",
                       "README.md", ".gitattributes", ".gitignore"})
EPOCH_SUFFIX_RE = re.compile(r"-epoch-\d+(?=\.log$)")
_TMP_RE = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")
_MODULE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_LOG_FILE_RE = re.compile(rf"decisions(?:-{_MODULE})?\.log")
_PER_MODULE_RE = re.compile(rf"(?:tasks|facts)/{_MODULE}\.md")
_REGULAR = 0o100644


def memory_file(rel: str) -> bool:
    """True for a file agentd writes in ``.agent/`` (``rel`` relative to it): what ``sync`` carries.

    The top files (:data:`TOP_FILES`), the decision logs and their epochs,
    ``tasks/<module>.md``, ``facts/<module>.md`` and ``snapshots/snapshot-<id>.json``.
    """
    if rel in TOP_FILES or _LOG_FILE_RE.fullmatch(EPOCH_SUFFIX_RE.sub("", rel)) or _PER_MODULE_RE.fullmatch(rel):
        return True
    folder, _, name = rel.partition("/")
    return (folder == "snapshots" and name.startswith("snapshot-") and name.endswith(".json")
            and bool(snapshot_sort_key(name[:-5])))


def _excluded(rel: str) -> bool:
    """Per-clone or temporary files of the store (``rel`` is relative to ``.agent/``)."""
    parts = rel.split("/")
    return parts[0] in EXCLUDED_TOP or bool(_TMP_RE.fullmatch(parts[-1]))


class SyncTree:
    """The store's files as git trees (libgit2): read, write back, commit."""

    def __init__(self, paths: AgentPaths, repo: Repo) -> None:
        self.paths, self.repo = paths, repo
        self.prefix = repo.to_top(paths.dir.name)

    def rev(self, name: str) -> str | None:
        """The commit a ref names (``HEAD`` included), or None."""
        import pygit2

        if name == "HEAD":
            head = self.repo.head()
            return str(head.id) if head is not None else None
        ref = self.repo.git.references.get(name)
        if ref is None:
            return None
        try:
            return str(ref.peel(pygit2.Commit).id)
        except (pygit2.GitError, ValueError, KeyError):
            return None

    def tree_of(self, commit: str) -> str:
        return str(self.repo.git[commit].tree_id)

    def working_files(self) -> tuple[list[str], list[str]]:
        """(the memory files to carry, relative to the work tree's top; the others, relative to ``.agent/``)."""
        out, skipped = [], []
        for dirpath, dirnames, filenames in os.walk(self.paths.dir):
            rel_dir = Path(dirpath).relative_to(self.paths.dir).as_posix()
            dirnames[:] = sorted(d for d in dirnames if not (rel_dir == "." and d in EXCLUDED_TOP))
            for name in [*sorted(filenames), *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if _excluded(rel):
                    continue
                full = Path(dirpath) / name
                if memory_file(rel) and full.is_file() and not full.is_symlink():
                    out.append(f"{self.prefix}/{rel}")
                else:
                    skipped.append(rel)
        return out, sorted(skipped)

    def build_tree(self, entries: dict[str, str]) -> str:
        """A tree of ``path -> blob`` (nothing else; HEAD, the index and the work tree untouched)."""
        return self.repo.tree_with(None, {path: (blob, _REGULAR) for path, blob in entries.items()})

    def working_tree(self) -> tuple[str, dict[str, str], list[str]]:
        from .worktree import store_worktree

        files, skipped = self.working_files()
        entries = {}
        for path in files:
            got = store_worktree(self.repo.git, self.repo.top, path)  # the bytes as on disk, never followed
            if got is not None:
                entries[path] = got[0]
        return self.build_tree(entries), entries, skipped

    def entries(self, treeish: str) -> dict[str, str]:
        """agentd's memory files under ``.agent/`` in ``treeish`` (regular files only)."""
        import pygit2

        obj = self.repo.git[treeish]
        tree = obj.peel(pygit2.Tree)
        try:
            top = tree[self.prefix]
        except KeyError:
            return {}
        from .gitrepo import leaves

        if not isinstance(top, pygit2.Tree):
            return {}
        return {f"{self.prefix}/{rel}": str(entry.id) for rel, entry in leaves(top)
                if entry.type_str == "blob" and entry.filemode in (0o100644, 0o100755)
                and not _excluded(rel) and memory_file(rel)}

    def blobs(self, ids: list[str]) -> dict[str, bytes]:
        return {ident: self.repo.blob_data(ident) for ident in ids}

    def seed(self) -> str | None:
        """A commit of HEAD's ``.agent/`` with a fixed author and date: the same on every clone of one HEAD."""
        import pygit2

        head = self.rev("HEAD")
        if head is None:
            return None
        entries = self.entries(head)
        if not entries:
            return None
        fixed = pygit2.Signature("agentd", "agentd@localhost", 1000000000, 0)
        return self.repo.commit(self.build_tree(entries), [], "agentd memory: seed from HEAD's .agent/\n", fixed)

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        return self.repo.commit(tree, parents, message + "\n")

    def write_back(self, ours: dict[str, str], merged: dict[str, str], keep: set[str]) -> None:
        """Make ``.agent/`` hold ``merged``, except the paths in ``keep`` (lock held)."""
        changed = [p for p, b in merged.items() if ours.get(p) != b and p not in keep]
        contents = self.blobs(sorted({merged[p] for p in changed}))
        for path in changed:
            atomic_write(self.repo.top / path, contents[merged[path]])
        for path in ours:
            if path not in merged and path not in keep:
                (self.repo.top / path).unlink(missing_ok=True)

    def merge(self, local: str, remote_tip: str) -> tuple[dict[str, str], set[str]]:
        """libgit2's merge of the two commits: (the memory files it settled, the paths it left conflicted)."""
        index = self.repo.git.merge_commits(local, remote_tip)
        conflicted = set()
        for triple in (index.conflicts or ()):
            conflicted |= {e.path for e in triple if e is not None}
        merged = {}
        for entry in index:
            path = entry.path
            rel = path[len(self.prefix) + 1:] if path.startswith(self.prefix + "/") else None
            if (path not in conflicted and rel is not None and int(entry.mode) in (0o100644, 0o100755)
                    and not _excluded(rel) and memory_file(rel)):
                merged[path] = str(entry.id)
        return merged, conflicted
