"""``agentd sync``: share the ``.agent/`` store between clones through a git remote.

The memory travels on a branch of its own, ``agentd-memory`` by default,
never on the branch the agent works on: a sync must not merge anybody's code
into a working tree, must work whatever branch each clone has checked out,
and must never touch HEAD, the index or any file outside ``.agent/``.  The
branch holds only ``.agent/`` (without ``local/``); it is built with git
plumbing and a private index.

One sync, under ``local/sync.lock`` (one sync per clone at a time):

1. ``git fetch`` the remote's memory branch (no lock held: decides go on).
2. Under the store lock: commit the working ``.agent/`` files onto this
   clone's ``refs/heads/agentd-memory``; merge the remote tip into it with
   ``git merge-tree`` (the ``union`` attributes of ``.agent/.gitattributes``
   apply, so appends from both sides are kept and never conflict); write
   the merged files back into ``.agent/``; repair what union merges can
   leave (:mod:`.normalize`); commit the result with both parents.  A file
   both sides rewrote (a task file, say) keeps this clone's version; the
   other side's stays in the history, and the result names the file.
   Decision logs never get there: an epoch roll never renames nor deletes
   the live log (:func:`.decisions._maybe_roll`), so git merges rolls and
   appends by union; a decision log that git still reports as conflicted
   (a history written by an older version, whose rolls renamed the log) is
   resolved as the union of both sides' lines.
3. ``git push`` the new commit.  A rejection (another clone pushed first)
   or a network error retries from 1 after a growing, jittered pause.

The first sync of a clone starts from a *seed* commit made from HEAD's
``.agent/`` with a fixed author and date, so clones of one repository share
it as a merge base.  ``local/sync.json`` records when the last sync
succeeded and the newest decisions it brought from other clones; the wakeup
shows both, so an agent knows how fresh its view of the other hosts is.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from . import lineformat, normalize
from .gitmeta import ensure_git_metadata
from .ids import snapshot_sort_key
from .store import AgentPaths, StoreError, atomic_write, file_lock, format_time, require_store, store_lock, write_json

DEFAULT_REMOTE = "origin"
DEFAULT_BRANCH = "agentd-memory"
DEFAULT_RETRIES = 5
GIT_TIMEOUT = 120.0
RECEIVED_KEEP = 5
EXCLUDED_TOP = frozenset({"local", ".lock", "state.json"})
_TMP_RE = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")
_LOG_RE = re.compile(r"(decisions(?:-.+)?)\.log")
_EPOCH_SUFFIX_RE = re.compile(r"-epoch-\d+(?=\.log$)")
_FIXED = {"GIT_AUTHOR_NAME": "agentd", "GIT_AUTHOR_EMAIL": "agentd@localhost", "GIT_AUTHOR_DATE": "1000000000 +0000",
          "GIT_COMMITTER_NAME": "agentd", "GIT_COMMITTER_EMAIL": "agentd@localhost", "GIT_COMMITTER_DATE": "1000000000 +0000"}


class SyncError(StoreError):
    """The sync could not be done; the message says why and what to do."""


@dataclass(frozen=True)
class SyncRecord:
    """``local/sync.json``: this clone's last sync."""

    time: str = ""  # when the last sync succeeded ("" never)
    remote: str = DEFAULT_REMOTE
    branch: str = DEFAULT_BRANCH
    commit: str = ""
    last_attempt: str = ""
    error: str = ""  # why the last attempt failed ("" when it succeeded)
    received: dict[str, list[str]] = field(default_factory=dict)  # log stem -> newest lines from other clones
    received_total: int = 0


@dataclass(frozen=True)
class SyncResult:
    """What one sync did."""

    commit: str
    pushed: bool
    received: int  # decision lines that arrived from other clones
    attempts: int
    kept_ours: tuple[str, ...] = ()  # files both sides changed: this clone's version kept
    repaired: tuple[str, ...] = ()  # files cleaned of what the union merge left twice

    def describe(self, remote: str, branch: str) -> str:
        text = f"synced with {remote}/{branch} at {self.commit[:12]}: received {self.received} decision(s)"
        text += ", pushed" if self.pushed else ", nothing to push"
        if self.attempts > 1:
            text += f" (after {self.attempts} attempts)"
        if self.kept_ours:
            text += f"; both sides changed {', '.join(self.kept_ours)}: kept this clone's version (the other is in {remote}/{branch})"
        return text


def read_record(paths: AgentPaths) -> SyncRecord | None:
    """The last sync record, or None when this clone never tried to sync."""
    try:
        data = json.loads(paths.sync_state.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    known = {k: v for k, v in data.items() if k in SyncRecord.__dataclass_fields__}
    try:
        return SyncRecord(**known)
    except TypeError:
        return None


class _Git:
    """git in the work tree's top directory, with a fixed identity for agentd's own commits."""

    def __init__(self, top: Path) -> None:
        self.top = top
        host = socket.gethostname() or "localhost"
        self.env = {**os.environ, "GIT_AUTHOR_NAME": f"agentd ({host})", "GIT_AUTHOR_EMAIL": "agentd@localhost",
                    "GIT_COMMITTER_NAME": f"agentd ({host})", "GIT_COMMITTER_EMAIL": "agentd@localhost",
                    "GIT_TERMINAL_PROMPT": "0"}

    def run(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
            ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
        argv = ["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args]
        try:
            proc = subprocess.run(argv, cwd=self.top, input=input, capture_output=True, timeout=GIT_TIMEOUT,
                                  env={**self.env, **(env or {})}, check=False)
        except subprocess.TimeoutExpired:
            raise SyncError(f"git {args[0]} gave no answer within {GIT_TIMEOUT:g}s") from None
        if proc.returncode not in ok:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise SyncError(f"git {' '.join(args[:2])} failed: {err[-1] if err else f'exit {proc.returncode}'}")
        return proc

    def out(self, *args: str, **kw: Any) -> str:
        return self.run(*args, **kw).stdout.decode().strip()

    def rev(self, name: str) -> str | None:
        proc = self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", ok=(0, 1, 128))
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


def _top(root: Path) -> Path:
    try:
        proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SyncError(f"cannot run git: {exc}") from None
    if proc.returncode != 0:
        raise SyncError(f"{root} is not in a git work tree: agentd sync shares .agent/ through git "
                        "(git init, git remote add origin URL)")
    return Path(proc.stdout.decode().strip())


def _excluded(rel: str) -> bool:
    """Per-clone or temporary files of the store (``rel`` is relative to ``.agent/``)."""
    parts = rel.split("/")
    return parts[0] in EXCLUDED_TOP or bool(_TMP_RE.fullmatch(parts[-1]))


class _Store:
    """The store's files as git trees: read, write back, commit."""

    def __init__(self, paths: AgentPaths, git: _Git) -> None:
        self.paths, self.git = paths, git
        self.prefix = paths.dir.resolve().relative_to(git.top.resolve()).as_posix()
        self.index = paths.local / "sync.index"

    def working_files(self) -> list[str]:
        out = []
        for dirpath, dirnames, filenames in os.walk(self.paths.dir):
            rel_dir = Path(dirpath).relative_to(self.paths.dir).as_posix()
            dirnames[:] = sorted(d for d in dirnames if not (rel_dir == "." and d in EXCLUDED_TOP))
            for name in sorted(filenames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if not _excluded(rel) and (Path(dirpath) / name).is_file() and not (Path(dirpath) / name).is_symlink():
                    out.append(f"{self.prefix}/{rel}")
        return out

    def build_tree(self, entries: dict[str, str]) -> str:
        """A tree of ``path -> blob`` built in a private index (HEAD and the real index untouched)."""
        self.index.unlink(missing_ok=True)
        env = {"GIT_INDEX_FILE": str(self.index)}
        info = "".join(f"100644 {blob}\t{path}\0" for path, blob in sorted(entries.items()))
        self.git.run("update-index", "-z", "--index-info", input=info.encode(), env=env)
        tree = self.git.out("write-tree", env=env)
        self.index.unlink(missing_ok=True)
        return tree

    def working_tree(self) -> tuple[str, dict[str, str]]:
        files = self.working_files()
        out = self.git.out("hash-object", "-w", "--stdin-paths", input="\n".join(files).encode() + b"\n")
        entries = dict(zip(files, out.split(), strict=True))
        return self.build_tree(entries), entries

    def entries(self, treeish: str) -> dict[str, str]:
        """Regular files under ``.agent/`` in ``treeish`` (symlinks, submodules and per-clone paths left out)."""
        raw = self.git.run("ls-tree", "-r", "-z", treeish, "--", self.prefix).stdout.decode()
        out = {}
        for item in filter(None, raw.split("\0")):
            meta, _, path = item.partition("\t")
            mode, kind, blob = meta.split()
            rel = path[len(self.prefix) + 1:]
            parts = rel.split("/")
            if (kind == "blob" and mode in ("100644", "100755") and path.startswith(self.prefix + "/")
                    and not _excluded(rel) and not any(p in ("", ".", "..", ".git") for p in parts)):
                out[path] = blob
        return out

    def blobs(self, ids: list[str]) -> dict[str, bytes]:
        if not ids:
            return {}
        data = self.git.run("cat-file", "--batch", input="".join(f"{i}\n" for i in ids).encode()).stdout
        out, pos = {}, 0
        for ident in ids:
            end = data.index(b"\n", pos)
            header = data[pos:end].split()
            size = int(header[2])
            out[ident] = data[end + 1:end + 1 + size]
            pos = end + 1 + size + 1
        return out

    def seed(self) -> str | None:
        """A commit of HEAD's ``.agent/`` with a fixed author and date: the same on every clone of one HEAD."""
        if self.git.rev("HEAD") is None:
            return None
        entries = self.entries("HEAD")
        if not entries:
            return None
        tree = self.build_tree(entries)
        return self.git.out("commit-tree", tree, "-m", "agentd memory: seed from HEAD's .agent/", env=_FIXED)

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        args = [a for p in parents for a in ("-p", p)]
        return self.git.out("commit-tree", tree, *args, "-m", message)

    def write_back(self, ours: dict[str, str], merged: dict[str, str], keep: set[str]) -> None:
        """Make ``.agent/`` hold ``merged``, except the paths in ``keep`` (lock held)."""
        changed = [p for p, b in merged.items() if ours.get(p) != b and p not in keep]
        contents = self.blobs(sorted({merged[p] for p in changed}))
        for path in changed:
            atomic_write(self.git.top / path, contents[merged[path]])
        for path in ours:
            if path not in merged and path not in keep:
                (self.git.top / path).unlink(missing_ok=True)


def _log_lines(paths: AgentPaths, stems: set[str]) -> dict[str, set[str]]:
    """Every decision line of the given log families, per log stem."""
    out: dict[str, set[str]] = {s: set() for s in stems}
    for name in os.listdir(paths.dir):
        m = _LOG_RE.fullmatch(_EPOCH_SUFFIX_RE.sub("", name))
        if m and m.group(1) in out:
            out[m.group(1)].update(ln for ln in (paths.dir / name).read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip())
    return out


def _union_lines(*texts: bytes | None) -> bytes:
    """The non-blank lines of the first text, then those of the next texts not seen yet, each ending in a newline."""
    seen: set[bytes] = set()
    out = []
    for data in texts:
        for line in (data or b"").split(b"\n"):
            if line.strip() and line not in seen:
                seen.add(line)
                out.append(line + b"\n")
    return b"".join(out)


def _union_conflicted_logs(store: _Store, ours: dict[str, str], remote_tip: str, merged: dict[str, str],
                           conflicted: set[str]) -> set[str]:
    """Resolve the decision logs git reports as conflicted as the union of both sides' lines; return their paths.

    A roll never renames nor deletes a live log, so this only meets histories
    made by older versions, whose rolls renamed it: git then sees a rename or
    a modify/delete.  Keeping this clone's version would drop the lines the
    other clone appended; a decision log is a set of lines, so taking both
    sides' loses nothing, and :mod:`.normalize` then drops the lines that an
    epoch already holds.  ``merged`` is updated in place.
    """
    logs = {p for p in conflicted if p.rpartition("/")[0] == store.prefix
            and _LOG_RE.fullmatch(_EPOCH_SUFFIX_RE.sub("", p.rpartition("/")[2]))}
    if not logs:
        return logs
    theirs = store.entries(remote_tip)
    contents = store.blobs(sorted({b for p in logs for b in (ours.get(p), theirs.get(p)) if b}))
    for path in logs:
        data = _union_lines(contents.get(ours.get(path, "")), contents.get(theirs.get(path, "")))
        if data or path in ours:
            merged[path] = store.git.out("hash-object", "-w", "--stdin", input=data)
        else:
            merged.pop(path, None)
    return logs


def _newest(lines: list[str], keep: int) -> list[str]:
    def key(line: str) -> tuple[str, str]:
        try:
            d = lineformat.parse(line)
        except lineformat.LineError:
            return ("", "")
        return (d.time, snapshot_sort_key(d.snapshot) if d.snapshot else "")

    return sorted(set(lines), key=key)[-keep:]


@dataclass
class _Round:
    commit: str
    remote_tip: str | None
    received: dict[str, list[str]] = field(default_factory=dict)
    kept_ours: tuple[str, ...] = ()
    repaired: tuple[str, ...] = ()


def _merge_round(store: _Store, local_ref: str, remote_tip: str | None, host: str) -> _Round:
    """Commit the working files, merge the remote tip, write back, repair, commit (store lock held)."""
    git, paths = store.git, store.paths
    parent = git.rev(local_ref) or store.seed()
    tree, ours = store.working_tree()
    local = parent
    if parent is None or git.out("rev-parse", f"{parent}^{{tree}}") != tree:
        local = store.commit(tree, [parent] if parent else [], f"agentd memory: changes on {host}")
    assert local is not None
    result = _Round(commit=local, remote_tip=remote_tip)
    if remote_tip is not None and remote_tip != local:
        base = git.run("merge-base", local, remote_tip, ok=(0, 1)).stdout.decode().strip() or None
        if base != remote_tip:  # the remote has something this clone lacks
            if base == local:
                merged, conflicted = store.entries(remote_tip), set()
            else:
                proc = git.run("merge-tree", "--write-tree", "--name-only", "--no-messages",
                               "--allow-unrelated-histories", local, remote_tip, ok=(0, 1))
                lines = proc.stdout.decode().split("\n")
                merged = store.entries(lines[0].strip())
                conflicted = {ln for ln in lines[1:] if ln.strip()} if proc.returncode == 1 else set()
            unioned = _union_conflicted_logs(store, ours, remote_tip, merged, conflicted)
            conflicted -= unioned
            touched = {p for p in set(merged) | set(ours) if ours.get(p) != merged.get(p)}
            stems = {m.group(1) for p in touched if (m := _LOG_RE.fullmatch(_EPOCH_SUFFIX_RE.sub("", p.rsplit("/", 1)[-1])))}
            before = _log_lines(paths, stems)
            store.write_back(ours, merged, conflicted)
            repaired = {paths.rel(p) for p in normalize.normalize(paths)}
            result.repaired = tuple(sorted(repaired | {paths.rel(store.git.top / p) for p in unioned}))
            after = _log_lines(paths, stems)
            result.received = {s: sorted(after[s] - before[s]) for s in stems if after[s] - before[s]}
            result.kept_ours = tuple(sorted(p[len(store.prefix) + 1:] for p in conflicted))
            final_tree, _ = store.working_tree()
            if base == local and final_tree == git.out("rev-parse", f"{remote_tip}^{{tree}}"):
                result.commit = remote_tip  # a fast-forward
            else:
                parents = [remote_tip] if base == local else [local, remote_tip]
                result.commit = store.commit(final_tree, parents, f"agentd memory: merge on {host}")
    git.run("update-ref", local_ref, result.commit)
    return result


def _fetch(git: _Git, remote: str, branch: str) -> str | None:
    """The remote's memory branch tip after a fetch, or None when the remote has no such branch yet."""
    tracking = f"refs/remotes/{remote}/{branch}"
    proc = git.run("fetch", "--no-tags", "--quiet", remote, f"+refs/heads/{branch}:{tracking}", ok=(0, 1, 128))
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")
        if "couldn't find remote ref" in err:
            return None
        lines = err.strip().splitlines()
        raise SyncError(f"git fetch {remote} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return git.rev(tracking)


def _push(git: _Git, remote: str, branch: str, commit: str) -> str:
    """"" when pushed, else why not (a rejection or an error)."""
    proc = git.run("push", "--porcelain", "--quiet", remote, f"{commit}:refs/heads/{branch}", ok=(0, 1, 128))
    if proc.returncode == 0:
        return ""
    text = (proc.stdout + proc.stderr).decode(errors="replace").strip().splitlines()
    return text[-1] if text else f"git push exited {proc.returncode}"


def sync_memory(
    root: Path,
    *,
    remote: str = DEFAULT_REMOTE,
    branch: str = DEFAULT_BRANCH,
    retries: int = DEFAULT_RETRIES,
    backoff: float = 0.2,
    now: datetime | None = None,
) -> SyncResult:
    """Pull and push the memory through ``remote``'s ``branch`` (see the module docstring)."""
    paths = AgentPaths(Path(root))
    require_store(paths)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,100}", branch) or ".." in branch or branch.endswith((".lock", "/")):
        raise SyncError(f"branch {branch!r} is not a usable branch name")
    git = _Git(_top(paths.root))
    if git.run("remote", "get-url", remote, ok=(0, 2, 128)).returncode != 0:
        raise SyncError(f"no git remote {remote!r}: add one (git remote add {remote} URL) or name another with --remote")
    host = socket.gethostname() or "localhost"
    store = _Store(paths, git)
    ensure_git_metadata(paths)  # the union attributes must be in the work tree for merge-tree to use them
    local_ref = f"refs/heads/{branch}"
    previous = read_record(paths) or SyncRecord(remote=remote, branch=branch)
    error = ""
    with file_lock(paths.sync_lock):
        for attempt in range(1, max(1, retries) + 1):
            try:
                tip = _fetch(git, remote, branch)
                with store_lock(paths):
                    done = _merge_round(store, local_ref, tip, host)
                error = "" if done.commit == tip else _push(git, remote, branch, done.commit)
            except SyncError as exc:
                error = str(exc)
            if not error:
                _record_success(paths, previous, remote, branch, done, now)
                total = sum(len(v) for v in done.received.values())
                return SyncResult(done.commit, done.commit != tip, total, attempt, done.kept_ours, done.repaired)
            if attempt < retries:
                time.sleep(backoff * 2 ** (attempt - 1) * (0.5 + random.random()))
        stamp = format_time(now or datetime.now())
        write_json(paths.sync_state, asdict(previous) | {"remote": remote, "branch": branch,
                                                          "last_attempt": stamp, "error": error})
    raise SyncError(f"sync with {remote}/{branch} failed after {retries} attempt(s): {error}")


def _record_success(paths: AgentPaths, previous: SyncRecord, remote: str, branch: str, done: _Round,
                    now: datetime | None) -> None:
    received = {k: list(v) for k, v in previous.received.items()}
    for stem, lines in done.received.items():
        received[stem] = _newest([*received.get(stem, []), *lines], RECEIVED_KEEP)
    stamp = format_time(now or datetime.now())
    record = SyncRecord(time=stamp, remote=remote, branch=branch, commit=done.commit, last_attempt=stamp,
                        error="", received=received,
                        received_total=previous.received_total + sum(len(v) for v in done.received.values()))
    write_json(paths.sync_state, asdict(record))


def sync_after_decision(root: Path, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """``AGENTD_SYNC=after-decision``: sync now (the daemon sets it from the unit); a message, or None when off.

    Never raises: the decision is written whatever happens to the sync.
    """
    if environ.get("AGENTD_SYNC", "").strip() != "after-decision":
        return None
    remote = environ.get("AGENTD_SYNC_REMOTE") or DEFAULT_REMOTE
    branch = environ.get("AGENTD_SYNC_BRANCH") or DEFAULT_BRANCH
    try:
        return sync_memory(root, remote=remote, branch=branch).describe(remote, branch)
    except StoreError as exc:
        return f"memory not synced: {exc}"
