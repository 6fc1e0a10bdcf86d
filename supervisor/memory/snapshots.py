"""Decision-triggered snapshots: ``.agent/snapshots/snapshot-NNN.json``.

A snapshot records when and why (the decision), the task head and state at
interruption, the files of the module's scope with their git blob hashes, and
what changed since the previous snapshot of the same module.  Ids come from
``state.json`` under the store lock, so they are unique and increasing even
when several processes decide at once.

Retention: the newest :data:`KEEP_COMPLETE` snapshots are complete; older ones
are thinned to the decision and the hashes (enough to restore any file).
"""

from __future__ import annotations

import json
from typing import Any

from .gitfiles import ScopeFiles, cat_blob
from .store import AgentPaths, StoreError, parse_snapshot_id, snapshot_id, write_json

KEEP_COMPLETE = 20
THIN_KEYS = ("id", "seq", "time", "module", "decision", "why", "tags", "vcs", "note", "scope", "files")


def load(paths: AgentPaths, seq: int) -> dict[str, Any] | None:
    """Snapshot ``seq`` as a dict, or None when missing or unreadable."""
    try:
        data = json.loads(paths.snapshot(seq).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_id(paths: AgentPaths, ident: str) -> dict[str, Any]:
    """Snapshot by id (``snapshot-014``), or a :class:`StoreError` naming the file."""
    seq = parse_snapshot_id(ident)
    data = load(paths, seq)
    if data is None:
        raise StoreError(f"{paths.rel(paths.snapshot(seq))}: no such snapshot (see `agentd snapshot list`)")
    return data


def changed_files(previous: dict[str, str] | None, current: dict[str, str]) -> dict[str, list[str]]:
    """Added / modified / removed paths between two hash maps."""
    if previous is None:
        return {"added": sorted(current), "modified": [], "removed": []}
    return {
        "added": sorted(p for p in current if p not in previous),
        "modified": sorted(p for p in current if p in previous and previous[p] != current[p]),
        "removed": sorted(p for p in previous if p not in current),
    }


def write_snapshot(
    paths: AgentPaths,
    seq: int,
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
    previous_seq: int | None,
) -> dict[str, Any]:
    """Write snapshot ``seq`` (caller holds the store lock) and thin the old ones."""
    prev = load(paths, previous_seq) if previous_seq is not None else None
    data: dict[str, Any] = {
        "id": snapshot_id(seq),
        "seq": seq,
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
        "changed": changed_files(prev.get("files") if prev else None, scope_files.files),
        "complete": True,
    }
    write_json(paths.snapshot(seq), data)
    return data


def thin_old(paths: AgentPaths, state: dict[str, Any], newest: int) -> None:
    """Thin every complete snapshot older than the newest :data:`KEEP_COMPLETE` (lock held)."""
    done = int(state.get("thinned_upto", 0))
    for seq in range(done + 1, newest - KEEP_COMPLETE + 1):
        data = load(paths, seq)
        if data is not None and data.get("complete", True):
            thin = {k: data[k] for k in THIN_KEYS if k in data}
            thin["complete"] = False
            write_json(paths.snapshot(seq), thin)
        state["thinned_upto"] = seq


def list_ids(paths: AgentPaths) -> list[int]:
    """Sequence numbers of every snapshot on disk, ascending."""
    if not paths.snapshots.is_dir():
        return []
    out = []
    for p in paths.snapshots.glob("snapshot-*.json"):
        try:
            out.append(parse_snapshot_id(p.stem))
        except StoreError:
            continue
    return sorted(out)


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
