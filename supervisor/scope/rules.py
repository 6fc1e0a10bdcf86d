"""The scope rules, as pure functions: forbidden globs, who made a change, is it allowed, do scopes overlap.

Globs have the project's semantics (:func:`supervisor.memory.gitfiles.matches`):
``*`` stays within a directory, ``**`` crosses directories, a plain path names
a file or a whole directory.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Sequence
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


class Certainty(str, enum.Enum):
    """How a violation is known (``certainty`` in ``violations.jsonl``)."""

    KERNEL = "kernel"  # the fence refused the write: the agent's own trail shows EACCES
    WATCHER = "watcher"  # a change seen on disk that exactly one active agent could have made
    AMBIGUOUS = "ambiguous"  # several active agents could have made it, none may: the operator is told, no one else


@dataclass
class Candidate:
    """A running unit that could have made a change.

    ``workdir_rel`` is its session's working directory relative to the project
    root ("" or "." for the root itself); ``busy`` means mid-turn;
    ``last_output_age`` is seconds since its agent last printed anything;
    ``writable`` its ``[scope] writable`` paths inside the project (allowed
    like its scope); ``permits`` (for a fenced session) whether its processes
    can write a project path at all: one it cannot is never blamed on it.
    """

    unit: str
    workdir_rel: str
    scope: list[str]
    forbid: list[str]
    shared: list[str]
    busy: bool
    last_output_age: float
    writable: list[str] = field(default_factory=list)
    permits: Callable[[str], bool] | None = None

    @property
    def allowed_paths(self) -> list[str]:
        """Its scope with its writable paths (an empty scope stays empty: everything)."""
        scope = [g for g in self.scope if g.strip()]
        return [*scope, *self.writable] if scope else []


@dataclass
class Attribution:
    """Who made a change: ``unit`` (None when unknown), ``candidates`` (see :func:`attribute`), and why.

    ``suspect``: no single unit, but every candidate would break a rule with it
    (a warning for the operator, never an action on an agent).
    """

    unit: str | None
    candidates: list[str]
    why: str
    suspect: bool = False


#: Output within this many seconds counts as "active" for :func:`attribute`.
RECENT_OUTPUT = 5.0


def _under(path: str, directory: str) -> bool:
    d = directory.strip().strip("/")
    if d.startswith("./"):
        d = d[2:]
    return d in ("", ".") or path == d or path.startswith(d + "/")


def _allowed(path: str, c: Candidate) -> bool:
    return check(path, c.allowed_paths, c.forbid, ()) is None


def attribute(path: str, candidates: Sequence[Candidate], *, recent: float = RECENT_OUTPUT) -> Attribution:
    """Attribute a change of ``path`` to exactly one running unit, or say why no unit is blamed.

    The rules, in order:

    1. A fenced unit whose fence does not let it write ``path`` did not make
       the change (the kernel would have refused it).
    2. Only units whose session runs in a directory containing ``path`` (their
       working directory is ``path``'s directory or an ancestor) may have made
       it.  None: the change is outside every agent's working directory, and
       never anyone's violation (a person's edit, a build).
    3. Of those, only *active* ones: busy (mid-turn), or with output within
       ``recent`` seconds.  None active: no agent is blamed (a change while
       every agent there is idle is a person's or a build's).
    4. Exactly one active: it is the one.
    5. Several active: if some may make the change (inside their scope, not
       forbidden), nobody is blamed (``unit`` is the one allowed when there
       is exactly one); if none may, the change is ``suspect``: a violation
       by one of them, not known which, so no action is taken on any agent
       and the operator is told.

    ``candidates`` of the result names the units the choice was finally made
    among.

    Limits: without the fence, the kernel does not say which process wrote a
    file, so a person's edit in a directory where exactly one agent runs
    while that agent is mid-turn is still blamed on it (with the fence, only
    an agent allowed to write the path can be blamed, and only for a forbid
    glob the fence could not enforce).
    """
    if not candidates:
        return Attribution(None, [], "no unit is running")
    able = [c for c in candidates if c.permits is None or c.permits(path)]
    pool = [c for c in able if _under(path, c.workdir_rel)]
    if not pool:
        fenced = len(able) < len(candidates)
        return Attribution(None, [], "outside every running agent's working directory"
                           + (" (or outside their fences)" if fenced else ""))
    active = [c for c in pool if c.busy or c.last_output_age <= recent]
    if not active:
        return Attribution(None, [c.unit for c in pool],
                           f"no agent running in a directory containing it was active ({', '.join(c.unit for c in pool)})")
    if len(active) == 1:
        c = active[0]
        how = "is mid-turn" if c.busy else f"printed {c.last_output_age:.1f}s ago"
        others = "" if len(pool) == 1 else f" of the {len(pool)} units running in a directory containing it"
        return Attribution(c.unit, [c.unit], f"only {c.unit}{others} {how}")
    names = [c.unit for c in active]
    allowed = [c for c in active if _allowed(path, c)]
    if len(allowed) == 1:
        c = allowed[0]
        return Attribution(c.unit, [c.unit], f"{len(active)} units were active ({', '.join(names)}); only {c.unit} may change {path}")
    if allowed:
        names = [c.unit for c in allowed]
        return Attribution(None, names, f"ambiguous: {', '.join(names)} were active and may all change {path}")
    return Attribution(None, names, f"ambiguous: {', '.join(names)} were active and none may change {path}", suspect=True)


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
