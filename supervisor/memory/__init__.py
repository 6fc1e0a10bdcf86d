"""The ``.agent/`` memory store: plain files written only through this package.

One module per idea: :mod:`.store` (paths, lock, durable writes),
:mod:`.ids` (snapshot and fact ids without counters), :mod:`.lineformat`
(the decision line), :mod:`.decisions` (logs and epochs), :mod:`.snapshots`,
:mod:`.gitfiles` (scope files and blob hashes), :mod:`.task` (per module and
global), :mod:`.engram`, :mod:`.facts`, :mod:`.recall`, :mod:`.flush` (for the
supervisor), :mod:`.doctor`, :mod:`.scaffold`, :mod:`.gitmeta` (git
attributes and ignores), :mod:`.sync` (``agentd sync``) and :mod:`.normalize`
(what a union merge leaves twice).
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
