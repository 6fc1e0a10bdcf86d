"""The plan's git work, with pygit2: scope snapshots, a task's candidate tree, one commit per task.

Why pygit2 and never the ``git`` command in the project: agents can write
``.git`` (the fence lets them commit), so a ``git`` run there could run a hook,
an fsmonitor or a filter an agent configured.  libgit2 runs none of them
(checked: docs/plan.md, /work notes "platform").  Why never in the daemon's
own process: libgit2 opens what a repository names (a ``.gitignore``, a loose
object or ref) with no timeout while holding the GIL, so a FIFO an agent put
there would freeze the daemon.  The daemon calls :func:`call`, which runs one
:class:`PlanRepo` method in its git helper (:mod:`supervisor.memory.gitworker`),
killed when it does not answer in time.

Isolation (docs/plan.md, "Isolation"): the units of a plan work in the
person's tree, each in its own disjoint scope.  A task's work is the change
of its unit's scope between the task's start (:meth:`PlanRepo.snapshot`, the
scope's files as a tree, untracked ones included, ignored ones not: the WIP
commit's mechanism, :func:`supervisor.memory.wip.scope_tree`, kept to the
scope) and the agent's claim.  :meth:`PlanRepo.candidate` applies that change, and only that,
to the plan branch's tip (a three-way merge, so work the unit left from a
parked task, or a person's uncommitted edit, stays out); the checks run on
that tree, checked out clean (:meth:`PlanRepo.materialize`), and
:meth:`PlanRepo.commit` puts it on the branch as one commit whose parent is
the tip agentd recorded (a branch moved by anyone else is refused, never
overwritten).  HEAD, the person's branch, their index and their working tree
are never written: only ``refs/heads/<plan branch>`` and
``refs/agentd/plans/...`` (a parked task's work).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from ..memory.gitfiles import RepoError, matches
from .policy import trailers

SIGNATURE = ("agentd", "agentd@localhost")
PARKED_REFS = "refs/agentd/plans"
#: The longest one request may take: a checkout of a whole tree may be large.
CHECKOUT_TIMEOUT = 300.0


class GitError(Exception):
    """A git operation the plan cannot do (the message says why and what to do)."""


@dataclass(frozen=True)
class Candidate:
    """The task's change applied to the tip: ``tree``, or the paths that conflict."""

    tree: str | None
    conflicts: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # paths the task changes against the tip


class PlanRepo:
    """The project's repository, as a plan uses it (blocking: call it off the loop)."""

    def __init__(self, root: Path, exclude: Sequence[str] = (".agent/",)) -> None:
        from ..memory.gitrepo import open_repo

        self.exclude = tuple(exclude)  # project paths never part of a task's work (memory, agentd's state)
        try:
            found = open_repo(Path(root))
        except RepoError as exc:
            raise GitError(str(exc)) from None
        if found is None:
            raise GitError(f"{root}: not a git repository with a work tree: a plan commits its work "
                           "to a branch; run `git init` and commit the project first")
        self.work = found  # supervisor.memory.gitrepo.Repo: the work tree as the WIP commits read it
        self.repo = found.git
        self.prefix = found.prefix + "/" if found.prefix else ""  # the project inside the repository

    def project_prefix(self) -> str:
        """The project inside the repository ("" or "sub/dir/")."""
        return self.prefix

    def _sig(self) -> pygit2.Signature:
        return pygit2.Signature(*SIGNATURE)

    # -- the branch --------------------------------------------------------------------
    def head(self) -> str:
        if self.repo.head_is_unborn:
            raise GitError("the repository has no commit yet: commit the project before a plan starts")
        return str(self.repo.head.target)

    def tip(self, branch: str) -> str | None:
        ref = self.repo.references.get(f"refs/heads/{branch}")
        return str(ref.target) if ref is not None else None

    def start_branch(self, branch: str) -> tuple[str, str]:
        """The plan's branch ready to take commits: (its tip, what was done).  Never moves the checked-out branch."""
        head = self.head()
        name = f"refs/heads/{branch}"
        if not self.repo.head_is_detached and self.repo.head.name == name:
            raise GitError(f"the plan's branch {branch!r} is the branch checked out here: agentd never moves the "
                           "branch you work on; set [plan] branch to another name")
        tip = self.tip(branch)
        if tip is None:
            self.repo.references.create(name, pygit2.Oid(hex=head))
            return head, f"created {branch} at {head[:12]}"
        if tip == head:
            return tip, f"{branch} is at HEAD"
        if self.repo.descendant_of(pygit2.Oid(hex=head), pygit2.Oid(hex=tip)):
            self.repo.references[name].set_target(pygit2.Oid(hex=head), "agentd plan: fast-forward to HEAD")
            return head, f"fast-forwarded {branch} to HEAD {head[:12]}"
        if self.repo.descendant_of(pygit2.Oid(hex=tip), pygit2.Oid(hex=head)):
            return tip, f"{branch} continues from {tip[:12]} (ahead of HEAD)"
        raise GitError(f"branch {branch!r} ({tip[:12]}) and HEAD ({head[:12]}) have diverged: merge or delete the "
                       "branch, or set [plan] branch to another name")

    def commit(self, branch: str, expected: str, tree: str, message: str) -> str:
        """A commit of ``tree`` on ``branch`` with parent ``expected``; refused when the branch moved."""
        ref = self.repo.references.get(f"refs/heads/{branch}")
        found = str(ref.target) if ref is not None else None
        if found != expected:
            raise GitError(f"branch {branch!r} is at {found and found[:12]}, not at {expected[:12]} where agentd "
                           "left it: someone else moved it; agentd does not overwrite it")
        oid = self.repo.create_commit(None, self._sig(), self._sig(), message, pygit2.Oid(hex=tree),
                                      [pygit2.Oid(hex=expected)])
        ref.set_target(oid, f"agentd plan: {message.splitlines()[0][:80]}")
        return str(oid)

    def find_commit(self, branch: str, since: str, plan: str, task: str, tree: str | None) -> str | None:
        """agentd's commit of ``task`` on ``branch`` after ``since`` (its parent), holding ``tree``; None when absent."""
        tip = self.tip(branch)
        if tip is None:
            return None
        mark = trailers(plan, task, 0).rsplit("\n", 1)[0] + "\n"  # the plan and task lines
        for commit in self.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL):
            if str(commit.id) == since:
                return None
            if (mark in commit.message and [str(p) for p in commit.parent_ids] == [since]
                    and (tree is None or str(commit.tree_id) == tree)):
                return str(commit.id)
        return None

    def keep(self, ref: str, tree: str, parent: str, message: str) -> str:
        """A commit of ``tree`` on its own ref (a parked task's work), replacing an older one."""
        oid = self.repo.create_commit(None, self._sig(), self._sig(), message, pygit2.Oid(hex=tree),
                                      [pygit2.Oid(hex=parent)])
        self.repo.references.create(ref, oid, force=True)
        return str(oid)

    def diffstat(self, commit: str) -> dict[str, Any]:
        c = self.repo[pygit2.Oid(hex=commit)]
        parent = c.parents[0].tree if c.parents else self.repo[self.repo.TreeBuilder().write()]
        diff = self.repo.diff(parent, c.tree)
        files = [d.delta.new_file.path if d.delta.status != pygit2.GIT_DELTA_DELETED else d.delta.old_file.path
                 for d in diff]
        stats = diff.stats
        return {"files": stats.files_changed, "insertions": stats.insertions, "deletions": stats.deletions,
                "paths": files[:50]}

    # -- scopes ------------------------------------------------------------------------
    def _in(self, path: str, scope: Sequence[str]) -> bool:
        if not path.startswith(self.prefix):
            return False
        rel = path[len(self.prefix):]
        if rel.startswith(self.exclude):
            return False
        return matches(rel, [g for g in scope if g.strip()])

    def tree_of_commit(self, commit: str) -> str:
        return str(self.repo[pygit2.Oid(hex=commit)].tree_id)

    def _entries(self, tree: str) -> dict[str, tuple[pygit2.Oid, int]]:
        index = pygit2.Index()
        index.read_tree(self.repo[pygit2.Oid(hex=tree)])
        return {e.path: (e.id, e.mode) for e in index}

    def _tree_of(self, entries: dict[str, tuple[pygit2.Oid, int]]) -> str:
        index = pygit2.Index()
        for path, (oid, mode) in entries.items():
            index.add(pygit2.IndexEntry(path, oid, mode))
        return str(index.write_tree(self.repo))

    def snapshot(self, scope: Sequence[str]) -> str:
        """The scope's files in the working tree now, as a tree holding only them (blobs written to the store):
        the WIP commit's tree of the scope (:func:`supervisor.memory.wip.scope_tree`: bytes as on disk, no
        filter, a symlink as its text, never a FIFO), less everything outside the scope."""
        from ..memory.wip import scope_tree

        tree, _too_large = scope_tree(self.work, [g for g in scope if g.strip()])
        if self.repo.get(tree) is None:  # no commit yet and nothing changed: the empty tree, never written
            return self._tree_of({})
        return self._tree_of({p: v for p, v in self._entries(tree).items() if self._in(p, scope)})

    def overlay(self, tree: str, scope: Sequence[str], scope_tree: str) -> str:
        """``tree`` with the scope's files replaced by those of ``scope_tree`` (its files outside the scope ignored)."""
        entries = {p: v for p, v in self._entries(tree).items() if not self._in(p, scope)}
        entries.update({p: v for p, v in self._entries(scope_tree).items() if self._in(p, scope)})
        return self._tree_of(entries)

    def park(self, ref: str, tip: str, scope: Sequence[str], base: str | None, work: str, message: str) -> str | None:
        """A parked task's work (its change applied to ``tip``, else the tip with its scope as ``work``) kept on
        ``ref``; None when it holds nothing the tip does not."""
        cand = self.candidate(tip, scope, base, work) if base else None
        tree = cand.tree if cand is not None and cand.tree else self.overlay(self.tree_of_commit(tip), scope, work)
        if tree == self.tree_of_commit(tip):
            return None
        self.keep(ref, tree, tip, message)
        return ref

    def candidate(self, tip: str, scope: Sequence[str], base: str, claimed: str) -> Candidate:
        """The tip plus the task's own change (``base`` -> ``claimed``, both scope snapshots)."""
        ours = str(self.repo[pygit2.Oid(hex=tip)].tree_id)
        start = self.overlay(ours, scope, base)
        theirs = self.overlay(ours, scope, claimed)
        changed = tuple(self.changed_paths(start, theirs))
        if start == ours:
            return Candidate(theirs, changed=changed)
        merged = self.repo.merge_trees(pygit2.Oid(hex=start), pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
        if merged.conflicts is not None:
            paths = sorted({(c[1] or c[2] or c[0]).path for c in merged.conflicts})
            return Candidate(None, tuple(paths), changed)
        return Candidate(str(merged.write_tree(self.repo)), changed=changed)

    def changed_paths(self, a: str, b: str) -> list[str]:
        diff = self.repo.diff(self.repo[pygit2.Oid(hex=a)], self.repo[pygit2.Oid(hex=b)])
        return [d.delta.new_file.path for d in diff]

    def materialize(self, tree: str, dest: Path) -> int:
        """Write ``tree``'s files under ``dest`` (blobs as they are: no filters, no hooks); the file count."""
        count = 0
        for path, (oid, mode) in self._entries(tree).items():
            if mode == pygit2.GIT_FILEMODE_COMMIT:
                continue  # a submodule: not checked out
            parts = path.split("/")
            if path.startswith("/") or ".." in parts or ".git" in parts:
                raise GitError(f"tree {tree[:12]} holds the path {path!r}: refused (it would leave the checkout)")
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            data = self.repo[oid].data
            if mode == pygit2.GIT_FILEMODE_LINK:
                os.symlink(data, target)
            else:
                target.write_bytes(data)
                if mode == pygit2.GIT_FILEMODE_BLOB_EXECUTABLE:
                    target.chmod(0o755)
            count += 1
        return count


def call(root: str, exclude: tuple[str, ...], method: str, args: tuple[Any, ...]) -> Any:
    """``PlanRepo(root, exclude).method(*args)``: what the daemon's git helper runs (see the module doc)."""
    if method.startswith("_") or not callable(getattr(PlanRepo, method, None)):
        raise GitError(f"{method!r} is not a plan repository operation")
    return getattr(PlanRepo(Path(root), exclude), method)(*args)


def run(root: Path, exclude: Sequence[str], method: str, *args: Any, timeout: float | None = None) -> Any:
    """:func:`call` in this process's git helper (the daemon's; here where there is none), bounded in time;
    a helper that gives no answer is killed and the call fails with :class:`GitError` naming why."""
    from ..memory.gitworker import run as in_helper

    try:
        return in_helper(call, str(root), tuple(exclude), method, tuple(args), what=f"the plan's git work ({method})",
                         timeout=timeout)
    except RepoError as exc:
        raise GitError(str(exc)) from None
