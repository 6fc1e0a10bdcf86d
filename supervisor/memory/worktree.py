"""A file of the work tree as it is on disk: its bytes, never read through a symlink, never a FIFO waited on.

What agentd stores of an agent's work (a WIP commit, a snapshot, sync's
memory files) is read here:

* the bytes **as they are**: no clean filter, no end-of-line conversion (a
  CRLF file is stored with its CRLFs), a symlink as its target's text;
* never through a symlink: each directory on the way is opened with
  ``O_NOFOLLOW`` from the work tree's top, so an agent that swaps a directory
  for a symlink mid-save makes agentd read nothing outside the work tree;
* only a regular file is read (opened with ``O_NONBLOCK`` and checked again
  once open): a FIFO or a device is never waited on;
* nothing over :data:`MAX_BLOB` is stored: an agent's 50 GB sparse file must
  not cost the daemon minutes of compression and the disk its size.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from .gitpaths import RepoError, blob_hash

#: Files larger than this are streamed into the object database instead of read whole.
STREAM_OVER = 8 * 1024 * 1024
#: Files larger than this are never stored (a WIP commit or a snapshot names them instead).
MAX_BLOB = 100 * 1024 * 1024
#: git's modes.
REGULAR, EXECUTABLE, LINK = 0o100644, 0o100755, 0o120000


class TooLarge(RepoError):
    """A file over :data:`MAX_BLOB`: not stored."""


@contextmanager
def _worktree_file(top: Path, path: str) -> Iterator[tuple[int, bytes | BinaryIO] | None]:
    """(git mode, a symlink's target text or an open regular file) of ``path`` below ``top``, reached without
    following any symlink; None for anything else (missing, a directory, a FIFO, a symlink on the way)."""
    parts = path.split("/")
    link: bytes | None = None
    fd = -1
    if not any(p in ("", ".", "..") for p in parts):
        try:
            dirfd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            dirfd = -1
        try:
            for part in parts[:-1] if dirfd >= 0 else ():
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
                os.close(dirfd)
                dirfd = nxt
            if dirfd >= 0:
                st = os.stat(parts[-1], dir_fd=dirfd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    link = os.fsencode(os.readlink(parts[-1], dir_fd=dirfd))
                elif stat.S_ISREG(st.st_mode):
                    fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
        except OSError:
            pass  # gone, or a directory on the way is a symlink or a file now
        finally:
            if dirfd >= 0:
                os.close(dirfd)
    if link is not None:
        yield LINK, link
        return
    if fd < 0:
        yield None
        return
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        yield ((EXECUTABLE if st.st_mode & 0o100 else REGULAR), fh) if stat.S_ISREG(st.st_mode) else None


def read_worktree(top: Path, path: str) -> tuple[bytes, int] | None:
    """(bytes, git mode) of ``path`` (relative to ``top``) as on disk: a symlink's target text (mode 120000), a
    regular file's content; None for anything else, or when a directory on the way is a symlink."""
    with _worktree_file(top, path) as found:
        if found is None:
            return None
        mode, src = found
        return (src if isinstance(src, bytes) else src.read()), mode


def store_worktree(repo: Any, top: Path, path: str) -> tuple[str, int] | None:
    """Store ``path`` as it is on disk in ``repo`` (a pygit2 repository; see :func:`read_worktree`); (blob,
    mode).  Large files are streamed; one over :data:`MAX_BLOB` raises :class:`TooLarge`."""
    with _worktree_file(top, path) as found:
        if found is None:
            return None
        mode, src = found
        if isinstance(src, bytes):
            return str(repo.create_blob(src)), mode
        size = os.fstat(src.fileno()).st_size
        if size > MAX_BLOB:
            raise TooLarge(f"{path} is {size:,} bytes, over the {MAX_BLOB // 2**20} MiB agentd stores")
        if size > STREAM_OVER:
            return str(repo.create_blob_fromiobase(src)), mode
        return str(repo.create_blob(src.read())), mode


def hash_worktree(top: Path, path: str) -> str | None:
    """The blob id ``path`` has on disk (see :func:`read_worktree`), computed without storing anything; None
    for a file over :data:`MAX_BLOB` too."""
    with _worktree_file(top, path) as found:
        if found is None:
            return None
        src = found[1]
        if isinstance(src, bytes):
            return blob_hash(src)
        if os.fstat(src.fileno()).st_size > MAX_BLOB:
            return None
        return blob_hash(src.read())
