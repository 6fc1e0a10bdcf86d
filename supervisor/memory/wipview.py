"""WIP commits read back: listed (agentd's own by its record, the rest as foreign), shown as ``git show``
would, their files restored into the work tree (libgit2).

:func:`list_wips` and :func:`find_wip` go by agentd's record of the commits
it made (:mod:`.wiprecord`): a ref under ``refs/agentd/wip/`` the record does
not hold is *foreign* (an agent can write ``.git/``).  :func:`restore_wip`
writes a saved commit's files back into the work tree (and nothing else),
refusing a foreign WIP, and a file that changed since unless ``force``.  It
writes the stored bytes (no smudge filter runs) and refuses a path that goes
through a symlinked directory, through ``..`` or into ``.git``: ``agentd wip
restore`` runs as the person.  :func:`show_wip`'s text is the agent's bytes
(its message, its diff): whoever prints it makes its escapes visible first.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..durable import atomic_write
from .wip import _STATUS, Change, Wip, WipError, _from_commit, _open, _record, _refs, _tree_diff, _unit_name

if TYPE_CHECKING:
    from .gitrepo import Repo

__all__ = ["find_wip", "list_wips", "restore_wip", "show_wip"]


def _list(repo: Repo, unit: str | None, record: Path | None = None) -> list[Wip]:
    from . import wiprecord

    refs = _refs(repo, unit)
    found = []
    recorded: set[tuple[str, int, str]] = set()
    if record is not None:
        for owner in ([unit] if unit else wiprecord.units(record)):
            for entry in wiprecord.read(record, owner):
                recorded.add((owner, entry.number, entry.commit))
                commit = repo.git.get(entry.commit)
                now = refs.get((owner, entry.number))
                if commit is None or commit.type_str != "commit":
                    found.append(Wip(owner, entry.number, entry.commit, None, entry.time, note="its commit is gone "
                                     "from the repository (removed from .git/objects)"))
                    continue
                note = "" if now == entry.commit else (
                    "its ref was deleted (agentd makes it again at the next save)" if now is None else
                    f"its ref was moved to {now[:12]} (agentd puts it back at the next save)")
                found.append(_from_commit(owner, entry.number, commit, note=note))
    for (owner, number), target in refs.items():
        if record is not None and (owner, number, target) in recorded:
            continue
        commit = repo.git.get(target)
        if commit is None or commit.type_str != "commit":
            continue
        found.append(_from_commit(owner, number, commit, foreign=record is not None,
                                  note="not made by agentd (not in its record): whoever can write .git made or moved "
                                       "this ref" if record is not None else ""))
    return sorted(found, key=lambda w: (w.unit, w.foreign, w.number))


def _bounded(fn: Any, *args: Any, what: str) -> Any:
    """``fn(*args)`` in this process's git helper when it has one (the daemon; the CLI's ``agentd wip``):
    libgit2 would block for ever on a FIFO an agent put in ``.git/``; a helper is killed after a while."""
    from .gitfiles import RepoError
    from .gitworker import run

    try:
        return run(fn, *args, what=what)
    except RepoError as exc:
        raise WipError(str(exc)) from None


def list_wips(root: Path, unit: str | None = None, record: Path | None = None) -> list[Wip]:
    """The saved WIP commits (of ``unit``, or of every unit), oldest first per unit; with a record
    (:mod:`.wiprecord`), agentd's own first, then the foreign refs."""
    return _bounded(_list_wips, root, _unit_name(unit) if unit else None, _record(record), what="listing WIP commits")


def _list_wips(root: Path, unit: str | None, record: Path | None) -> list[Wip]:
    return _list(_open(root), unit, record)


def find_wip(root: Path, unit: str, number: int | None = None, record: Path | None = None) -> Wip:
    """``unit``'s WIP number ``number`` (None: the newest of agentd's own); WipError naming what exists when
    absent.  A foreign one is found only by its number."""
    wips = list_wips(root, unit, record)
    own = [w for w in wips if not w.foreign]
    if number is None:
        if not own:
            raise WipError(f"unit {unit} has no WIP commits (agentd saves one before each respawn, restart and stop)"
                           + (f"; {len(wips)} foreign ref(s) are not agentd's" if wips else ""))
        return own[-1]
    for wip in own + [w for w in wips if w.foreign]:
        if wip.number == number:
            return wip
    raise WipError(f"unit {unit} has no WIP {number}; it has {', '.join(str(w.number) for w in wips) or 'none'}")



def _when(sig: Any) -> str:
    offset = sig.offset
    t = time.gmtime(sig.time + offset * 60)
    stamp = f"{time.strftime('%a %b', t)} {t.tm_mday} {time.strftime('%H:%M:%S %Y', t)}"
    return f"{stamp} {'+' if offset >= 0 else '-'}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def show_wip(root: Path, wip: Wip, *, patch: bool = True) -> str:
    """What ``git show --stat --patch --format=fuller`` shows of the commit, made by libgit2 (no pager, no
    external diff or textconv runs)."""
    return _bounded(_show_wip, root, wip, patch, what=f"showing {wip.ref}")


def _show_wip(root: Path, wip: Wip, patch: bool) -> str:
    from pygit2.enums import DiffStatsFormat

    from .gitrepo import GitError

    repo = _open(root)
    commit = repo.git[wip.commit]
    base = repo.git[wip.base].tree if wip.base else None
    diff = _tree_diff(repo, base, commit.tree, renames=True)
    a, c = commit.author, commit.committer
    lines = [f"commit {commit.id}", f"Author:     {a.name} <{a.email}>", f"AuthorDate: {_when(a)}",
             f"Commit:     {c.name} <{c.email}>", f"CommitDate: {_when(c)}", ""]
    lines += [f"    {ln}" if ln else "" for ln in commit.raw_message.decode("utf-8", "replace").rstrip("\n").split("\n")]
    try:
        lines += ["", diff.stats.format(DiffStatsFormat.FULL, 80).rstrip("\n")]
        if patch:
            lines += ["", (diff.patch or "").rstrip("\n")]
    except GitError as exc:  # the attributes a diff needs are read from the index too: an unreadable one stops it
        lines += ["", f"(no diff: {exc}; the files are listed above)"]
    if wip.foreign or wip.note:
        lines[:0] = [f"# {wip.note or 'foreign'}", ""]
    return "\n".join(lines)


def _safe_target(root: Path, rel: str) -> Path:
    """``root/rel``, refusing a path that leaves the work tree, enters ``.git`` or goes through a symlink."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise WipError(f"the WIP names {rel!r}, which is not a path agentd writes (.., .git or empty parts)")
    here = Path(root)
    for part in parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            break
        if not stat.S_ISDIR(mode):
            raise WipError(f"cannot restore {rel}: {here} is a symlink or a file, not a directory")
    return Path(root) / rel


def restore_wip(root: Path, wip: Wip, *, force: bool = False) -> list[Change]:
    """Write ``wip``'s files into the work tree (HEAD and the index untouched); the changes applied.

    A file whose content now is neither what the WIP was made on nor what it
    saved is a local change: the restore refuses (naming the files) unless
    ``force``.  A foreign WIP (not in agentd's record) is refused.
    """
    return _bounded(_restore_wip, root, wip, force, what=f"restoring {wip.ref}")


def _restore_wip(root: Path, wip: Wip, force: bool) -> list[Change]:
    from .worktree import hash_worktree

    if wip.foreign:
        raise WipError(f"{wip.ref} ({wip.commit[:12]}) is not a WIP agentd made (not in its record): whoever can "
                       "write .git (an agent) made or moved it; agentd does not restore it (`agentd wip show` shows "
                       "what it holds)")
    repo = _open(root)
    if repo.git.get(wip.commit) is None:
        raise WipError(f"{wip.ref}: its commit {wip.commit[:12]} is gone from the repository")
    commit = repo.git[wip.commit]
    base = repo.git[wip.base].tree if wip.base else None
    entries = []  # (new mode, old blob, new blob, status, path)
    for delta in _tree_diff(repo, base, commit.tree, renames=False).deltas:
        letter = _STATUS.get(int(delta.status), "M")
        rel = repo.from_top(delta.old_file.path if letter == "D" else delta.new_file.path)
        if rel is not None:
            entries.append((int(delta.new_file.mode), str(delta.old_file.id), str(delta.new_file.id), letter, rel))
    zero = "0" * 40
    for entry in entries:
        _safe_target(root, entry[4])  # refuse a crafted commit before writing anything
    conflicts = [path for _m, old_blob, new_blob, _s, path in entries
                 if (hash_worktree(repo.top, repo.to_top(path)) or zero) not in {old_blob, new_blob}]
    if conflicts and not force:
        shown = ", ".join(conflicts[:10]) + (f" (+{len(conflicts) - 10} more)" if len(conflicts) > 10 else "")
        raise WipError(f"local changes would be overwritten: {shown}; commit or stash them, or restore with --force")
    applied = []
    for new_mode, _old_blob, new_blob, status, path in entries:
        target = _safe_target(root, path)  # again: an entry written before may have made a symlink on the way
        if status == "D":
            if target.is_symlink() or target.exists():
                target.unlink()
        else:
            data = repo.blob_data(new_blob)
            if target.is_symlink() or (target.exists() and new_mode == 0o120000):
                target.unlink()
            if new_mode == 0o120000:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.fsdecode(data), target)
            else:
                atomic_write(target, data, mode=0o755 if new_mode == 0o100755 else 0o644)
        applied.append(Change(status, path))
    return applied
