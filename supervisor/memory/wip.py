"""WIP commits: a unit's uncommitted work in its scope, saved on a private ref, never touching the checkout.

:func:`save_wip` runs before every respawn, restart, stop, scope revert and
scheduled stop (and after an agent crashed), so that whatever an agent left
on disk survives whatever comes next.  It builds a commit with git plumbing in
a temporary index:

1. list the scope's changed files without writing anything (``ls-files -m -d
   -o --exclude-standard`` against the index, ``diff-index --cached HEAD`` for
   what is staged);
2. ``GIT_INDEX_FILE=<temp> git read-tree HEAD``, then ``update-index --add
   --remove`` of exactly those paths (a deleted file leaves the tree, an
   untracked one enters it; ignored files stay out);
3. ``write-tree``; when the tree is HEAD's, there is nothing to save;
4. ``commit-tree -p HEAD`` (agentd's own identity) and ``update-ref
   refs/agentd/wip/<unit>/<n>`` created only if absent (``n`` one past the
   newest).

HEAD, the branch, the real index and the work tree are never written
(``GIT_OPTIONAL_LOCKS=0`` also keeps the read commands from refreshing the
index).  ``git show <commit>`` is the saved work against the HEAD it was made
on.  The commit message names the unit, the session, the moment and the
files.  Old refs are thinned: each unit keeps its newest :data:`KEEP`.
:func:`restore_wip` writes a saved commit's files back into the work tree
(and nothing else), refusing to overwrite a file that changed since unless
``force``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..durable import atomic_write
from ..session.redact import redact_text
from .gitfiles import _pathspecs, _split_z, in_git

REF_ROOT = "refs/agentd/wip"
KEEP = 20
GIT_TIMEOUT = 60.0
FILES_IN_MESSAGE = 50
_UNIT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class WipError(RuntimeError):
    """A WIP operation that cannot be done (the message says why and what to do)."""


@dataclass(frozen=True)
class Change:
    status: str  # A M D T R (git's letters)
    path: str
    old: str | None = None  # a rename's old path

    def describe(self) -> str:
        return f"{self.status} {self.old} -> {self.path}" if self.old else f"{self.status} {self.path}"


@dataclass(frozen=True)
class Wip:
    """One saved WIP commit."""

    unit: str
    number: int
    commit: str
    base: str | None  # the HEAD it was made on (None: the repository had no commit)
    time: str
    moment: str = ""
    session: str | None = None
    changes: tuple[Change, ...] = ()
    stat: str = ""  # "2 files changed, 3 insertions(+), 1 deletion(-)"
    more: int = 0  # changed files beyond those named in the message

    @property
    def ref(self) -> str:
        return f"{REF_ROOT}/{self.unit}/{self.number}"

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "number": self.number, "ref": self.ref, "commit": self.commit, "base": self.base,
                "time": self.time, "moment": self.moment, "session": self.session,
                "changes": [c.describe() for c in self.changes], "more": self.more, "stat": self.stat}


@dataclass
class _Git:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        host = socket.gethostname() or "localhost"
        self.env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0",
                    "GIT_AUTHOR_NAME": f"agentd ({host})", "GIT_AUTHOR_EMAIL": "agentd@localhost",
                    "GIT_COMMITTER_NAME": f"agentd ({host})", "GIT_COMMITTER_EMAIL": "agentd@localhost"}
        self.env.pop("GIT_INDEX_FILE", None)

    def run(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
            ok: tuple[int, ...] = (0,)) -> bytes:
        argv = ["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.quotepath=false", *args]
        try:
            proc = subprocess.run(argv, cwd=self.root, input=input, capture_output=True, timeout=GIT_TIMEOUT,
                                  env={**self.env, **(env or {})}, check=False)
        except subprocess.TimeoutExpired:
            raise WipError(f"git {args[0]} gave no answer within {GIT_TIMEOUT:g}s") from None
        except OSError as exc:
            raise WipError(f"cannot run git: {exc}") from None
        if proc.returncode not in ok:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise WipError(f"git {' '.join(args[:2])} failed: {err[-1] if err else f'exit {proc.returncode}'}")
        return proc.stdout

    def out(self, *args: str, **kw: Any) -> str:
        return self.run(*args, **kw).decode(errors="surrogateescape").strip()

    def head(self) -> str | None:
        return self.out("rev-parse", "-q", "--verify", "HEAD^{commit}", ok=(0, 1, 128)) or None


def _unit_name(unit: str) -> str:
    if not _UNIT.fullmatch(unit):
        raise WipError(f"unit name {unit!r} is not valid (a-z, 0-9, _ and -, starting with a letter or digit)")
    return unit


def _git(root: Path) -> _Git:
    if not in_git(root):
        raise WipError(f"{root} is not in a git work tree: WIP commits need git (git init)")
    return _Git(Path(root))


def changed_paths(root: Path, scope: Sequence[str]) -> list[str]:
    """The scope's files that differ from HEAD in the work tree or the index (relative to ``root``; read-only)."""
    git = _git(root)
    specs = _pathspecs(scope)
    found = set(_split_z(git.run("ls-files", "-z", "-m", "-d", "-o", "--exclude-standard", *specs)))
    if git.head() is not None:
        found |= set(_split_z(git.run("diff-index", "-z", "--cached", "--name-only", "--relative", "HEAD", *specs)))
    else:
        found |= set(_split_z(git.run("ls-files", "-z", "-c", *specs)))
    return sorted(p for p in found if not p.endswith("/"))  # an untracked nested repository is not a file


def save_wip(root: Path, unit: str, scope: Sequence[str], *, moment: str, session: str | None = None,
             keep: int = KEEP) -> Wip | None:
    """Save the scope's uncommitted work as ``refs/agentd/wip/<unit>/<n>`` (module docstring); None when
    nothing differs from HEAD.  Raises :class:`WipError`."""
    git = _git(root)
    _unit_name(unit)
    paths = changed_paths(root, scope)
    if not paths:
        return None
    head = git.head()
    fd, index = tempfile.mkstemp(prefix="agentd-wip-", suffix=".index", dir=git.out("rev-parse", "--absolute-git-dir"))
    os.close(fd)
    os.unlink(index)  # read-tree makes it; an empty file is not a valid index
    env = {"GIT_INDEX_FILE": index, "GIT_LITERAL_PATHSPECS": "1"}
    try:
        git.run("read-tree", *([head] if head else ["--empty"]), env=env)
        git.run("update-index", "-z", "--add", "--remove", "--stdin", input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths), env=env)
        tree = git.out("write-tree", env=env)
    finally:
        Path(index).unlink(missing_ok=True)
    base_tree = git.out("rev-parse", f"{head}^{{tree}}") if head else None
    if tree == base_tree:
        return None
    changes, stat = _diff(git, head, tree)
    if not changes:
        return None
    same = _newest_if_same(git, root, unit, tree, head)
    if same is not None:
        return same  # a crash loop saves the same work once
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    message = _message(unit, moment, session, when, changes, stat)
    commit = git.out("commit-tree", tree, *(["-p", head] if head else []), input=message.encode())
    number = _create_ref(git, unit, commit)
    thin(root, unit, keep)
    shown = tuple(changes[:FILES_IN_MESSAGE])
    return Wip(unit, number, commit, head, when, moment, session, shown, stat, len(changes) - len(shown))


def _diff(git: _Git, base: str | None, tree: str) -> tuple[list[Change], str]:
    old = base or git.out("hash-object", "-t", "tree", "/dev/null")
    raw = git.run("diff-tree", "-r", "-z", "-M", "--relative", "--name-status", old, tree).decode("utf-8", "surrogateescape")
    fields = raw.split("\0")
    changes, i = [], 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status.startswith(("R", "C")):
            changes.append(Change(status[0], fields[i + 2], fields[i + 1]))
            i += 3
        else:
            changes.append(Change(status[0], fields[i + 1]))
            i += 2
    stat = git.out("diff-tree", "-r", "-M", "--shortstat", "--relative", old, tree)
    return changes, stat


def _newest_if_same(git: _Git, root: Path, unit: str, tree: str, head: str | None) -> Wip | None:
    """The unit's newest WIP when it already holds exactly ``tree`` on ``head``."""
    numbers = _numbers(git, unit)
    if not numbers:
        return None
    ref = f"{REF_ROOT}/{unit}/{numbers[-1]}"
    if git.out("log", "-1", "--format=%T %P", ref).split() != [tree, *([head] if head else [])]:
        return None
    return next((w for w in list_wips(root, unit) if w.number == numbers[-1]), None)


def _message(unit: str, moment: str, session: str | None, when: str, changes: list[Change], stat: str) -> str:
    lines = [f"agentd wip: {unit} before {moment or 'save'}", "",
             f"The uncommitted work of unit {unit} in its scope, saved by agentd at {when}.",
             f"{stat}" if stat else "", "", *[f"  {redact_text(c.describe())}" for c in changes[:FILES_IN_MESSAGE]]]
    if len(changes) > FILES_IN_MESSAGE:
        lines.append(f"  ... {len(changes) - FILES_IN_MESSAGE} more")
    lines += ["", f"Agentd-Unit: {unit}", f"Agentd-Moment: {moment}", f"Agentd-Session: {session or '-'}",
              f"Agentd-Time: {when}", f"Agentd-Files: {len(changes)}"]
    return "\n".join(lines) + "\n"


def _numbers(git: _Git, unit: str) -> list[int]:
    out = git.out("for-each-ref", "--format=%(refname)", f"{REF_ROOT}/{unit}/")
    prefix = f"{REF_ROOT}/{unit}/"
    return sorted(int(r[len(prefix):]) for r in out.splitlines() if r[len(prefix):].isdigit())


def _create_ref(git: _Git, unit: str, commit: str) -> int:
    """Create the next ref (create-only, so two savers never overwrite each other: the loser takes the next)."""
    for _ in range(10):
        numbers = _numbers(git, unit)
        number = (numbers[-1] if numbers else 0) + 1
        try:
            git.run("update-ref", "-m", "agentd wip", f"{REF_ROOT}/{unit}/{number}", commit, "")
            return number
        except WipError:
            continue
    raise WipError(f"could not create a WIP ref for {unit}: another process keeps taking the next number")


def thin(root: Path, unit: str, keep: int = KEEP) -> list[int]:
    """Delete all but the newest ``keep`` WIP refs of ``unit``; the numbers deleted."""
    git = _git(root)
    numbers = _numbers(git, _unit_name(unit))
    gone = numbers[:-keep] if keep > 0 else numbers
    for number in gone:
        git.run("update-ref", "-d", f"{REF_ROOT}/{unit}/{number}")
    return gone


_TRAILER = re.compile(r"^Agentd-(Unit|Moment|Session|Time|Files): *(.*)$", re.M)
_CHANGE = re.compile(r"^  ([AMDTRCUX]) (?:(.+?) -> )?(.+)$", re.M)


def list_wips(root: Path, unit: str | None = None) -> list[Wip]:
    """The saved WIP commits (of ``unit``, or of every unit), oldest first per unit."""
    git = _git(root)
    where = f"{REF_ROOT}/{_unit_name(unit)}/" if unit else f"{REF_ROOT}/"
    fmt = "%(refname)%00%(objectname)%00%(parent)%00%(contents)%1e"
    out = git.run("for-each-ref", f"--format={fmt}", where).decode("utf-8", "surrogateescape")
    found = []
    for record in out.split("\x1e"):
        parts = record.strip("\n").split("\0")
        if len(parts) < 4 or not parts[0].startswith(REF_ROOT + "/"):
            continue
        name, commit, parent, body = parts[0], parts[1], parts[2], parts[3]
        owner, _, number = name[len(REF_ROOT) + 1:].rpartition("/")
        if not number.isdigit():
            continue
        meta = dict(_TRAILER.findall(body))
        changes = tuple(Change(s, p, o or None) for s, o, p in _CHANGE.findall(body))
        total = int(meta["Files"]) if meta.get("Files", "").isdigit() else len(changes)
        stat = next((ln for ln in body.splitlines() if " changed" in ln and ln[:1].isdigit()), "")
        found.append(Wip(owner, int(number), commit, parent.split()[0] if parent else None, meta.get("Time", ""),
                         meta.get("Moment", ""), None if meta.get("Session") in (None, "-") else meta["Session"],
                         changes, stat, max(0, total - len(changes))))
    return sorted(found, key=lambda w: (w.unit, w.number))


def find_wip(root: Path, unit: str, number: int | None = None) -> Wip:
    """``unit``'s WIP number ``number`` (None: the newest); WipError naming what exists when absent."""
    wips = list_wips(root, unit)
    if not wips:
        raise WipError(f"unit {unit} has no WIP commits (agentd saves one before each respawn, restart and stop)")
    if number is None:
        return wips[-1]
    for wip in wips:
        if wip.number == number:
            return wip
    raise WipError(f"unit {unit} has no WIP {number}; it has {', '.join(str(w.number) for w in wips)}")


def show_wip(root: Path, wip: Wip, *, patch: bool = True) -> str:
    """``git show`` of the commit: its message, the files, and (``patch``) the diff against its base."""
    return _git(root).out("show", "--stat", *(["--patch"] if patch else []), "--format=fuller", wip.commit)


def restore_wip(root: Path, wip: Wip, *, force: bool = False) -> list[Change]:
    """Write ``wip``'s files into the work tree (HEAD and the index untouched); the changes applied.

    A file whose content now is neither what the WIP was made on nor what it
    saved is a local change: the restore refuses (naming the files) unless ``force``.
    """
    git = _git(root)
    old = wip.base or git.out("hash-object", "-t", "tree", "/dev/null")
    raw = git.run("diff-tree", "-r", "-z", "--no-renames", "--relative", old, wip.commit).decode("utf-8", "surrogateescape")
    fields = raw.split("\0")
    entries = []  # (new mode, old blob, new blob, status, path)
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i], fields[i + 1]
        if not meta.startswith(":"):
            break
        _old_mode, new_mode, old_blob, new_blob, status = meta[1:].split()
        entries.append((new_mode, old_blob, new_blob, status, path))
    zero = "0" * len(wip.commit)
    current = _current_blobs(git, root, [e[4] for e in entries])
    conflicts = [path for _m, old_blob, new_blob, _s, path in entries
                 if current.get(path, zero) not in {old_blob, new_blob}]
    if conflicts and not force:
        shown = ", ".join(conflicts[:10]) + (f" (+{len(conflicts) - 10} more)" if len(conflicts) > 10 else "")
        raise WipError(f"local changes would be overwritten: {shown}; commit or stash them, or restore with --force")
    applied = []
    for new_mode, _old_blob, new_blob, status, path in entries:
        target = Path(root) / path
        if status == "D":
            if target.is_symlink() or target.exists():
                target.unlink()
        else:
            data = git.run("cat-file", "--filters", f"--path={path}", new_blob) if new_mode != "120000" else \
                git.run("cat-file", "blob", new_blob)
            if target.is_symlink() or (target.exists() and new_mode == "120000"):
                target.unlink()
            if new_mode == "120000":
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(data.decode("utf-8", "surrogateescape"), target)
            else:
                atomic_write(target, data, mode=0o755 if new_mode == "100755" else 0o644)
        applied.append(Change(status, path))
    return applied


def _current_blobs(git: _Git, root: Path, paths: list[str]) -> dict[str, str]:
    """The blob id each path has in the work tree now (absent: not in the result)."""
    from .gitfiles import blob_hash

    out: dict[str, str] = {}
    regular = []
    for path in paths:
        target = Path(root) / path
        if target.is_symlink():
            out[path] = blob_hash(os.readlink(target).encode("utf-8", "surrogateescape"))
        elif target.is_file():
            regular.append(path)
    if regular:
        ids = git.out("hash-object", "--stdin-paths", input="\n".join(regular).encode("utf-8", "surrogateescape") + b"\n")
        out.update(zip(regular, ids.split(), strict=True))
    return out
