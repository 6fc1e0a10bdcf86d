"""Undoing a change: put a file back to ``HEAD`` or a snapshot's blob, or move a new file to quarantine.

Nothing is ever deleted: the content being replaced is copied into the
quarantine directory first.  Writes go through :func:`supervisor.durable.atomic_write`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from ..durable import atomic_write, fsync_dir

#: Prefix of the temporary files :func:`revert` writes; the watcher never reports them.
TEMP_PREFIX = ".agentd-revert-"
GIT_TIMEOUT = 60.0


def _git(root: Path, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=GIT_TIMEOUT, check=False)


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


def _head_entry(root: Path, rel: str) -> tuple[str, str, str] | None:
    """(mode, type, hash) of ``rel`` in HEAD, or None (untracked, no HEAD, or not a repository)."""
    out = _git(root, ["ls-tree", "-z", "--full-tree", "HEAD", "--", rel])
    if out.returncode != 0 or not out.stdout:
        return None
    meta, _, name = out.stdout.split(b"\0")[0].decode("utf-8", "surrogateescape").partition("\t")
    if name != rel:
        return None
    mode, kind, obj = meta.split(" ")
    return mode, kind, obj


def _blob_bytes(root: Path, rel: str, blob: str) -> bytes | None:
    """Work-tree bytes of ``blob`` as checkout would write them for ``rel`` (smudge/eol filters applied)."""
    if not re.fullmatch(r"[0-9a-f]{7,64}", blob):
        return None
    out = _git(root, ["cat-file", f"--path={rel}", "--filters", blob])
    if out.returncode != 0:
        out = _git(root, ["cat-file", "blob", blob])  # e.g. a smudge filter that is not installed
    return out.stdout if out.returncode == 0 else None


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

    1. ``HEAD``, when the file is tracked there (``git cat-file --filters``:
       the bytes ``git checkout`` would write, which are the blob's bytes
       unless the repository sets smudge or end-of-line filters);
    2. else the blob ``snapshot["files"][path]`` (a snapshot's hashes were
       stored with ``hash-object -w``);
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

    data: bytes | None = None
    source = ""
    git_mode = "100644"
    entry = _head_entry(root, rel)
    if entry is not None:
        git_mode, kind, obj = entry
        if kind != "blob":
            return f"{rel} is a {'submodule' if kind == 'commit' else kind} in HEAD; not reverted"
        data = _blob_bytes(root, rel, obj)
        source = "HEAD"
    if data is None and snapshot:
        blob = (snapshot.get("files") or {}).get(rel)
        if blob:
            data = _blob_bytes(root, rel, blob)
            source = f"{snapshot.get('id', 'snapshot')} (blob {blob[:12]})"
    symlink = git_mode == "120000"

    if data is None:
        if not exists:
            return f"{rel}: nothing to revert (absent, and neither HEAD nor the snapshot has it)"
        dest = _quarantine(target, rel, quarantine_dir, stamp)
        return f"{rel}: new file (not in HEAD nor in the snapshot), moved to {dest}"

    if exists:
        if symlink and target.is_symlink() and os.fsencode(os.readlink(target)) == data:
            return f"{rel}: already as in {source}; nothing to do"
        if not symlink and not target.is_symlink() and target.read_bytes() == data:
            return f"{rel}: already as in {source}; nothing to do"
        mode = None if target.is_symlink() else stat.S_IMODE(os.lstat(target).st_mode)
        kept = _quarantine(target, rel, quarantine_dir, stamp, copy=True)
        _write_atomic(target, data, mode, symlink, executable=git_mode == "100755")
        return f"{rel}: restored from {source}; the changed content was copied to {kept}"
    _write_atomic(target, data, None, symlink, executable=git_mode == "100755")
    return f"{rel}: deleted file restored from {source}"
