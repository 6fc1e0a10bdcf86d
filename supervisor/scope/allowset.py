"""The scope as a set of paths the kernel fence can allow; and refused paths read from an agent's output.

:func:`scope_allowset` turns a unit's ``[scope] paths`` and ``forbid`` globs
(the project's glob rules, :func:`supervisor.memory.gitfiles.matches`) into
the directories and files a Landlock fence allows
(:class:`supervisor.session.fence.FenceSpec`).  Landlock allows a directory
with everything beneath it, or one existing file; it cannot say "this
directory except that file".  So **forbidden paths inside a scope are enforced
by allowing their siblings**:

* a directory the scope covers, with no forbidden path below it, is allowed
  whole: files created in it later are covered too;
* a directory the scope covers but with an existing forbidden entry below it
  is not allowed itself; each child is decided on its own (a subdirectory by
  the same rule, a file in the scope by a rule on that file).  The forbidden
  entry is then refused by the kernel.  The price: nothing can be created,
  removed or renamed *directly* in that directory (its files can still be
  edited in place), and an editor that saves by writing a new file and
  renaming it over the old one fails there.  Each such directory is named in
  ``notes``;
* a forbid glob that could match a path that does not exist yet below an
  allowed directory (``migrations/**`` before ``migrations/`` exists, or
  ``**/*.sql``) cannot be fenced without forbidding every new file there.
  The directory stays allowed and the pair is listed in ``watched``: the
  scope watcher keeps checking those paths (a violation there is detected,
  not prevented);
* a scope glob naming files rather than directories (``src/**/*.py``) gives
  rules on the matching files that exist now: they can be edited, but no new
  file can be created (no directory is wholly in the scope);
* symbolic links inside the scope are not followed (a write through one
  lands on its target, which must itself be allowed).

:func:`denied_paths` finds ``Permission denied`` / ``EACCES`` messages naming
a path in transcript text, for the generic adapter; with
``FenceSpec.permits`` the daemon tells a fence refusal (outside the fence)
from an ordinary permission error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..memory.gitfiles import matches
from ..session.fence import FenceSpec

#: More rules than this is a scope too fine-grained to fence (each is a kernel object).
MAX_RULES = 5000
#: Directory entries examined at most while expanding one scope.
WALK_LIMIT = 50000


class AllowSetError(Exception):
    """The scope cannot be expressed as a fence (the message says why and what to change)."""


@dataclass
class AllowSet:
    """The scope's part of the fence, relative to the project root, and what it cannot enforce."""

    dirs: list[str] = field(default_factory=list)  # "" is the project root
    files: list[str] = field(default_factory=list)
    watched: list[tuple[str, str]] = field(default_factory=list)  # (allowed dir, forbid glob that may match below it)
    notes: list[str] = field(default_factory=list)

    def spec(self, root: Path) -> FenceSpec:
        return FenceSpec.of((root / d if d else root for d in self.dirs), (root / f for f in self.files), self.notes)


def _segments(glob: str) -> tuple[str, ...]:
    g = glob.strip()
    if g.startswith("./"):
        g = g[2:]
    g = g.strip("/")
    return tuple(s for s in g.split("/") if s) if g else ("**",)


@lru_cache(maxsize=1024)
def _segment_re(seg: str) -> re.Pattern[str]:
    out = []
    for ch in seg:
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
    return re.compile("".join(out))


def _walk_glob(gsegs: tuple[str, ...], dsegs: tuple[str, ...], *, cover: bool) -> bool:
    """Segment matching of a glob against a directory.

    ``cover=False``: some path at or below the directory may match (now or
    once created).  ``cover=True``: every path strictly below it matches.
    A segment with ``**`` inside it (``a**b``) counts as "may match" and as
    "does not cover": the safe side of both questions.
    """

    @lru_cache(maxsize=None)
    def go(i: int, j: int) -> bool:
        if i == len(gsegs):
            return True  # matched the directory or an ancestor: a glob matches all below a match
        if j == len(dsegs):
            if not cover:
                return True
            rest = gsegs[i:]  # all "**", or "**"s then one "*": every name below matches, and so all below it
            return all(s == "**" for s in rest) or (rest[-1] == "*" and all(s == "**" for s in rest[:-1]))
        seg = gsegs[i]
        if seg == "**":
            return go(i + 1, j) or go(i, j + 1)
        if "**" in seg:
            return not cover
        return bool(_segment_re(seg).fullmatch(dsegs[j])) and go(i + 1, j + 1)

    return go(0, 0)


def may_match_below(glob: str, directory: str) -> bool:
    """True when ``glob`` can match ``directory`` itself or some path (existing or not) below it."""
    return _walk_glob(_segments(glob), tuple(s for s in directory.split("/") if s), cover=False)


def covers(glob: str, directory: str) -> bool:
    """True when ``glob`` matches every path below ``directory``."""
    return _walk_glob(_segments(glob), tuple(s for s in directory.split("/") if s), cover=True)


def scope_allowset(root: Path, scope: Sequence[str], forbid: Sequence[str], *,
                   max_rules: int = MAX_RULES, walk_limit: int = WALK_LIMIT) -> AllowSet:
    """The directories and files of ``root`` that a unit with this scope may write (see the module doc).

    ``scope`` empty means the whole project; ``forbid`` holds the unit's
    forbid globs and constraints.md's (and any path agentd protects, such as
    its state directory).  Raises :class:`AllowSetError` when the scope
    expands to more than ``max_rules`` rules.
    """
    root = Path(root)
    scope = [g for g in scope if g.strip()] or ["**"]
    forbid = [g for g in forbid if g.strip()]
    out = AllowSet()
    budget = [walk_limit]

    def is_forbidden(rel: str) -> bool:
        return bool(forbid) and matches(rel, forbid)  # (matches() of no globs is True)

    def join(rel: str, name: str) -> str:
        return f"{rel}/{name}" if rel else name

    def entries(rel: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(root / rel if rel else root) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError:
            return []
        budget[0] -= len(found)
        return found

    def forbidden_below(rel: str, globs: list[str]) -> str | None:
        """An existing forbidden path at or below ``rel`` (only ``globs`` that may match there), or None."""
        stack = [rel]
        while stack:
            d = stack.pop()
            if budget[0] <= 0:
                return None
            for e in entries(d):
                child = join(d, e.name)
                is_dir = e.is_dir(follow_symlinks=False)
                if matches(child, globs) or (is_dir and any(covers(g, child) for g in globs)):
                    return child
                if is_dir and any(may_match_below(g, child) for g in globs):
                    stack.append(child)
        return None

    def visit(rel: str) -> None:
        relevant = [g for g in forbid if may_match_below(g, rel)]
        if any(covers(g, rel) for g in scope):
            example = forbidden_below(rel, relevant) if relevant else None
            if example is None:
                out.dirs.append(rel)
                out.watched.extend((rel, g) for g in relevant)
                if relevant and budget[0] <= 0:
                    out.notes.append(f"{rel or '.'}: too many entries to look for forbidden paths; allowed whole, forbid globs watched")
                return
            out.notes.append(
                f"{rel or '.'}: nothing can be created, removed or renamed directly in it (its files can be "
                f"edited), because {example} below it is forbidden"
            )
        for e in entries(rel):
            child = join(rel, e.name)
            if e.is_symlink() or is_forbidden(child):
                continue
            if e.is_dir():
                if any(covers(g, child) for g in forbid):
                    continue  # all of it is forbidden
                if any(may_match_below(g, child) for g in scope):
                    visit(child)
            elif e.is_file() and matches(child, scope):
                out.files.append(child)
            if len(out.dirs) + len(out.files) > max_rules:
                raise AllowSetError(
                    f"the scope {list(scope)} expands to more than {max_rules} paths for the kernel fence; "
                    "name directories in [scope] paths (src/auth/**) rather than file patterns"
                )

    if not is_forbidden(""):
        visit("")
    return out


_QUOTED = re.compile(r"""'([^'\n]+)'|"([^"\n]+)"|‘([^’\n]+)’|“([^”\n]+)”|`([^`\n]+)`""")
_BARE = re.compile(r"""(?:^|[\s(])([^\s'"‘’“”`:()]+): [Pp]ermission denied""")


def denied_paths(text: str) -> list[str]:
    """Paths named by "Permission denied" / EACCES messages in ``text`` (clean text), first seen first.

    On each line that says "permission denied" or "EACCES": every quoted
    string (``cannot touch 'x'``, ``[Errno 13] Permission denied: 'x'``,
    ``EACCES: permission denied, open 'x'``, both paths of ``cannot move 'a'
    to 'b'``) and an unquoted path just before ``: Permission denied``
    (``sh: 1: cannot create x/y: Permission denied``; only when it has a
    ``/`` or a ``.``, so ``sudo: Permission denied`` names nothing).  A
    message without a path (Rust's "Permission denied (os error 13)") gives
    nothing.  The daemon keeps the paths outside the fence
    (``FenceSpec.permits``): those the fence refused.
    """
    out: list[str] = []
    whole = text.lower()  # one pass first: most text names no refusal (a line's match is also the text's)
    if "permission denied" not in whole and "eacces" not in whole:
        return out
    for line in text.splitlines():
        low = line.lower()
        if "permission denied" not in low and "eacces" not in low:
            continue
        found = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(line)]
        found += [m.group(1) for m in _BARE.finditer(line) if "/" in m.group(1) or "." in m.group(1)]
        for path in found:
            path = path.strip()
            if path and path not in out:
                out.append(path)
    return out
