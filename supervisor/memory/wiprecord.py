"""The WIP commits agentd made, recorded where no agent can write: the truth about ``refs/agentd/wip/``.

The WIP refs live in ``.git/``, which an agent inside its fence can write
(its commits need it): it can delete another unit's refs, move them to a
commit of its own making, or plant ``refs/agentd/wip/<unit>/999`` so that
thinning (newest 20 by number) drops the real ones.  A commit id cannot be
forged (it is the hash of the commit), so agentd records the id of every WIP
commit it makes, per unit, in its state directory
(``<state>/wip/<unit>.jsonl``, one JSON line each: number, commit, time):
hidden from every fenced agent and outside every agent's writable roots.

:mod:`.wip` lists, restores and thins by this record: a recorded commit is
agentd's whatever its ref says now (a deleted ref is made again, a moved one
is put back); a ref under ``refs/agentd/wip/`` that the record does not hold
is *foreign* (listed as such, never restored nor thinned by agentd).  Objects
an agent removed from ``.git/objects`` (``git gc --prune=now`` after deleting
the refs) are gone: the record then says the commit is missing.

:func:`record_in` tells this process where the record is (the daemon at its
start, the CLI before ``agentd wip``); without it the refs themselves are the
record (a library use with no state directory).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..durable import append_jsonl, atomic_write, read_jsonl

DIR = "wip"
_RECORD: Path | None = None


@dataclass(frozen=True)
class Entry:
    """One WIP commit agentd made."""

    number: int
    commit: str
    time: str = ""


def record_in(state_dir: Path | None) -> None:
    """Where this process keeps the record (``<state_dir>/wip/``); None: no record (the refs are trusted)."""
    global _RECORD
    _RECORD = Path(state_dir) / DIR if state_dir is not None else None


def where() -> Path | None:
    """The record's directory in this process, or None."""
    return _RECORD


def path(record: Path, unit: str) -> Path:
    return Path(record) / f"{unit}.jsonl"


def read(record: Path, unit: str) -> list[Entry]:
    """The unit's recorded WIP commits, oldest first (a torn or malformed line is skipped)."""
    out = []
    for item in read_jsonl(path(record, unit)):
        try:
            number, commit = int(item["number"]), str(item["commit"])
        except (KeyError, TypeError, ValueError):
            continue
        if len(commit) == 40 and all(c in "0123456789abcdef" for c in commit):
            out.append(Entry(number, commit, str(item.get("time") or "")))
    return out


def units(record: Path) -> list[str]:
    try:
        return sorted(p.name.removesuffix(".jsonl") for p in Path(record).glob("*.jsonl"))
    except OSError:
        return []


def add(record: Path, unit: str, entry: Entry) -> None:
    os.makedirs(record, mode=0o700, exist_ok=True)
    append_jsonl(path(record, unit), asdict(entry))


def keep(record: Path, unit: str, entries: list[Entry]) -> None:
    """Rewrite the unit's record as ``entries`` (atomic)."""
    os.makedirs(record, mode=0o700, exist_ok=True)
    atomic_write(path(record, unit), "".join(json.dumps(asdict(e)) + "\n" for e in entries), mode=0o600)
