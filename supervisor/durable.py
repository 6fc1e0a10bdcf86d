"""Durable files: the one atomic write, the one whole-line append, the one JSON-lines reader.

Every file agentd writes for keeps is written one of two ways:

* :func:`atomic_write` — a temporary file in the same directory, ``fsync``,
  ``rename`` over the target, ``fsync`` of the directory.  Readers see the old
  or the new file, never a mix, and a crash leaves one of the two.
* :func:`append_line` — one whole line appended with a single ``write`` on an
  ``O_APPEND`` descriptor, then ``fsync``; under an exclusive ``flock`` on the
  file unless the caller already holds a lock of its own.  A torn last line
  (a crash mid-write) is never glued to: the new line starts on a fresh line.

Readers: :func:`read_jsonl` reads a whole JSON-lines file and skips torn or
malformed lines; :class:`JsonlTail` reads only what was appended since its
last call (whole lines; a line still being written waits for its newline).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | str, *, mode: int = 0o644, tmp_prefix: str = ".") -> None:
    """Replace ``path`` by ``data`` atomically (temp + fsync + rename + directory fsync).

    ``mode`` is the new file's permission bits (applied exactly, not through
    the umask); ``tmp_prefix`` names the temporary file (``<prefix><name>.<random>.tmp``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.parent / f"{tmp_prefix}{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            os.fchmod(fd, mode)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def write_json(path: Path, data: Any, *, mode: int = 0o644, indent: int | None = 2) -> None:
    """Atomically write ``data`` as JSON (sorted keys, so the same data gives the same bytes)."""
    text = json.dumps(data, indent=indent, sort_keys=True, ensure_ascii=False, default=str)
    atomic_write(path, text + "\n", mode=mode)


def append_line(path: Path, line: str | bytes, *, lock: bool = True, mode: int = 0o644) -> int:
    """Append one whole line; return the byte offset it starts at.

    ``lock``: take an exclusive ``flock`` on the file for the write (False when
    the caller holds a lock that covers it).  A newline inside ``line`` is a
    bug in the caller: lines are the unit of every log.
    """
    data = line.encode("utf-8") if isinstance(line, str) else bytes(line)
    if b"\n" in data or b"\r" in data:
        raise ValueError("a line must not contain a newline")
    data += b"\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        if lock:
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a torn last line stays a separate, malformed line
            size += 1
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)  # closing drops the flock
    return size


def append_jsonl(path: Path, record: dict[str, Any], *, mode: int = 0o600) -> None:
    """Append ``record`` as one whole JSON line under an exclusive lock, fsynced."""
    append_line(path, json.dumps(record, separators=(",", ":"), default=str), mode=mode)


def parse_jsonl(data: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``data``'s lines; torn or malformed lines are skipped."""
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            yield item


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON object of a JSON-lines file, oldest first (none when the file is missing)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return
    yield from parse_jsonl(data)


class JsonlTail:
    """Reads a growing JSON-lines file incrementally: each :meth:`lines` returns only new whole lines."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.offset = 0

    def follow(self, path: Path) -> None:
        """Switch to another file (from its start)."""
        if path != self.path:
            self.path, self.offset = path, 0

    def lines(self) -> list[bytes]:
        """Complete lines appended since the last call (a torn last line waits for its newline)."""
        if self.path is None:
            return []
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        return data[: end + 1].splitlines()
