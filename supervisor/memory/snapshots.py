"""Decision-triggered snapshots: ``.agent/snapshots/snapshot-<ULID>.json``.

A snapshot records when and why (the decision), the task head and state at
interruption, the files of the module's scope with their git blob hashes, and
what changed since the previous snapshot of the same module (compared only
where both scopes look, so files outside this scope are never "removed").
Ids are ULIDs (:mod:`.ids`) minted under the store lock: unique across
processes, crashes and hosts, and increasing within one store.  Old numbered
snapshots (``snapshot-014.json``) are still read.

Retention: the newest :data:`KEEP_COMPLETE` snapshots are complete; older ones
are thinned to the decision and the hashes (enough to restore any file).
Thinning is deterministic, so two hosts that thin the same snapshot write the
same bytes and their histories merge cleanly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from .gitfiles import ScopeFiles, cat_blob, matches
from .ids import snapshot_sort_key
from .store import AgentPaths, StoreError, parse_snapshot_id, write_json

KEEP_COMPLETE = 20
THIN_KEYS = ("id", "seq", "time", "module", "decision", "why", "tags", "vcs", "note", "scope", "files")


def load(paths: AgentPaths, ident: int | str) -> dict[str, Any] | None:
    """Snapshot ``ident`` (an id, or an old sequence number) as a dict; None when missing or unreadable."""
    try:
        data = json.loads(paths.snapshot(ident).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError, StoreError):
        return None
    return data if isinstance(data, dict) else None


def resolve(paths: AgentPaths, ident: str) -> str:
    """The full id for ``ident``: an exact id, or a unique prefix of a ULID id (like git's short hashes)."""
    text = ident.strip()
    try:
        canonical = parse_snapshot_id(text)
    except StoreError:
        canonical = ""
    if canonical and paths.snapshot(canonical).exists():
        return canonical
    token = text.removeprefix("snapshot-").upper()
    if len(token) >= 6 and paths.snapshots.is_dir():
        found = sorted(p.stem for p in paths.snapshots.glob(f"snapshot-{token}*.json"))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise StoreError(f"{ident!r} names {len(found)} snapshots ({', '.join(found[:3])}, ...): give more characters")
    if canonical:
        return canonical
    raise StoreError(f"{ident!r} is not a snapshot id (expected e.g. snapshot-01JDZ8Q3W5M6X7Y8Z9ABCDEFGH or snapshot-014)")


def load_id(paths: AgentPaths, ident: str) -> dict[str, Any]:
    """Snapshot by id (or unique prefix), or a :class:`StoreError` naming the file."""
    canonical = resolve(paths, ident)
    data = load(paths, canonical)
    if data is None:
        raise StoreError(f"{paths.rel(paths.snapshot(canonical))}: no such snapshot (see `agentd snapshot list`)")
    return data


def changed_files(
    previous: dict[str, str] | None,
    current: dict[str, str],
    previous_scope: Sequence[str] = (),
    scope: Sequence[str] = (),
) -> dict[str, list[str]]:
    """Added / modified / removed paths between two hash maps, where both scopes look.

    A path the previous snapshot's scope did not cover is not "added", and a
    path outside this snapshot's scope is not "removed" (an empty scope is the
    whole project).
    """
    if previous is None:
        return {"added": sorted(current), "modified": [], "removed": []}
    return {
        "added": sorted(p for p in current if p not in previous and matches(p, previous_scope)),
        "modified": sorted(p for p in current if p in previous and previous[p] != current[p]),
        "removed": sorted(p for p in previous if p not in current and matches(p, scope)),
    }


def write_snapshot(
    paths: AgentPaths,
    ident: str,
    *,
    time: str,
    module: str | None,
    decision: str,
    why: str,
    tags: tuple[str, ...],
    named_files: tuple[str, ...],
    log: str,
    task_head: str,
    state: str,
    scope: list[str],
    scope_files: ScopeFiles,
    previous: str | None,
) -> dict[str, Any]:
    """Write snapshot ``ident`` (caller holds the store lock and checked the id is unused)."""
    prev = load(paths, previous) if previous else None
    data: dict[str, Any] = {
        "id": ident,
        "time": time,
        "module": module,
        "decision": decision,
        "why": why,
        "tags": list(tags),
        "named_files": list(named_files),
        "log": log,
        "task_head": task_head,
        "state_at_interruption": state,
        "scope": scope,
        "vcs": "git" if scope_files.git else "none",
        "note": scope_files.note,
        "files": scope_files.files,
        "previous": prev["id"] if prev else None,
        "changed": changed_files(prev.get("files") if prev else None, scope_files.files,
                                 prev.get("scope") or () if prev else (), scope),
        "complete": True,
    }
    write_json(paths.snapshot(ident), data)
    return data


def thin_old(paths: AgentPaths, state: dict[str, Any], incoming: str) -> None:
    """Note ``incoming`` among this clone's newest snapshots and thin what falls out of the newest :data:`KEEP_COMPLETE`.

    ``state["recent"]`` lists the complete snapshots this clone wrote, oldest
    first, so a decide costs the same however many snapshots exist.  Each
    clone thins its own; snapshots that arrive by sync were thinned (or will
    be) by the clone that made them, with the same bytes.  Lock held.
    """
    recent = [i for i in state.get("recent") or [] if isinstance(i, str)]
    recent.append(incoming)
    while len(recent) > KEEP_COMPLETE:
        ident = recent.pop(0)
        data = load(paths, ident)
        if data is not None and data.get("complete", True):
            write_json(paths.snapshot(ident), thin(data))
    state["recent"] = recent


def thin(data: dict[str, Any]) -> dict[str, Any]:
    """The thinned form of a snapshot (a pure function of it: hosts agree byte for byte)."""
    out = {k: data[k] for k in THIN_KEYS if k in data}
    out["complete"] = False
    return out


def list_ids(paths: AgentPaths) -> list[str]:
    """Every snapshot id on disk, oldest first (numbered ids, then ULIDs by time)."""
    try:
        names = os.listdir(paths.snapshots)
    except (FileNotFoundError, NotADirectoryError):
        return []
    keyed = []
    for name in names:
        if name.startswith("snapshot-") and name.endswith(".json"):
            key = snapshot_sort_key(name[:-5])
            if key:
                keyed.append((key, parse_snapshot_id(name[:-5])))
    return [ident for _, ident in sorted(keyed)]


def file_content(paths: AgentPaths, ident: str, file: str) -> bytes:
    """Content of ``file`` as recorded by snapshot ``ident``."""
    data = load_id(paths, ident)
    file = file[2:] if file.startswith("./") else file
    blob = data.get("files", {}).get(file)
    if blob is None:
        raise StoreError(f"{data['id']} did not record {file!r} (its scope: {', '.join(data.get('scope') or ['whole project'])})")
    if data.get("vcs") != "git":
        raise StoreError(f"{data['id']} was taken outside git, so only the hash {blob} was recorded, not the content")
    try:
        return cat_blob(paths.root, blob)
    except RuntimeError as exc:
        raise StoreError(f"{data['id']}: blob {blob} of {file} is not in the repository: {exc}") from None


def render(data: dict[str, Any]) -> str:
    """Human-readable text of a snapshot."""
    lines = [f"{data.get('id')}  {data.get('time')}  module: {data.get('module') or 'global'}"]
    lines.append(f"decision: {data.get('decision', '')}")
    if data.get("why"):
        lines.append(f"why: {data['why']}")
    if not data.get("complete", True):
        lines.append("(thinned: only the decision and the file hashes are kept)")
    if data.get("task_head"):
        lines.append(f"task: {data['task_head']}")
    if data.get("state_at_interruption"):
        lines.append(f"state at interruption: {data['state_at_interruption']}")
    if data.get("note"):
        lines.append(f"note: {data['note']}")
    ch = data.get("changed")
    if ch:
        for kind in ("added", "modified", "removed"):
            if ch.get(kind):
                lines.append(f"{kind} since {data.get('previous') or 'start'}: {', '.join(ch[kind])}")
    files = data.get("files", {})
    lines.append(f"files ({len(files)}, scope: {', '.join(data.get('scope') or ['whole project'])}):")
    lines.extend(f"  {h}  {p}" for p, h in sorted(files.items()))
    return "\n".join(lines)
