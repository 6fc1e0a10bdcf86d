"""WIP commits: a unit's uncommitted work in its scope, saved on a private ref, never touching the checkout.

:func:`save_wip` runs before every respawn, restart, stop, scope revert and
scheduled stop (and after an agent crashed), so that whatever an agent left
on disk survives whatever comes next.  It builds a commit with libgit2
(:mod:`.gitrepo`: no ``git`` process, so no hook, fsmonitor or filter the
agent configured in ``.git/`` runs, and none can make the save fail):

1. list the scope's changed files without writing anything (the work tree
   against the index, and the index against HEAD, below the scope's
   directories; ignored untracked files stay out);
2. store each one's bytes as they are on disk (no clean or end-of-line
   filter; a symlink as its target's text, never followed; a deleted file
   leaves the tree) and write the trees on those paths only, from HEAD's tree:
   no index file is written, temporary or not, so a daemon killed mid-save
   leaves nothing behind but unreferenced objects (``git gc`` prunes them);
3. when the tree is HEAD's, there is nothing to save;
4. a commit whose parent is HEAD (agentd's own identity), and the ref
   ``refs/agentd/wip/<unit>/<n>`` created only if absent (``n`` one past the
   newest).

HEAD, the branch, the real index and the work tree are never written.
``git show <commit>`` is the saved work against the HEAD it was made on.  The
commit message names the unit, the session, the moment and the files.  Old
refs are thinned: each unit keeps its newest :data:`KEEP`.  Showing and
restoring a saved commit: :mod:`.wipview`.

The refs are in ``.git/``, which agents can write: so the commit ids agentd
made are recorded in its state directory (:mod:`.wiprecord`), and listing,
restoring and thinning go by that record.  A ref the record does not hold
is listed as *foreign* and never restored or thinned; a recorded ref an
agent deleted or moved is put back at the next save.
:func:`clean_leftovers` removes the temporary index files older versions left
in ``.git/`` when killed mid-save (the daemon calls it at start).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..session.redact import redact_text

if TYPE_CHECKING:
    from .gitrepo import Repo

REF_ROOT = "refs/agentd/wip"
KEEP = 20
FILES_IN_MESSAGE = 50
_UNIT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
#: What older versions named their temporary index in ``.git/`` (left there when killed mid-save).
LEFTOVER_GLOB = "agentd-wip-*.index"


class WipError(RuntimeError):
    """A WIP operation that cannot be done (the message says why and what to do)."""


@dataclass(frozen=True)
class Change:
    status: str  # A M D T R (git's letters)
    path: str
    old: str | None = None  # a rename's old path

    def describe(self) -> str:
        return f"{self.status} {self.old} -> {self.path}" if self.old else f"{self.status} {self.path}"


@dataclass(frozen=True)
class Wip:
    """One saved WIP commit."""

    unit: str
    number: int
    commit: str
    base: str | None  # the HEAD it was made on (None: the repository had no commit)
    time: str
    moment: str = ""
    session: str | None = None
    changes: tuple[Change, ...] = ()
    stat: str = ""  # "2 files changed, 3 insertions(+), 1 deletion(-)"
    more: int = 0  # changed files beyond those named in the message
    foreign: bool = False  # a ref agentd's record does not hold: made or moved by whoever can write .git
    note: str = ""  # what is wrong with it (its ref deleted or moved; its commit gone)

    @property
    def ref(self) -> str:
        return f"{REF_ROOT}/{self.unit}/{self.number}"

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "number": self.number, "ref": self.ref, "commit": self.commit, "base": self.base,
                "time": self.time, "moment": self.moment, "session": self.session,
                "changes": [c.describe() for c in self.changes], "more": self.more, "stat": self.stat,
                "foreign": self.foreign, "note": self.note}


def _unit_name(unit: str) -> str:
    if not _UNIT.fullmatch(unit):
        raise WipError(f"unit name {unit!r} is not valid (a-z, 0-9, _ and -, starting with a letter or digit)")
    return unit


def _open(root: Path) -> Repo:
    from .gitrepo import RepoError, open_repo

    try:
        repo = open_repo(root)
    except RepoError as exc:
        raise WipError(str(exc)) from None
    if repo is None:
        raise WipError(f"{root} is not in a git work tree: WIP commits need git (git init)")
    return repo


def _changed(repo: Repo, scope: Sequence[str]) -> list[str]:
    found = {path for path, seen in repo.scope(scope).items() if seen.status}
    return sorted(found | repo.staged(scope))


def changed_paths(root: Path, scope: Sequence[str]) -> list[str]:
    """The scope's files that differ from HEAD in the work tree or the index (relative to ``root``; read-only)."""
    return _changed(_open(root), scope)


def _record(record: Path | None) -> Path | None:
    from .wiprecord import where

    return record if record is not None else where()


def save_wip(root: Path, unit: str, scope: Sequence[str], *, moment: str, session: str | None = None,
             keep: int = KEEP, record: Path | None = None) -> Wip | None:
    """Save the scope's uncommitted work as ``refs/agentd/wip/<unit>/<n>`` (module docstring); None when
    nothing differs from HEAD.  Raises :class:`WipError`.  In the daemon the work runs in its git helper
    (:mod:`.gitworker`), given at most a bounded time.  ``record``: where agentd records the commits it made
    (default: :func:`.wiprecord.where`)."""
    from .gitfiles import RepoError
    from .gitworker import run

    _unit_name(unit)
    try:
        return run(_save, root, unit, list(scope), moment, session, keep, _record(record),
                   what=f"the WIP save of {unit}")
    except WipError:
        raise
    except RepoError as exc:
        raise WipError(str(exc)) from None


def scope_tree(repo: Repo, scope: Sequence[str]) -> tuple[str, list[str]]:
    """HEAD's tree with the scope's files as they are on disk now (changed, staged, untracked, deleted; ignored
    ones out), their blobs stored; and the files too large to store (left as HEAD has them).  The one way
    agentd takes a scope's work into git: a WIP commit's tree, a plan task's snapshot.  Writes no index file
    and nothing of the checkout; reads a file only as a regular file or a symlink's text (never a FIFO)."""
    head = repo.head()
    base = head.tree if head is not None else None
    paths = _changed(repo, scope)
    if not paths:
        return (str(base.id) if base is not None else EMPTY_TREE), []
    on_disk, too_large = _changes_on_disk(repo, paths)
    return repo.tree_with(base, on_disk), too_large


def _changes_on_disk(repo: Repo, paths: list[str]) -> tuple[dict[str, tuple[str, int] | None], list[str]]:
    """Each path's blob as on disk (None: gone), relative to the top; and the paths too large to store."""
    from .worktree import TooLarge

    changes: dict[str, tuple[str, int] | None] = {}
    too_large = []
    for path in paths:
        try:
            changes[repo.to_top(path)] = repo.store(path)
        except TooLarge:
            too_large.append(path)  # left as HEAD has it
    return changes, too_large


def _save(root: Path, unit: str, scope: Sequence[str], moment: str, session: str | None, keep: int,
          record: Path | None = None) -> Wip | None:
    from . import wiprecord
    from .gitrepo import GitError

    repo = _open(root)
    try:
        head = repo.head()
        base = head.tree if head is not None else None
        tree, too_large = scope_tree(repo, scope)
        if tree == (str(base.id) if base is not None else EMPTY_TREE):
            return None
        changes, stat_line = _diff(repo, base, tree)
        if not changes:
            return None
        parent = str(head.id) if head is not None else None
        entries = wiprecord.read(record, unit) if record is not None else None
        numbers = _numbers(repo, unit)
        same = _newest_if_same(repo, unit, numbers, tree, parent, entries)
        if same is not None:
            return same  # a crash loop saves the same work once
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        commit = repo.commit(tree, [parent] if parent else [],
                             _message(unit, moment, session, when, changes, stat_line, too_large))
        if entries is None:
            number, numbers = _create_ref(repo, unit, commit, numbers)
            _thin(repo, unit, keep, numbers)
        else:
            taken = sorted({*numbers, *(e.number for e in entries)})
            number, _ = _create_ref(repo, unit, commit, taken)
            entries.append(wiprecord.Entry(number, commit, when))
            wiprecord.add(record, unit, entries[-1])
            _thin_recorded(repo, unit, keep, entries, record)
    except (GitError, OSError) as exc:
        raise WipError(f"git: {exc}") from None
    shown = tuple(changes[:FILES_IN_MESSAGE])
    return Wip(unit, number, commit, parent, when, moment, session, shown, stat_line, len(changes) - len(shown))


#: The id of the empty tree.
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _tree_diff(repo: Repo, base: Any, tree: Any, *, renames: bool) -> Any:
    """libgit2's diff of two trees (``base`` None: the empty tree), renames found when asked (and when the
    attributes they need can be read: libgit2 reads them from the index too, which an agent may have broken)."""
    from .gitrepo import GitError

    new = repo.git[tree] if isinstance(tree, str) else tree
    diff = repo.git.diff(base, new) if base is not None else new.diff_to_tree(swap=True)
    if renames:
        try:
            diff.find_similar()
        except GitError:
            pass
    return diff


_STATUS = {1: "A", 2: "D", 3: "M", 4: "R", 5: "C", 8: "T"}


def _diff(repo: Repo, base: Any, tree: str) -> tuple[list[Change], str]:
    from pygit2.enums import DiffStatsFormat

    from .gitrepo import GitError

    diff = _tree_diff(repo, base, tree, renames=True)
    changes = []
    for delta in diff.deltas:
        letter = _STATUS.get(int(delta.status), "M")
        new = repo.from_top(delta.new_file.path if letter != "D" else delta.old_file.path)
        if new is None:
            continue
        old = repo.from_top(delta.old_file.path) if letter in ("R", "C") else None
        changes.append(Change(letter, new, old))
    if not changes:
        return changes, ""
    try:
        return changes, diff.stats.format(DiffStatsFormat.SHORT, 80).strip()
    except GitError:  # line counts need the attributes, which libgit2 also reads from a (broken) index
        return changes, f"{len(changes)} file{'s' if len(changes) != 1 else ''} changed"


def _newest_if_same(repo: Repo, unit: str, numbers: list[int], tree: str, head: str | None,
                    entries: list[Any] | None = None) -> Wip | None:
    """The unit's newest WIP (the newest recorded one; without a record, the newest of ``numbers``) when it
    already holds exactly ``tree`` on ``head`` (its ref put back if an agent deleted or moved it)."""
    if entries is not None:
        if not entries:
            return None
        number, commit = entries[-1].number, repo.git.get(entries[-1].commit)
    else:
        if not numbers:
            return None
        number = numbers[-1]
        commit = repo.git.get(repo.git.references[f"{REF_ROOT}/{unit}/{number}"].target)
    if commit is None or str(commit.tree_id) != tree or [str(p) for p in commit.parent_ids] != ([head] if head else []):
        return None
    if entries is not None:
        _put_back(repo, unit, number, str(commit.id))
    return _from_commit(unit, number, commit)


def _put_back(repo: Repo, unit: str, number: int, commit: str) -> None:
    """Make the ref of a recorded WIP point at its commit again (an agent may have deleted or moved it)."""
    import pygit2

    ref = repo.git.references.get(f"{REF_ROOT}/{unit}/{number}")
    if ref is None or str(ref.target) != commit:
        repo.git.references.create(f"{REF_ROOT}/{unit}/{number}", pygit2.Oid(hex=commit), force=True)


def _message(unit: str, moment: str, session: str | None, when: str, changes: list[Change], stat: str,
             too_large: Sequence[str] = ()) -> str:
    from .worktree import MAX_BLOB

    lines = [f"agentd wip: {unit} before {moment or 'save'}", "",
             f"The uncommitted work of unit {unit} in its scope, saved by agentd at {when}.",
             f"{stat}" if stat else "", "", *[f"  {redact_text(c.describe())}" for c in changes[:FILES_IN_MESSAGE]]]
    if len(changes) > FILES_IN_MESSAGE:
        lines.append(f"  ... {len(changes) - FILES_IN_MESSAGE} more")
    if too_large:
        lines += ["", f"Not saved (over {MAX_BLOB // 2**20} MiB, as HEAD has them here):",
                  *[f"    {redact_text(p)}" for p in too_large[:FILES_IN_MESSAGE]]]
    lines += ["", f"Agentd-Unit: {unit}", f"Agentd-Moment: {moment}", f"Agentd-Session: {session or '-'}",
              f"Agentd-Time: {when}", f"Agentd-Files: {len(changes)}"]
    return "\n".join(lines) + "\n"


def _numbers(repo: Repo, unit: str) -> list[int]:
    prefix = f"{REF_ROOT}/{unit}/"
    return sorted(int(r[len(prefix):]) for r in repo.git.listall_references()
                  if r.startswith(prefix) and r[len(prefix):].isdigit())


def _create_ref(repo: Repo, unit: str, commit: str, numbers: list[int]) -> tuple[int, list[int]]:
    """Create the next ref (create-only, so two savers never overwrite each other: the loser takes the next);
    its number, and the unit's numbers with it."""
    import pygit2

    for _ in range(10):
        number = (numbers[-1] if numbers else 0) + 1
        try:
            repo.git.references.create(f"{REF_ROOT}/{unit}/{number}", pygit2.Oid(hex=commit), force=False)
            return number, [*numbers, number]
        except (pygit2.AlreadyExistsError, pygit2.GitError):
            numbers = _numbers(repo, unit)
    raise WipError(f"could not create a WIP ref for {unit}: another process keeps taking the next number")


def _thin(repo: Repo, unit: str, keep: int, numbers: list[int]) -> list[int]:
    gone = numbers[:-keep] if keep > 0 else numbers
    for number in gone:
        try:
            repo.git.references.delete(f"{REF_ROOT}/{unit}/{number}")
        except KeyError:
            pass  # another thinner was first
    return gone


def _thin_recorded(repo: Repo, unit: str, keep: int, entries: list[Any], record: Path) -> list[int]:
    """Keep the newest ``keep`` recorded WIPs: the older ones leave the record, and their refs go where they
    still point at the recorded commit (a ref an agent moved is not agentd's to delete)."""
    from . import wiprecord

    gone = entries[:-keep] if keep > 0 else list(entries)
    if not gone:
        return []
    for entry in gone:
        ref = repo.git.references.get(f"{REF_ROOT}/{unit}/{entry.number}")
        if ref is not None and str(ref.target) == entry.commit:
            try:
                ref.delete()
            except (KeyError, Exception):  # noqa: BLE001 - gone meanwhile
                pass
    wiprecord.keep(record, unit, entries[len(gone):])
    return [e.number for e in gone]


def thin(root: Path, unit: str, keep: int = KEEP, record: Path | None = None) -> list[int]:
    """Delete all but the newest ``keep`` WIPs of ``unit`` (the recorded ones, when there is a record); the
    numbers deleted."""
    from . import wiprecord

    repo = _open(root)
    _unit_name(unit)
    record = _record(record)
    if record is None:
        return _thin(repo, unit, keep, _numbers(repo, unit))
    return _thin_recorded(repo, unit, keep, wiprecord.read(record, unit), record)


_TRAILER = re.compile(r"^Agentd-(Unit|Moment|Session|Time|Files): *(.*)$", re.M)
_CHANGE = re.compile(r"^  ([AMDTRCUX]) (?:(.+?) -> )?(.+)$", re.M)


def _from_commit(unit: str, number: int, commit: Any, *, foreign: bool = False, note: str = "") -> Wip:
    """The Wip a commit describes (its message's trailers and file lines)."""
    body = commit.raw_message.decode("utf-8", "surrogateescape")
    meta = dict(_TRAILER.findall(body))
    changes = tuple(Change(s, p, o or None) for s, o, p in _CHANGE.findall(body))
    total = int(meta["Files"]) if meta.get("Files", "").isdigit() else len(changes)
    stat_line = next((ln.strip() for ln in body.splitlines() if " changed" in ln and ln[:1].isdigit()), "")
    parents = commit.parent_ids
    return Wip(unit, number, str(commit.id), str(parents[0]) if parents else None, meta.get("Time", ""),
               meta.get("Moment", ""), None if meta.get("Session") in (None, "-") else meta["Session"],
               changes, stat_line, max(0, total - len(changes)), foreign, note)


def _refs(repo: Repo, unit: str | None) -> dict[tuple[str, int], str]:
    """(unit, number) -> the commit each ``refs/agentd/wip/`` ref names now."""
    prefix = f"{REF_ROOT}/{unit}/" if unit else f"{REF_ROOT}/"
    out = {}
    for name in repo.git.listall_references():
        if not name.startswith(prefix):
            continue
        owner, _, number = name[len(REF_ROOT) + 1:].rpartition("/")
        if number.isdigit() and owner:
            out[(owner, int(number))] = str(repo.git.references[name].target)
    return out


def clean_leftovers(root: Path) -> list[Path]:
    """Remove the temporary index files (:data:`LEFTOVER_GLOB`) that WIP saves of older versions left in the
    git directory when killed mid-save; the files removed (none outside git)."""
    from .gitfiles import RepoError
    from .gitworker import run

    try:
        return run(_clean_leftovers, root, what="removing what killed WIP saves left")
    except RepoError:
        return []


def _clean_leftovers(root: Path) -> list[Path]:
    from .gitrepo import RepoError, open_repo

    try:
        repo = open_repo(root)
    except RepoError:
        return []
    if repo is None:
        return []
    gone = []
    for where in dict.fromkeys((Path(repo.git.path), repo.common_dir)):
        try:
            found = list(where.glob(LEFTOVER_GLOB))
        except OSError:
            continue
        for path in found:
            try:
                path.unlink()
            except OSError:
                continue
            gone.append(path)
    return gone
