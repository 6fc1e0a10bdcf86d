"""The ``.agent/`` memory store: plain files written only through this package.

One module per idea: :mod:`.store` (paths, lock, durable writes),
:mod:`.lineformat` (the decision line), :mod:`.decisions` (logs and epochs),
:mod:`.snapshots`, :mod:`.gitfiles` (scope files and blob hashes),
:mod:`.task`, :mod:`.engram`, :mod:`.facts`, :mod:`.recall`,
:mod:`.checkpoint` (for the supervisor), :mod:`.doctor`, :mod:`.scaffold`.
The briefing built from all of it is :mod:`supervisor.continuity.wakeup`.
"""

from .flush import memory_fingerprint, write_auto_checkpoint
from .decisions import record_decision
from .engram import append_note
from .facts import add_fact, check_facts, invalidate, promote
from .lineformat import LineError
from .recall import recall
from .scaffold import init_store
from .store import AgentPaths, StoreError
from .task import update_task_state

__all__ = [
    "AgentPaths",
    "LineError",
    "StoreError",
    "add_fact",
    "append_note",
    "check_facts",
    "init_store",
    "invalidate",
    "memory_fingerprint",
    "promote",
    "recall",
    "record_decision",
    "update_task_state",
    "write_auto_checkpoint",
]
