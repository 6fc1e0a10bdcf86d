"""``agentd sync``: share the ``.agent/`` store between clones through a git remote.

The memory travels on a branch of its own, ``agentd-memory`` by default,
never on the branch the agent works on: a sync must not merge anybody's code
into a working tree, must work whatever branch each clone has checked out,
and must never touch HEAD, the index or any file outside ``.agent/``.  The
branch holds only ``.agent/`` (without ``local/``); it is built with git
plumbing and a private index.

One sync, under ``local/sync.lock`` (one sync per clone at a time):

1. ``git fetch`` the remote's memory branch (no lock held: decides go on),
   in a private git directory where nothing of the project's ``.git/config``
   is in force (:mod:`.gittransport`).
2. Under the store lock: commit the working ``.agent/`` files onto this
   clone's ``refs/heads/agentd-memory``; merge the remote tip into it with
   libgit2 (the ``union`` attributes of ``.agent/.gitattributes`` apply, so
   appends from both sides are kept and never conflict; no merge driver a
   config names runs, and files the remote carries that agentd does not write
   never reach ``.agent/``); write
   the merged files back into ``.agent/``; repair what union merges can
   leave (:mod:`.normalize`); commit the result with both parents.  A file
   both sides rewrote (a task file, say) keeps this clone's version; the
   other side's stays in the history, and the result names the file.
   Decision logs never get there: an epoch roll never renames nor deletes
   the live log (:func:`.decisions._maybe_roll`), so git merges rolls and
   appends by union; a decision log that git still reports as conflicted
   (a history written by an older version, whose rolls renamed the log) is
   resolved as the union of both sides' lines.
3. ``git push`` the new commit (the same private git directory).  A rejection (another clone pushed first)
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
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import lineformat, normalize
from .gitmeta import ensure_git_metadata
from .ids import snapshot_sort_key
from .synctree import EPOCH_SUFFIX_RE, SyncTree, memory_file  # noqa: F401 - memory_file: what sync carries
from .store import AgentPaths, StoreError, file_lock, format_time, require_store, store_lock, write_json

if TYPE_CHECKING:
    from .gitrepo import Repo

DEFAULT_REMOTE = "origin"
DEFAULT_BRANCH = "agentd-memory"
DEFAULT_RETRIES = 5
RECEIVED_KEEP = 5
_LOG_RE = re.compile(r"(decisions(?:-.+)?)\.log")


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
    skipped: tuple[str, ...] = ()  # files in .agent/ that agentd does not write: never synced

    def describe(self, remote: str, branch: str) -> str:
        text = f"synced with {remote}/{branch} at {self.commit[:12]}: received {self.received} decision(s)"
        text += ", pushed" if self.pushed else ", nothing to push"
        if self.attempts > 1:
            text += f" (after {self.attempts} attempts)"
        if self.kept_ours:
            text += f"; both sides changed {', '.join(self.kept_ours)}: kept this clone's version (the other is in {remote}/{branch})"
        if self.skipped:
            shown = ", ".join(self.skipped[:10]) + (f" (+{len(self.skipped) - 10} more)" if len(self.skipped) > 10 else "")
            text += (f"; left out {len(self.skipped)} file(s) in .agent/ that agentd does not write: {shown} "
                     "(sync carries only agentd's memory files)")
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


def _log_lines(paths: AgentPaths, stems: set[str]) -> dict[str, set[str]]:
    """Every decision line of the given log families, per log stem."""
    out: dict[str, set[str]] = {s: set() for s in stems}
    for name in os.listdir(paths.dir):
        m = _LOG_RE.fullmatch(EPOCH_SUFFIX_RE.sub("", name))
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


def _union_conflicted_logs(store: SyncTree, ours: dict[str, str], remote_tip: str, merged: dict[str, str],
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
            and _LOG_RE.fullmatch(EPOCH_SUFFIX_RE.sub("", p.rpartition("/")[2]))}
    if not logs:
        return logs
    theirs = store.entries(remote_tip)
    contents = store.blobs(sorted({b for p in logs for b in (ours.get(p), theirs.get(p)) if b}))
    for path in logs:
        data = _union_lines(contents.get(ours.get(path, "")), contents.get(theirs.get(path, "")))
        if data or path in ours:
            merged[path] = str(store.repo.git.create_blob(data))
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
    skipped: tuple[str, ...] = ()


def _merge_round(store: SyncTree, local_ref: str, remote_tip: str | None, host: str) -> _Round:
    """Commit the working files, merge the remote tip, write back, repair, commit (store lock held)."""
    import pygit2

    paths, repo = store.paths, store.repo
    parent = store.rev(local_ref) or store.seed()
    tree, ours, skipped = store.working_tree()
    local = parent
    if parent is None or store.tree_of(parent) != tree:
        local = store.commit(tree, [parent] if parent else [], f"agentd memory: changes on {host}")
    assert local is not None
    result = _Round(commit=local, remote_tip=remote_tip, skipped=tuple(skipped))
    if remote_tip is not None and remote_tip != local:
        found = repo.git.merge_base(pygit2.Oid(hex=local), pygit2.Oid(hex=remote_tip))
        base = str(found) if found is not None else None
        if base != remote_tip:  # the remote has something this clone lacks
            if base == local:
                merged, conflicted = store.entries(remote_tip), set()
            else:
                merged, conflicted = store.merge(local, remote_tip)
            unioned = _union_conflicted_logs(store, ours, remote_tip, merged, conflicted)
            conflicted -= unioned
            conflicted &= set(ours) | set(store.entries(remote_tip))  # only memory files are kept or reported
            touched = {p for p in set(merged) | set(ours) if ours.get(p) != merged.get(p)}
            stems = {m.group(1) for p in touched if (m := _LOG_RE.fullmatch(EPOCH_SUFFIX_RE.sub("", p.rsplit("/", 1)[-1])))}
            before = _log_lines(paths, stems)
            store.write_back(ours, merged, conflicted)
            repaired = {paths.rel(p) for p in normalize.normalize(paths)}
            result.repaired = tuple(sorted(repaired | {paths.rel(repo.top / p) for p in unioned}))
            after = _log_lines(paths, stems)
            result.received = {s: sorted(after[s] - before[s]) for s in stems if after[s] - before[s]}
            result.kept_ours = tuple(sorted(p[len(store.prefix) + 1:] for p in conflicted))
            final_tree, _, _ = store.working_tree()
            if base == local and final_tree == store.tree_of(remote_tip):
                result.commit = remote_tip  # a fast-forward
            else:
                parents = [remote_tip] if base == local else [local, remote_tip]
                result.commit = store.commit(final_tree, parents, f"agentd memory: merge on {host}")
    repo.git.references.create(local_ref, pygit2.Oid(hex=result.commit), force=True)
    return result


def _open(paths: AgentPaths) -> Repo:
    from .gitrepo import RepoError, open_repo

    try:
        repo = open_repo(paths.root)
    except RepoError as exc:
        raise SyncError(str(exc)) from None
    if repo is None:
        raise SyncError(f"{paths.root} is not in a git work tree: agentd sync shares .agent/ through git "
                        "(git init, git remote add origin URL)")
    return repo


# -- the libgit2 steps: each runs in the process's git helper when it has one (see sync_memory) --

def _remote(root: Path, remote: str) -> Any:
    """What the transport needs of the repository (gittransport.Remote)."""
    from .gittransport import remote_of

    return remote_of(_open(AgentPaths(root)), remote)


def _haves(root: Path, refs: tuple[str, ...]) -> list[str]:
    """Commits both sides may share (the fetch then sends only what is new)."""
    paths = AgentPaths(root)
    store = SyncTree(paths, _open(paths))
    return [c for c in (store.rev(ref) for ref in refs) if c]


def _round(root: Path, local_ref: str, tracking: str, tip: str | None, host: str) -> _Round:
    """The project's ``refs/remotes/<remote>/<branch>`` follows the fetched tip; then one merge round."""
    import pygit2

    paths = AgentPaths(root)
    store = SyncTree(paths, _open(paths))
    if tip is not None:
        store.repo.git.references.create(tracking, pygit2.Oid(hex=tip), force=True)
    return _merge_round(store, local_ref, tip, host)


def sync_memory(
    root: Path,
    *,
    remote: str = DEFAULT_REMOTE,
    branch: str = DEFAULT_BRANCH,
    retries: int = DEFAULT_RETRIES,
    backoff: float = 0.2,
    now: datetime | None = None,
) -> SyncResult:
    """Pull and push the memory through ``remote``'s ``branch`` (see the module docstring).

    Its libgit2 work (reading the repository, the merge rounds) runs in the
    process's git helper when it has one (:mod:`.gitworker`: the daemon's
    after-decision sync, ``agentd sync``), so a FIFO an agent planted in
    ``.git/`` is an error after a while, never a sync that hangs for ever.
    """
    from .gitfiles import RepoError
    from .gitrepo import GitError
    from .gittransport import Transport, TransportError
    from .gitworker import run

    paths = AgentPaths(Path(root))
    require_store(paths)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,100}", branch) or ".." in branch or branch.endswith((".lock", "/")):
        raise SyncError(f"branch {branch!r} is not a usable branch name")
    for where in (paths.dir, paths.tasks_dir, paths.facts_dir, paths.snapshots):
        if where.is_symlink():  # the merge writes there: through a link, it would write wherever it points
            raise SyncError(f"{paths.rel(where)} is a symlink: agentd sync writes only into a real directory "
                            "(replace the link by the directory it should be)")
    try:
        transport = Transport(run(_remote, paths.root, remote, what="agentd sync: reading the repository"))
    except (TransportError, RepoError) as exc:
        raise SyncError(str(exc)) from None
    host = socket.gethostname() or "localhost"
    ensure_git_metadata(paths)  # the union attributes must be in the work tree for the merge to use them
    (paths.local / "sync.index").unlink(missing_ok=True)  # what a sync of an older version, killed, left
    local_ref, tracking = f"refs/heads/{branch}", f"refs/remotes/{remote}/{branch}"
    previous = read_record(paths) or SyncRecord(remote=remote, branch=branch)
    error = ""
    with file_lock(paths.sync_lock):
        try:
            transport.__enter__()
        except TransportError as exc:
            raise SyncError(str(exc)) from None
        try:
            for attempt in range(1, max(1, retries) + 1):
                try:
                    tip = transport.fetch(branch, run(_haves, paths.root, (local_ref, tracking),
                                                      what="agentd sync: reading its branch"))
                    with store_lock(paths):
                        done = run(_round, paths.root, local_ref, tracking, tip, host,
                                   what="agentd sync: merging the memory")
                    error = "" if done.commit == tip else transport.push(branch, done.commit)
                except RepoError as exc:  # the repository blocks (a FIFO): trying again would block again
                    error = str(exc)
                    break
                except (SyncError, TransportError, GitError, OSError, KeyError, ValueError) as exc:
                    error = str(exc)
                if not error:
                    _record_success(paths, previous, remote, branch, done, now)
                    total = sum(len(v) for v in done.received.values())
                    return SyncResult(done.commit, done.commit != tip, total, attempt, done.kept_ours, done.repaired,
                                      done.skipped)
                if attempt < retries:
                    time.sleep(backoff * 2 ** (attempt - 1) * (0.5 + random.random()))
        finally:
            transport.__exit__(None, None, None)
        stamp = format_time(now or datetime.now())
        write_json(paths.sync_state, asdict(previous) | {"remote": remote, "branch": branch,
                                                          "last_attempt": stamp, "error": error})
    raise SyncError(f"sync with {remote}/{branch} failed after {attempt} attempt(s): {error}")


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
