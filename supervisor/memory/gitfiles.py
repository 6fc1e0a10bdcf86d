"""Files in a scope and their git blob hashes, with a fixed, small number of processes.

Inside a git work tree a scope costs at most three ``git`` processes whatever
its size: ``ls-files -s`` gives the index blob of every tracked file,
``ls-files -m -o`` names the modified and untracked ones, and one
``hash-object -w --stdin-paths`` hashes (and stores) just those, so
``git cat-file -p HASH`` works for every recorded hash.  Outside git the same
blob ids are computed in Python (``sha1("blob <size>\\0" + content)``) but
nothing is stored.

Scope globs are relative to the project root: ``*`` stays within a directory,
``**`` crosses directories, and a plain path names a file or a whole directory.
The ``.agent/`` store itself is never part of a scope.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .store import AGENT_DIR

GIT_TIMEOUT = 60.0
WALK_LIMIT = 5000
#: agentd's own state directory (its default name): transcripts and sockets are never project files.
STATE_DIR = ".agentd"
SKIP_DIRS = {".git", AGENT_DIR, STATE_DIR, ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache"}


@dataclass
class ScopeFiles:
    """The files of a scope with their blob hashes, and how they were obtained."""

    files: dict[str, str] = field(default_factory=dict)
    git: bool = False
    note: str = ""


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


def _git(root: Path, args: list[str], stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["git", *args],
        cwd=root,
        input=stdin,
        capture_output=True,
        timeout=GIT_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def in_git(root: Path) -> bool:
    """True when ``root`` is inside a git work tree.

    A ``.git`` entry in ``root`` or a parent is looked for first, so that the
    common "not a repository" case costs no process.
    """
    if not any((p / ".git").exists() for p in (Path(root).resolve(), *Path(root).resolve().parents)):
        return False
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, timeout=GIT_TIMEOUT
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == b"true"


def _pathspecs(patterns: Sequence[str]) -> list[str]:
    specs = [f":(glob){p.strip().rstrip('/')}" for p in patterns if p.strip()]
    # a glob pathspec without wildcards matches the path itself only; add the directory form
    specs += [f":(glob){p.strip().rstrip('/')}/**" for p in patterns if p.strip() and "**" not in p]
    # (no ":(exclude).agent" here: git 2.39 matches nothing when it is combined with
    # ":(glob)" in ls-files; .agent/ is filtered out by _split_z instead)
    return ["--", *(specs or ["."])]


def _split_z(data: bytes) -> list[str]:
    """NUL-separated git output, without anything under .agent/ or agentd's state directory."""
    out = data.decode("utf-8", errors="surrogateescape").split("\0")
    hidden = (AGENT_DIR + "/", STATE_DIR + "/")
    return [p for p in out if p and not p.startswith(hidden) and not any(f"\t{h}" in p for h in hidden)]


def list_files(root: Path, patterns: Sequence[str], *, limit: int | None = None) -> list[str]:
    """Sorted files of the scope (tracked and untracked-not-ignored in git; walked otherwise)."""
    if in_git(root):
        out = _git(root, ["ls-files", "-c", "-o", "--exclude-standard", "-z", *_pathspecs(patterns)])
        files = sorted({p for p in _split_z(out) if (root / p).is_file() or (root / p).is_symlink()})
    else:
        files = sorted(_walk(root, patterns, WALK_LIMIT))
    return files[:limit] if limit is not None else files


def _walk(root: Path, patterns: Sequence[str], limit: int) -> Iterable[str]:
    found = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            if matches(rel, patterns):
                yield rel
                found += 1
                if found >= limit:
                    return


def blob_hash(data: bytes) -> str:
    """The git blob id of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def scope_hashes(root: Path, patterns: Sequence[str]) -> ScopeFiles:
    """Blob hashes of every file in the scope (see the module docstring)."""
    if not in_git(root):
        files: dict[str, str] = {}
        for rel in _walk(root, patterns, WALK_LIMIT):
            try:
                files[rel] = blob_hash((root / rel).read_bytes())
            except OSError:
                continue
        note = "not a git repository: hashes are git blob ids computed here, no blobs were stored"
        if len(files) >= WALK_LIMIT:
            note += f"; scope truncated to the first {WALK_LIMIT} files"
        return ScopeFiles(files=files, git=False, note=note)
    specs = _pathspecs(patterns)
    files = {}
    for entry in _split_z(_git(root, ["ls-files", "-s", "-z", *specs])):
        meta, _, path = entry.partition("\t")
        mode, blob, _stage = meta.split(" ")
        if mode != "160000":  # submodules have no blob
            files[path] = blob
    dirty = sorted(set(_split_z(_git(root, ["ls-files", "-m", "-o", "--exclude-standard", "-z", *specs]))))
    present = [p for p in dirty if (root / p).is_file()]
    for p in dirty:
        if p not in present:
            files.pop(p, None)  # deleted in the work tree
    if present:
        out = _git(root, ["hash-object", "-w", "--stdin-paths"], stdin="\n".join(present).encode() + b"\n")
        files.update(zip(present, out.decode().split(), strict=True))
    return ScopeFiles(files=dict(sorted(files.items())), git=True, note="")


def cat_blob(root: Path, blob: str) -> bytes:
    """Content of ``blob`` from the repository (``git cat-file -p``)."""
    if not re.fullmatch(r"[0-9a-f]{7,64}", blob):
        raise ValueError(f"{blob!r} is not a blob hash")
    return _git(root, ["cat-file", "-p", blob])
