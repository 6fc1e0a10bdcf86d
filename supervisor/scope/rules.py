"""The scope rules, as pure functions: forbidden globs, who made a change, is it allowed, do scopes overlap.

Globs have the project's semantics (:func:`supervisor.memory.gitfiles.matches`):
``*`` stays within a directory, ``**`` crosses directories, a plain path names
a file or a whole directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..memory.gitfiles import matches


_FORBID_LINE = re.compile(r"^\s*(?:[-*+]\s+)?forbid\s*:\s*(?P<globs>.*)$", re.IGNORECASE)


def forbid_globs_from_constraints(text: str) -> list[str]:
    """The forbidden globs that ``constraints.md`` declares.

    Format: a line that is ``forbid: GLOB[, GLOB...]``, optionally as a list
    item (``- forbid: ...``, ``* forbid: ...``) and with any indentation;
    ``forbid`` is case-insensitive.  Globs are separated by commas (or
    whitespace), and may each be wrapped in backticks or quotes.  A ``#``
    preceded by a space starts a comment.  Lines inside fenced code blocks
    (```` ``` ```` or ``~~~``) are documentation, not rules, and are ignored,
    as is "forbid:" anywhere but at the start of a line.  Examples::

        - forbid: migrations/**
        forbid: db/schema.sql, db/*.sql   # the DBA owns these
        * Forbid: `vendor/**`

    Duplicates are dropped; order is kept.
    """
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            continue
        if fence is not None:
            continue
        m = _FORBID_LINE.match(line)
        if not m:
            continue
        globs = re.split(r"\s+#", m.group("globs"), maxsplit=1)[0]
        for raw in re.split(r"[,\s]+", globs):
            glob = raw.strip().strip("`'\"").strip()
            if glob and glob not in out:
                out.append(glob)
    return out


@dataclass
class Candidate:
    """A running unit that could have made a change.

    ``workdir_rel`` is its session's working directory relative to the project
    root ("" or "." for the root itself); ``busy`` means mid-turn;
    ``last_output_age`` is seconds since its agent last printed anything.
    """

    unit: str
    workdir_rel: str
    scope: list[str]
    forbid: list[str]
    shared: list[str]
    busy: bool
    last_output_age: float


@dataclass
class Attribution:
    """Who made a change: ``unit`` (None when unknown), ``candidates`` (see :func:`attribute`), and why."""

    unit: str | None
    candidates: list[str]
    why: str


#: Output within this many seconds counts as "active" for :func:`attribute`.
RECENT_OUTPUT = 5.0


def _under(path: str, directory: str) -> bool:
    d = directory.strip().strip("/")
    if d.startswith("./"):
        d = d[2:]
    return d in ("", ".") or path == d or path.startswith(d + "/")


def _allowed(path: str, c: Candidate) -> bool:
    return check(path, c.scope, c.forbid, ()) is None


def attribute(path: str, candidates: Sequence[Candidate], *, recent: float = RECENT_OUTPUT) -> Attribution:
    """Attribute a change of ``path`` to one of the running units, or say it cannot.

    The heuristic, in order:

    1. The units whose session runs in a directory containing ``path`` (its
       working directory is ``path``'s directory or an ancestor).  One such
       unit: it is the one.  None: every running unit is considered instead,
       but then only an *active* one (see 2) is ever blamed, since nobody runs
       where the file is.
    2. Among several, the *active* ones: busy (mid-turn), or with output
       within ``recent`` seconds.  Exactly one active: it is the one.  None
       active: all of them stay in the running.
    3. Among those still several, the ones for which the change is allowed
       (inside their scope, not forbidden): exactly one, it is the one.  So an
       ambiguous change is never blamed on a unit it would be a violation for
       when another unit was allowed to make it.
    4. Otherwise: ambiguous, ``unit`` is None.

    ``candidates`` of the result names the units the choice was finally made
    among (for an ambiguous result, every unit that may have made it).

    Limits: the kernel does not say which process wrote a file, so this is a
    guess from where sessions run and when they were active.  A change a
    person makes in a directory where exactly one agent runs is blamed on that
    agent; two agents active in the same directory are told apart only by
    their scopes; a write that lands seconds after a turn ended may still be
    given to the unit that was busy then only if it printed within ``recent``.
    """
    if not candidates:
        return Attribution(None, [], "no unit is running")
    pool = [c for c in candidates if _under(path, c.workdir_rel)]
    where = "runs in a directory containing it"
    nobody_here = not pool
    if nobody_here:
        pool = list(candidates)
        where = "is running (none runs in a directory containing it)"
    if len(pool) == 1 and not nobody_here:
        c = pool[0]
        return Attribution(c.unit, [c.unit], f"{c.unit} is the only unit whose session {where}")
    active = [c for c in pool if c.busy or c.last_output_age <= recent]
    if len(active) == 1:
        c = active[0]
        how = "is mid-turn" if c.busy else f"printed {c.last_output_age:.1f}s ago"
        return Attribution(c.unit, [c.unit], f"of the units whose session {where}, only {c.unit} {how}")
    if nobody_here and not active:
        return Attribution(None, [c.unit for c in pool], f"no unit runs in a directory containing {path}, and none was active")
    pool = active or pool
    allowed = [c for c in pool if _allowed(path, c)]
    names = [c.unit for c in pool]
    state = "active" if active else "idle"
    if len(allowed) == 1:
        c = allowed[0]
        return Attribution(c.unit, [c.unit], f"{len(pool)} units were {state} ({', '.join(names)}); only {c.unit} may change {path}")
    if allowed:
        names = [c.unit for c in allowed]
        return Attribution(None, names, f"ambiguous: {', '.join(names)} were {state} and may all change {path}")
    return Attribution(None, names, f"ambiguous: {', '.join(names)} were {state} and none may change {path}")


@dataclass
class Violation:
    """A change that breaks a rule: the path, and the rule as one line (names the constraint)."""

    path: str
    rule: str
    kind: str = field(default="scope")  # "scope" | "forbid" | "constraints"


def _quote_list(globs: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{g}"' for g in globs) + "]"


def check(path: str, unit_scope: Sequence[str], unit_forbid: Sequence[str], global_forbid: Sequence[str]) -> Violation | None:
    """The violation a change of ``path`` is, or None.

    Forbidden globs win over the scope: the unit's ``[scope] forbid`` first,
    then constraints.md's ``forbid:`` lines, then the scope itself (an empty
    scope means no restriction).
    """
    for glob in unit_forbid:
        if glob.strip() and matches(path, [glob]):
            return Violation(path, f'forbidden by [scope] forbid = "{glob}"', "forbid")
    for glob in global_forbid:
        if glob.strip() and matches(path, [glob]):
            return Violation(path, f"forbidden by constraints.md: forbid: {glob}", "constraints")
    scope = [g for g in unit_scope if g.strip()]
    if scope and not matches(path, scope):
        return Violation(path, f"outside scope: [scope] paths = {_quote_list(scope)}", "scope")
    return None


class ScopeLike(Protocol):
    """What :func:`overlaps` needs of a scope (``units.ScopeSection`` fits)."""

    @property
    def paths(self) -> Sequence[str]: ...

    @property
    def forbid(self) -> Sequence[str]: ...

    @property
    def shared(self) -> Sequence[str]: ...


def _synthetic(glob: str) -> list[str]:
    g = glob.strip()
    if g.startswith("./"):
        g = g[2:]
    g = g.rstrip("/").replace("**", "x").replace("*", "x").replace("?", "x")
    return [g, f"{g}/x"] if g else ["x"]


def overlaps(a: ScopeLike, b: ScopeLike, project_files: Iterable[str]) -> str | None:
    """An example path both scopes may write, or None when they are disjoint.

    A path both may write is inside both ``paths`` (empty: the whole project)
    and forbidden by neither's ``forbid``.  It is not an overlap when it also
    matches both units' ``shared`` globs.  Examples are looked for first among
    ``project_files`` (in their order), then among synthetic paths made from
    each glob (``**``, ``*`` and ``?`` become ``x``, and the same with ``/x``
    appended, for a path below a directory), then among one glob's example
    put below the other's (``tools`` against ``**/*.py`` gives ``tools/x.py``).

    Limits: the synthetic paths miss overlaps such as ``a/*/c`` against
    ``a/b/*`` when no project file shows them (``a/b/c`` is not tried).
    """
    a_paths = [g for g in a.paths if g.strip()] or ["**"]
    b_paths = [g for g in b.paths if g.strip()] or ["**"]
    a_shared = [g for g in a.shared if g.strip()]
    b_shared = [g for g in b.shared if g.strip()]

    def both(p: str) -> bool:
        if check(p, a_paths, a.forbid, ()) is not None or check(p, b_paths, b.forbid, ()) is not None:
            return False
        return not (a_shared and b_shared and matches(p, a_shared) and matches(p, b_shared))

    for p in project_files:
        if both(p):
            return p
    singles = [p for glob in (*a_paths, *b_paths) for p in _synthetic(glob)]
    # one glob's example below the other's (``tools`` against ``**/*.py``: ``tools/x.py``)
    pairs = [
        f"{outer.removesuffix('/x')}/{inner.removeprefix('x/')}"
        for g, h in ((a_paths, b_paths), (b_paths, a_paths))
        for og in g
        for ih in h
        for outer in _synthetic(og)[:1]
        for inner in _synthetic(ih)[:1]
    ]
    for p in (*singles, *pairs):
        if both(p):
            return p
    return None
