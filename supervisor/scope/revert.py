"""Undoing a change: put a file back to ``HEAD`` or a snapshot's blob, or move a new file to quarantine.

Nothing is ever deleted: the content being replaced is copied into the
quarantine directory first.  Writes go through :func:`supervisor.durable.atomic_write`.
The repository is read through libgit2 (:mod:`supervisor.memory.gitrepo`):
the daemon reverts while the agent runs, and the agent can write ``.git/``,
so no git process (and no smudge filter, hook or fsmonitor it configured) runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import re
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from ..durable import atomic_write, fsync_dir

#: Prefix of the temporary files :func:`revert` writes; the watcher never reports them.
TEMP_PREFIX = ".agentd-revert-"


def _repo(root: Path) -> Any:  # a memory.gitrepo.Repo, or None outside git (or in a repository agentd refuses)
    from ..memory.gitfiles import RepoError
    from ..memory.gitrepo import open_repo

    try:
        return open_repo(root)
    except RepoError:
        return None


def content_digest(path: Path) -> str:
    """A digest of what is at ``path`` now: ``sha256:...`` of a file, ``symlink:TARGET``, or ``absent``.

    The daemon records it after :func:`revert`, and ignores a change event
    whose path still has that digest (the event its own revert caused).
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return f"other:{stat.S_IFMT(st.st_mode):o}"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _safe_target(root: Path, path: str) -> Path:
    rel = path[2:] if path.startswith("./") else path
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"{path!r} is not a path inside the project")
    target = root / rel
    real_root = root.resolve()
    parent = target.parent
    # the nearest existing ancestor must be inside the project (no escape through a symlinked dir)
    while not parent.exists() and parent != root:
        parent = parent.parent
    if not parent.resolve().is_relative_to(real_root):
        raise ValueError(f"{path!r} leads outside the project (through a symlink)")
    return target


def _head_entry(repo: Any, rel: str) -> tuple[str, str, str] | None:
    """(mode, type, hash) of ``rel`` in HEAD, or None (untracked, no HEAD, or not a repository)."""
    tree = repo.head_tree() if repo is not None else None
    if tree is None:
        return None
    try:
        entry = tree[repo.to_top(rel)]
    except (KeyError, ValueError):
        return None
    return f"{entry.filemode:06o}", entry.type_str, str(entry.id)


def _blob_bytes(repo: Any, blob: str) -> bytes | None:
    """The bytes of ``blob`` as stored: no smudge or end-of-line filter runs (they are commands, or settings,
    an agent can write into .git/)."""
    if repo is None or not re.fullmatch(r"[0-9a-f]{7,64}", blob):
        return None
    try:
        return repo.blob_data(blob)
    except Exception:  # noqa: BLE001 - a missing or ambiguous blob: nothing to restore from
        return None


def _source(root: Path, rel: str, snapshot: dict[str, Any] | None) -> tuple[bytes | None, str, str] | str:
    """(the bytes to put back or None, where they come from, their git mode); or why not to revert."""
    repo = _repo(root)
    data: bytes | None = None
    source, git_mode = "", "100644"
    entry = _head_entry(repo, rel)
    if entry is not None:
        git_mode, kind, obj = entry
        if kind != "blob":
            return f"{rel} is a {'submodule' if kind == 'commit' else kind} in HEAD; not reverted"
        data = _blob_bytes(repo, obj)
        source = "HEAD"
    if data is None and snapshot:
        blob = (snapshot.get("files") or {}).get(rel)
        if blob:
            data = _blob_bytes(repo, blob)
            source = f"{snapshot.get('id', 'snapshot')} (blob {blob[:12]})"
    return data, source, git_mode


def _current(target: Path) -> bytes | None:
    """What a regular file holds now (None for anything else: a FIFO is never opened to wait on a writer)."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) else None


def _quarantine_path(rel: str, quarantine_dir: Path, stamp: str) -> Path:
    dest = Path(quarantine_dir) / stamp / rel
    n = 1
    while dest.exists() or dest.is_symlink():
        dest = Path(quarantine_dir) / f"{stamp}.{n}" / rel
        n += 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest


def _quarantine(target: Path, rel: str, quarantine_dir: Path, stamp: str, *, copy: bool = False) -> Path:
    """Move (or copy) ``target`` to ``quarantine_dir/<stamp>/<rel>`` (a fresh directory if taken)."""
    dest = _quarantine_path(rel, quarantine_dir, stamp)
    if copy:
        shutil.copy2(target, dest, follow_symlinks=False)
        return dest
    try:
        os.replace(target, dest)
    except OSError:  # another file system
        shutil.move(os.fspath(target), os.fspath(dest))
    return dest


def _write_atomic(target: Path, data: bytes, mode: int | None, symlink: bool, *, executable: bool = False) -> None:
    """Replace ``target`` by ``data`` (a file, or a symlink's target) atomically.

    ``mode`` None: a new file's usual mode (0644, or 0755 when ``executable``).
    """
    if not symlink:
        atomic_write(target, data, mode=mode if mode is not None else (0o755 if executable else 0o644), tmp_prefix=TEMP_PREFIX)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{TEMP_PREFIX}{secrets.token_hex(6)}.tmp"
    os.symlink(os.fsdecode(data), tmp)
    try:
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def revert(root: Path, path: str, snapshot: dict[str, Any] | None, quarantine_dir: Path) -> str:
    """Put ``path`` back as it was; a one-line account of what was done.

    Where the content comes from, in order:

    1. ``HEAD``, when the file is tracked there: the blob's bytes as stored
       (no smudge or end-of-line filter runs: in a repository that sets one,
       the file comes back as git stores it, not as ``git checkout`` writes it);
    2. else the blob ``snapshot["files"][path]`` (a snapshot stores the bytes
       of a changed file as they were on disk);
    3. else (the file is new) it is moved into ``quarantine_dir``.

    Whatever is replaced is first copied into ``quarantine_dir/<time>/<path>``,
    so nothing the agent wrote is lost.  Writes are atomic (a temporary file
    in the same directory, fsync, rename); the file keeps its current mode
    (or HEAD's executable bit when it had been deleted).  No shell is used.
    The content from git is the committed one: edits to that file left
    uncommitted before the unit started are not what comes back (they are in
    the snapshot, if one was taken since).
    """
    root = Path(root)
    target = _safe_target(root, path)
    rel = target.relative_to(root).as_posix()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    exists = target.is_symlink() or target.exists()
    if exists and target.is_dir() and not target.is_symlink():
        return f"{rel} is a directory; not reverted"

    from ..memory.gitworker import run

    found = run(_source, root, rel, snapshot, what=f"reading {rel} from git")
    if isinstance(found, str):
        return found
    data, source, git_mode = found
    symlink = git_mode == "120000"

    if data is None:
        if not exists:
            return f"{rel}: nothing to revert (absent, and neither HEAD nor the snapshot has it)"
        dest = _quarantine(target, rel, quarantine_dir, stamp)
        return f"{rel}: new file (not in HEAD nor in the snapshot), moved to {dest}"

    if exists:
        if symlink and target.is_symlink() and os.fsencode(os.readlink(target)) == data:
            return f"{rel}: already as in {source}; nothing to do"
        if not symlink and not target.is_symlink() and _current(target) == data:
            return f"{rel}: already as in {source}; nothing to do"
        mode = None if target.is_symlink() else stat.S_IMODE(os.lstat(target).st_mode)
        kept = _quarantine(target, rel, quarantine_dir, stamp, copy=True)
        _write_atomic(target, data, mode, symlink, executable=git_mode == "100755")
        return f"{rel}: restored from {source}; the changed content was copied to {kept}"
    _write_atomic(target, data, None, symlink, executable=git_mode == "100755")
    return f"{rel}: deleted file restored from {source}"
