"""The leaf of the git modules: scope globs, blob ids and the one error, with no libgit2.

:mod:`.gitfiles` (a scope's files), :mod:`.gitrepo` (libgit2), :mod:`.worktree`
(work-tree bytes) and :mod:`.gitworker` (the killable helper) all read these,
so none of them imports another to get them.  Scope globs are relative to the
project root: ``*`` stays within a directory, ``**`` crosses directories, and
a plain path names a file or a whole directory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

#: agentd's own state directory (its default name): transcripts and sockets are never project files.
STATE_DIR = ".agentd"


class RepoError(RuntimeError):
    """The repository cannot be used as asked; the message says why and what to do."""


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Regex for a scope glob (see the module docstring for the rules)."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # a pattern also matches everything below a matching directory
    return re.compile("".join(out) + "(?:/.*)?")


def matches(path: str, patterns: Sequence[str]) -> bool:
    """True if ``path`` (relative, '/'-separated) is inside one of ``patterns`` (empty: everything)."""
    if not patterns:
        return True
    return any(_compiled(p).fullmatch(path) for p in patterns)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return glob_regex(pattern)


def blob_hash(data: bytes) -> str:
    """The git blob id of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
