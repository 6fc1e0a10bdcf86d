"""A WIP commit read back: shown as ``git show`` would, its files restored into the work tree (libgit2).

:func:`restore_wip` writes a saved commit's files back into the work tree (and
nothing else), refusing to overwrite a file that changed since unless
``force``.  It writes the stored bytes (no smudge filter runs) and refuses a
path that goes through a symlinked directory, through ``..`` or into ``.git``:
the WIP refs live in ``.git/``, which an agent can write, and ``agentd wip
restore`` runs as the person.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

from ..durable import atomic_write
from .wip import _STATUS, Change, Wip, WipError, _open, _tree_diff

__all__ = ["restore_wip", "show_wip"]


def _when(sig: Any) -> str:
    offset = sig.offset
    t = time.gmtime(sig.time + offset * 60)
    stamp = f"{time.strftime('%a %b', t)} {t.tm_mday} {time.strftime('%H:%M:%S %Y', t)}"
    return f"{stamp} {'+' if offset >= 0 else '-'}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def show_wip(root: Path, wip: Wip, *, patch: bool = True) -> str:
    """What ``git show --stat --patch --format=fuller`` shows of the commit, made by libgit2 (no pager, no
    external diff or textconv runs)."""
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
    saved is a local change: the restore refuses (naming the files) unless ``force``.
    """
    from .worktree import hash_worktree

    repo = _open(root)
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
