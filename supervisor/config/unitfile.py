"""Reading a unit file without ever blocking or swallowing memory (issue 13, item 2).

``units/`` is a directory anyone with write access can put anything into: a
FIFO (``open()`` would wait for a writer forever, and with it the daemon's
reload or ``agentd check``), a symlink to ``/dev/zero`` (a read that never
ends), a multi-gigabyte file.  :func:`read_unit_text` reads only a regular
file, opened non-blocking, at most :data:`MAX_UNIT_BYTES`:

1. ``stat`` (following symlinks) must say *regular file*: a FIFO, a device, a
   socket or a directory is refused without being opened;
2. the resolved path is opened ``O_RDONLY | O_NONBLOCK | O_NOFOLLOW``, so
   nothing can block in ``open`` even if the file is swapped for a FIFO after
   step 1, and a final component swapped for a symlink fails;
3. ``fstat`` of what was opened must be the same regular file, at most the cap;
4. at most cap + 1 bytes are read (a file that grows past the cap meanwhile is
   refused too).

A symlink to a regular file (inside the project or not) is followed.  Errors
are :class:`UnitFileError` with a message for the user (the caller names the
file).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

#: The largest unit file read (a unit file is a few hundred bytes).
MAX_UNIT_BYTES = 1 << 20

__all__ = ["MAX_UNIT_BYTES", "UnitFileError", "read_unit_text"]


class UnitFileError(Exception):
    """A unit file that cannot be read as one (the message is for the user, without the path)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(mode: int, path: Path, real: Path) -> UnitFileError:
    via = f" (a symlink to {real})" if real != path else ""
    return UnitFileError(f"{_kind(mode)}{via}, not a regular file: remove it, or replace it by a regular file")


def read_unit_text(path: Path, limit: int = MAX_UNIT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``; raises :class:`UnitFileError`, UnicodeDecodeError."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            raise UnitFileError(f"a broken symlink (to {os.readlink(path)})") from None
        raise UnitFileError(f"cannot read: {exc.strerror}") from None
    real = Path(os.path.realpath(path))
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(st.st_mode, Path(path), real)
    if st.st_size > limit:
        raise UnitFileError(f"{st.st_size} bytes, more than the {limit} byte limit of a unit file")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UnitFileError(f"cannot read: {exc.strerror}") from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):
            raise _refuse(now.st_mode, Path(path), real)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise UnitFileError("replaced while being read: run the command again")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UnitFileError(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise UnitFileError(f"more than the {limit} byte limit of a unit file")
    return b"".join(chunks).decode("utf-8")


#: Unit files that are examples: listed, never loaded.
EXAMPLE_SUFFIX = ".example.toml"


def unit_files(units_dir: Path) -> list[Path]:
    """The files :func:`load_units` reads: every ``*.toml`` in ``units_dir`` but examples, sorted."""
    if not units_dir.is_dir():
        return []
    return [p for p in sorted(units_dir.glob("*.toml")) if not p.name.endswith(EXAMPLE_SUFFIX)]


#: What a unit may be called (its file is ``NAME.toml``).
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def valid_name(name: str) -> bool:
    return NAME_RE.fullmatch(name) is not None


def unit_path(units_dir: Path, name: str) -> Path:
    """The file of unit ``name``; the name is validated so it cannot escape the directory."""
    if not valid_name(name):
        raise ValueError(f"unit name {name!r} is not valid: it must match {NAME_RE.pattern}")
    return units_dir / f"{name}.toml"
