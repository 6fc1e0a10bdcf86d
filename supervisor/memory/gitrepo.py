"""agentd's own git work, through libgit2 (pygit2): no ``git`` process, and nothing a repository configures ever runs.

Why not the git CLI: an agent writes ``.git/`` (its config, hooks and
``info/attributes``) from inside its fence, and the git CLI runs what a
repository configures: hooks (``post-index-change``, ``reference-transaction``
...), ``core.fsmonitor``, filter drivers named by an attributes line, pagers,
external diffs.  agentd runs unfenced, so each of those would be the agent's
way out.  libgit2 has none of these mechanisms: no hooks, no fsmonitor, no
external filter, merge, diff or textconv driver, no credential helper (only
its built-in end-of-line and ident conversions, which are code, not commands),
and it spares a process per call (50 units ending at once cost 5-6 CPU-s of
git processes before).

What is read and written here:

* :func:`open_repo`: the work tree holding a project root.  A repository
  whose ``core.worktree`` (agent-writable) points away from the project is
  refused: agentd would read and store files the agent cannot see.
* :meth:`Repo.scope`: one pass of libgit2's index-to-work-tree diff below the
  scope's directories (its stat cache, ``.gitignore``, racy entries as git
  handles them), and :meth:`Repo.staged` (HEAD against the index).  An index
  libgit2 cannot read (an agent may break it) does not stop the pass: HEAD's
  tree stands in for it and every file in the scope is compared by content.
* :meth:`Repo.store`: a file stored as its bytes are on disk (:mod:`.worktree`).
* :meth:`Repo.tree_with` and :meth:`Repo.commit`: trees from a base tree and
  the changed paths only (no index file, temporary or not), commits with
  agentd's own identity.

Paths given to and returned by :class:`Repo` are relative to the project root
(which may be a subdirectory of the work tree); ``.agent/`` and agentd's state
directory are never part of a scope.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import DeltaStatus, DiffOption, FileMode
from pygit2.ffi import C, ffi
from pygit2.utils import StrArray

from .gitpaths import STATE_DIR, RepoError, matches
from .store import AGENT_DIR
from .worktree import hash_worktree, read_worktree, store_worktree

_WILD = frozenset("*?[\\")
_DIFF_FLAGS = (DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS | DiffOption.INCLUDE_TYPECHANGE
               | DiffOption.IGNORE_SUBMODULES | DiffOption.DISABLE_PATHSPEC_MATCH)
_LETTER = {DeltaStatus.ADDED: "A", DeltaStatus.DELETED: "D", DeltaStatus.MODIFIED: "M", DeltaStatus.RENAMED: "R",
           DeltaStatus.COPIED: "C", DeltaStatus.TYPECHANGE: "T", DeltaStatus.UNTRACKED: "?",
           DeltaStatus.UNMODIFIED: "", DeltaStatus.CONFLICTED: "U"}
GitError = pygit2.GitError
HIDDEN = (AGENT_DIR + "/", STATE_DIR + "/")


@dataclass(frozen=True)
class Seen:
    """One path of a scope as the index-to-work-tree pass saw it."""

    status: str  # "" same as the index, "M" modified, "D" deleted, "?" untracked, "T" type changed
    blob: str | None  # the index's blob (tracked paths)
    mode: int  # the index's mode (0 untracked)


def identity() -> pygit2.Signature:
    """agentd's own author and committer, now."""
    return pygit2.Signature(f"agentd ({socket.gethostname() or 'localhost'})", "agentd@localhost")


def hidden(rel: str) -> bool:
    """``.agent/`` and agentd's state directory: never part of a scope."""
    return rel.startswith(HIDDEN)


def literal_dirs(patterns: Sequence[str]) -> list[str]:
    """The directories (or files) a scope's globs can match below: each glob up to its first wildcard part."""
    out: list[str] = []
    for raw in patterns:
        pattern = raw.strip().removeprefix("./").rstrip("/")
        if not pattern:
            continue
        parts = []
        for part in pattern.split("/"):
            if _WILD & set(part):
                break
            parts.append(part)
        literal = "/".join(p for p in parts if p not in ("", "."))
        if not literal:
            return [""]  # a wildcard at the top: the whole project
        out.append(literal)
    return sorted(set(out)) or [""]


@dataclass
class Repo:
    """A work tree and the project root inside it (see the module docstring)."""

    git: pygit2.Repository
    top: Path  # the work tree's top directory (resolved)
    prefix: str  # the project root relative to ``top`` ("" when they are the same)

    # -- paths
    def to_top(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def from_top(self, path: str) -> str | None:
        if not self.prefix:
            return path
        return path[len(self.prefix) + 1:] if path.startswith(self.prefix + "/") else None

    @property
    def common_dir(self) -> Path:
        """The directory holding objects and refs (a linked worktree's ``.git`` file points elsewhere)."""
        gitdir = Path(self.git.path)
        common = gitdir / "commondir"
        if common.is_file():
            text = common.read_text(encoding="utf-8", errors="replace").strip()
            return (gitdir / text).resolve() if text else gitdir
        return gitdir

    # -- HEAD
    def head(self) -> pygit2.Commit | None:
        """HEAD's commit; None in a repository without a commit yet (or a HEAD that names nothing)."""
        try:
            if self.git.head_is_unborn:
                return None
            obj = self.git.head.peel(pygit2.Commit)
        except (GitError, KeyError, ValueError):
            return None
        return obj

    def head_tree(self) -> pygit2.Tree | None:
        commit = self.head()
        return commit.tree if commit is not None else None

    # -- the scope
    def _pathspec(self, patterns: Sequence[str]) -> list[str]:
        dirs = [self.to_top(d) if d else self.prefix for d in literal_dirs(patterns)]
        return [] if "" in dirs else dirs

    def _keep(self, path: str, patterns: Sequence[str]) -> str | None:
        rel = self.from_top(path)
        if rel is None or not rel or rel.endswith("/") or hidden(rel) or not matches(rel, patterns):
            return None
        return rel

    def _index(self) -> pygit2.Index:
        """The repository's index; HEAD's tree in memory when libgit2 cannot read it (no stat cache then)."""
        try:
            index = self.git.index
            index.read(False)  # read now: a broken file fails here, not in the middle of a diff
            return index
        except (GitError, OSError, ValueError):
            index = pygit2.Index()
            tree = self.head_tree()
            if tree is not None:
                index.read_tree(tree)
            return index

    def _diff(self, patterns: Sequence[str], flags: int, tree: pygit2.Tree | None) -> pygit2.Diff:
        """libgit2's index-to-work-tree diff (``tree`` None) or tree-to-index diff, below the scope's directories."""
        opts = ffi.new("git_diff_options *")
        _check(C.git_diff_options_init(opts, 1))
        opts.flags = int(flags)
        out = ffi.new("git_diff **")
        index = self._index()
        with StrArray(self._pathspec(patterns)) as spec:
            spec.assign_to(ffi.addressof(opts, "pathspec"))
            if tree is None:
                _check(C.git_diff_index_to_workdir(out, self.git._repo, index._index, opts))
            else:
                ctree = ffi.new("git_tree **")
                ffi.buffer(ctree)[:] = tree._pointer[:]
                _check(C.git_diff_tree_to_index(out, self.git._repo, ctree[0], index._index, opts))
        return pygit2.Diff.from_c(bytes(ffi.buffer(out)[:]), self.git)

    def scope(self, patterns: Sequence[str], *, unmodified: bool = False) -> dict[str, Seen]:
        """The scope's paths that differ between the index and the work tree (with ``unmodified``: every
        tracked or untracked-not-ignored path), relative to the project root."""
        try:
            self.git.index.read(False)
        except (GitError, OSError, ValueError):
            return self._walk_scope(patterns, unmodified)
        flags = _DIFF_FLAGS | (DiffOption.INCLUDE_UNMODIFIED if unmodified else 0)
        out: dict[str, Seen] = {}
        for delta in self._diff(patterns, flags, None).deltas:
            rel = self._keep(delta.new_file.path or delta.old_file.path, patterns)
            if rel is None:
                continue
            letter = _LETTER.get(delta.status, "M")
            tracked = letter != "?"
            out[rel] = Seen(letter, str(delta.old_file.id) if tracked else None, int(delta.old_file.mode) if tracked else 0)
        return out

    def _walk_scope(self, patterns: Sequence[str], unmodified: bool) -> dict[str, Seen]:
        """:meth:`scope` against HEAD when libgit2 cannot read the index (an agent broke it, or a format libgit2
        lacks): every file below the scope's directories is compared by its bytes on disk."""
        tree = self.head_tree()
        head = {rel: (str(entry.id), entry.filemode) for path, entry in (leaves(tree) if tree is not None else ())
                if (rel := self._keep(path, patterns)) is not None}
        out: dict[str, Seen] = {}
        for start in self._pathspec(patterns) or [self.prefix]:
            for path in self._walk_files(start, {self.to_top(r) for r in head}):
                rel = self._keep(path, patterns)
                if rel is None:
                    continue
                blob, mode = head.get(rel, (None, 0))
                if blob is None:
                    if not self.git.path_is_ignored(path):
                        out[rel] = Seen("?", None, 0)
                elif (now := hash_worktree(self.top, path)) != blob or unmodified:
                    out[rel] = Seen("" if now == blob else "M", blob, mode)
        for rel, (blob, mode) in head.items():
            if rel not in out and read_worktree(self.top, self.to_top(rel)) is None:
                out[rel] = Seen("D", blob, mode)
            elif unmodified and rel not in out:
                out[rel] = Seen("", blob, mode)
        return out

    def _walk_files(self, start: str, tracked: set[str]) -> Iterator[str]:
        """Files and symlinks below ``start`` (relative to the top), without entering ``.git``, nested
        repositories, or ignored directories that hold nothing tracked."""
        base = self.top / start if start else self.top
        if base.is_symlink() or base.is_file():
            yield start
            return
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath).relative_to(self.top).as_posix()
            here = "" if here == "." else here + "/"
            kept = []
            for name in sorted(dirnames):
                full = Path(dirpath) / name
                if full.is_symlink():
                    yield here + name
                elif name != ".git" and not (full / ".git").exists() and (
                        not self.git.path_is_ignored(here + name + "/") or any(t.startswith(here + name + "/") for t in tracked)):
                    kept.append(name)
            dirnames[:] = kept
            yield from (here + name for name in sorted(filenames))

    def staged(self, patterns: Sequence[str]) -> set[str]:
        """The scope's paths whose index entry differs from HEAD (everything in the index without a HEAD)."""
        tree = self.head_tree()
        if tree is None:
            tree = self.git[self.git.TreeBuilder().write()]
        found = set()
        for delta in self._diff(patterns, DiffOption.IGNORE_SUBMODULES | DiffOption.DISABLE_PATHSPEC_MATCH, tree).deltas:
            for path in {delta.old_file.path, delta.new_file.path}:
                rel = self._keep(path, patterns)
                if rel is not None:
                    found.add(rel)
        return found

    # -- blobs, trees, commits
    def read(self, rel: str) -> tuple[bytes, int] | None:
        """``rel``'s bytes and git mode as on disk (:func:`read_worktree`)."""
        return read_worktree(self.top, self.to_top(rel))

    def store(self, rel: str) -> tuple[str, int] | None:
        """Store ``rel``'s bytes as they are on disk as a blob; (blob, mode), or None when it is not a file."""
        return store_worktree(self.git, self.top, self.to_top(rel))

    def tree_with(self, base: pygit2.Tree | None, changes: Mapping[str, tuple[str, int] | None]) -> str:
        """The tree ``base`` with each path of ``changes`` (relative to the work tree's top) set to its (blob, mode),
        or removed (None).  Only the trees on the changed paths are written."""
        return str(_tree_with(self.git, base, dict(changes)))

    def commit(self, tree: str, parents: Iterable[str], message: str,
               author: pygit2.Signature | None = None) -> str:
        who = author or identity()
        return str(self.git.create_commit(None, who, who, message, pygit2.Oid(hex=tree),
                                          [pygit2.Oid(hex=p) for p in parents]))

    def blob_data(self, blob: str) -> bytes:
        """A blob's bytes as stored (no smudge filter, no end-of-line conversion)."""
        obj = self.git.get(blob) if len(blob) >= 40 else self.git.revparse_single(blob)
        if not isinstance(obj, pygit2.Blob):
            raise RepoError(f"{blob} is not a blob")
        return obj.data


def leaves(tree: pygit2.Tree, where: str = "") -> Iterator[tuple[str, pygit2.Object]]:
    """Every entry of ``tree`` that is not a tree (blobs, symlinks, submodules), with its path below it."""
    stack = [(where, tree)]
    while stack:
        here, node = stack.pop()
        for entry in node:
            if isinstance(entry, pygit2.Tree):
                stack.append((f"{here}{entry.name}/", entry))
            else:
                yield f"{here}{entry.name}", entry


def _check(err: int) -> None:
    if err < 0:
        from pygit2.errors import check_error

        check_error(err)


def _tree_with(repo: pygit2.Repository, base: pygit2.Tree | None, changes: dict[str, tuple[str, int] | None]) -> pygit2.Oid:
    here: dict[str, tuple[str, int] | None] = {}
    below: dict[str, dict[str, tuple[str, int] | None]] = {}
    for path, value in changes.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = value
        else:
            here[head] = value
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    for name in sorted(set(here) | set(below)):
        value = here.get(name)
        if value is not None:  # a file (or symlink) here; nothing can be below it
            builder.insert(name, pygit2.Oid(hex=value[0]), value[1])
            continue
        old = base[name] if base is not None and name in base else None
        old = old if isinstance(old, pygit2.Tree) else None
        sub = below.get(name) or {}
        if old is None and not any(v is not None for v in sub.values()):
            if name in here and builder.get(name) is not None:
                builder.remove(name)  # a file removed (nothing new below its name)
            continue
        oid = _tree_with(repo, old, sub)
        if len(repo[oid]):
            builder.insert(name, oid, FileMode.TREE)
        elif builder.get(name) is not None:
            builder.remove(name)
    return builder.write()


# ---------------------------------------------------------------- opening

def open_repo(root: Path) -> Repo | None:
    """The git work tree holding ``root``; None outside git.  Raises :class:`RepoError` for a repository whose
    work tree is not where its ``.git`` is (``core.worktree``), or a bare one."""
    root = Path(root).resolve()
    try:
        found = pygit2.discover_repository(str(root))
    except (GitError, OSError, ValueError):
        return None
    if not found:
        return None
    try:
        repo = pygit2.Repository(found)
    except (GitError, OSError, ValueError) as exc:
        raise RepoError(f"cannot open the git repository at {found}: {exc}") from None
    if repo.is_bare or not repo.workdir:
        return None
    top = Path(repo.workdir).resolve()
    dotgit = next((p for p in (root, *root.parents) if (p / ".git").exists() or (p / ".git").is_symlink()), None)
    if dotgit is None or dotgit.resolve() != top or not root.is_relative_to(top):
        raise RepoError(f"the git repository of {root} names its work tree {top} (core.worktree in "
                        f"{Path(repo.path) / 'config'}), not the directory holding its .git: agentd will not read or "
                        "store files there; remove core.worktree (an agent can write .git/config)")
    prefix = root.relative_to(top).as_posix()
    return Repo(repo, top, "" if prefix == "." else prefix)
