"""Files in a scope and their git blob hashes, read through libgit2 (no ``git`` process).

Inside a git work tree one pass of libgit2's index-to-work-tree diff below the
scope's directories (:meth:`.gitrepo.Repo.scope`) names every tracked and
untracked-not-ignored file with its state: an unchanged file's hash is its
index blob; a changed or untracked one is stored in the object database **as
its bytes are on disk** (no clean filter, no end-of-line conversion: a CRLF
file keeps its CRLFs), so ``git cat-file -p HASH`` works for every recorded
hash.  Where the object database cannot be written (an agent's own sandbox
keeps ``.git`` read-only) the hashes are still computed and the snapshot's
note says which contents were not stored.  Nothing the repository configures
runs (see :mod:`.gitrepo`).  Outside git the same blob ids are computed in
Python (``sha1("blob <size>\\0" + content)``) but nothing is stored.

Scope globs are relative to the project root: ``*`` stays within a directory,
``**`` crosses directories, and a plain path names a file or a whole directory.
The ``.agent/`` store itself is never part of a scope.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .gitpaths import (  # noqa: F401 - re-exported: the memory modules read them as gitfiles'
    STATE_DIR,
    RepoError,
    blob_hash,
    glob_regex,
    matches,
)
from .store import AGENT_DIR

WALK_LIMIT = 5000
#: The mode of a submodule (a gitlink) in an index or a tree: no blob.
GITLINK = 0o160000
SKIP_DIRS = {".git", AGENT_DIR, STATE_DIR, ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache"}


@dataclass
class ScopeFiles:
    """The files of a scope with their blob hashes, and how they were obtained."""

    files: dict[str, str] = field(default_factory=dict)
    git: bool = False
    note: str = ""


def _repo(root: Path):  # -> gitrepo.Repo | None (libgit2 is imported only when a scope is read)
    from .gitrepo import open_repo

    return open_repo(root)


def _scope(repo, patterns: Sequence[str]):  # -> dict[str, gitrepo.Seen]
    """Every path of the scope; a libgit2 failure is a RuntimeError naming it (what callers catch)."""
    from .gitrepo import GitError

    try:
        return repo.scope(patterns, unmodified=True)
    except (GitError, OSError) as exc:
        raise RuntimeError(f"cannot read the scope's files from git: {exc}") from None


def in_git(root: Path) -> bool:
    """True when ``root`` is inside a git work tree (a refused one too: reading it then says why)."""
    try:
        return _repo(root) is not None
    except RepoError:
        return True


def list_files(root: Path, patterns: Sequence[str], *, limit: int | None = None) -> list[str]:
    """Sorted files of the scope (tracked and untracked-not-ignored in git; walked otherwise)."""
    from .gitworker import run

    files = run(_list_files, root, list(patterns), what="listing the scope's files")
    return files[:limit] if limit is not None else files


def _list_files(root: Path, patterns: Sequence[str]) -> list[str]:
    repo = _repo(root)
    if repo is None:
        return sorted(_walk(root, patterns, WALK_LIMIT))
    return sorted(p for p, s in _scope(repo, patterns).items() if s.status != "D" and s.mode != GITLINK)


def _walk(root: Path, patterns: Sequence[str], limit: int) -> Iterable[str]:
    found = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            if matches(rel, patterns):
                yield rel
                found += 1
                if found >= limit:
                    return


def scope_hashes(root: Path, patterns: Sequence[str]) -> ScopeFiles:
    """Blob hashes of every file in the scope (see the module docstring)."""
    from .gitworker import run

    return run(_scope_hashes, root, list(patterns), what="hashing the scope's files")


def _scope_hashes(root: Path, patterns: Sequence[str]) -> ScopeFiles:
    repo = _repo(root)
    if repo is None:
        files: dict[str, str] = {}
        for rel in _walk(root, patterns, WALK_LIMIT):
            try:
                files[rel] = blob_hash((root / rel).read_bytes())
            except OSError:
                continue
        note = "not a git repository: hashes are git blob ids computed here, no blobs were stored"
        if len(files) >= WALK_LIMIT:
            note += f"; scope truncated to the first {WALK_LIMIT} files"
        return ScopeFiles(files=files, git=False, note=note)
    from .gitrepo import GitError
    from .worktree import MAX_BLOB, TooLarge, hash_worktree

    files = {}
    unstored: list[str] = []
    too_large: list[str] = []
    why = ""
    for rel, seen in sorted(_scope(repo, patterns).items()):
        if seen.mode == GITLINK or seen.status == "D":
            continue  # a submodule has no blob; a deleted file is not in the scope any more
        if seen.status == "" and seen.blob:
            files[rel] = seen.blob
            continue
        if not why:
            try:
                got = repo.store(rel)
                if got is not None:
                    files[rel] = got[0]
                continue
            except TooLarge:
                too_large.append(rel)
                continue
            except (GitError, OSError) as exc:  # .git read-only (an agent's own sandbox): hash, store nothing
                why = str(exc).strip() or type(exc).__name__
        blob = hash_worktree(repo.top, repo.to_top(rel))
        if blob is not None:
            files[rel] = blob
            unstored.append(rel)
        elif (repo.top / repo.to_top(rel)).is_file():
            too_large.append(rel)
    notes = []
    if too_large:
        notes.append(f"{len(too_large)} file(s) over {MAX_BLOB // 2**20} MiB not recorded: {', '.join(too_large[:5])}")
    note = ""
    if unstored:
        shown = ", ".join(unstored[:5]) + (f" (+{len(unstored) - 5} more)" if len(unstored) > 5 else "")
        note = (f"the content of {len(unstored)} changed file(s) was not stored ({why}): {shown}; "
                "their hashes are right, but `agentd snapshot show --file` cannot return them")
    return ScopeFiles(files=files, git=True, note="; ".join(filter(None, [note, *notes])))


def cat_blob(root: Path, blob: str) -> bytes:
    """Content of ``blob`` from the repository, as stored (``git cat-file -p``; no filter runs)."""
    if not re.fullmatch(r"[0-9a-f]{7,64}", blob):
        raise ValueError(f"{blob!r} is not a blob hash")
    from .gitrepo import GitError

    repo = _repo(root)
    if repo is None:
        raise RuntimeError(f"{root} is not in a git work tree")
    try:
        return repo.blob_data(blob)
    except (GitError, KeyError, ValueError) as exc:
        raise RuntimeError(f"no blob {blob}: {exc}") from None
