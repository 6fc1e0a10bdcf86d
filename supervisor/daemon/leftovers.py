"""What a daemon that dies leaves behind, and how the next one cleans it up.

When the daemon dies, the last handle to each PTY master closes and the
kernel sends SIGHUP to each agent's session, so most agents die with it.
Agents that ignore SIGHUP, and anything they started in a new session, would
survive.  The next daemon, before it starts any unit:

1. ends everything left in the containment (:func:`end_contained`): in cgroup
   mode every session group the crashed daemon left below the project's
   parent group (every descendant was born inside, ``setsid`` or not); in
   subreaper mode every process whose environment names this project
   (``AGENTD_ROOT``); and removes the private temp directories of the
   fenced sessions;
2. reads ``agents.json`` (every running session's pid, start time, process
   group and recorded tree, plus the checkpoint in progress, if any) and
   finishes each interrupted checkpoint (an ``[auto]`` note when the agent
   had not written its own), so nothing the cycle owed is lost;
3. ends whatever of the recorded processes still runs (checked by start time,
   so a reused pid is never hit), through the one
   :func:`~supervisor.session.process.end_processes`: a second net for the
   rare process step 1 cannot see.

Then :func:`prepare_memory` readies the project's memory: the git helper the
daemon's git work runs in, the record of the WIP commits it makes, the
``.agent/`` scaffold, and the index a WIP save killed mid-way left behind.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..continuity.cycle import ModuleMemory, finish_interrupted
from ..continuity.records import append_history
from ..adapters.confine import tmp_prefix
from ..durable import write_json
from ..session.cgroup import project_key
from ..session.containment import Containment
from ..session.process import ProcessRecord, end_processes, group_members, live_tree
from ..session.transcript import read_tail

if TYPE_CHECKING:  # pragma: no cover
    from .unit import UnitSupervisor

log = structlog.get_logger("agentd")


class AgentsFile:
    """``<state>/agents.json``: the running sessions, for the next daemon."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "agents.json"

    @staticmethod
    def snapshot(units: Iterable[UnitSupervisor]) -> dict[str, Any]:
        """What to record of every running session (cheap; on the loop)."""
        data = {}
        for unit in units:
            driver = unit.driver
            if driver is not None:
                data[unit.name] = {**driver.record(), "module": unit.spec.module,
                                   "checkpoint": unit.checkpoint_marker}
        return data

    def write(self, data: dict[str, Any]) -> None:
        """Replace the file with ``data`` (atomic; blocking: run it in a thread)."""
        write_json(self.path, data, mode=0o600, indent=None)

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


async def end_contained(containment: Containment, state_dir: Path) -> list[str]:
    """End what a crashed daemon left in the containment; remove its sessions' temp directories."""
    ended = await containment.cleanup_leftovers()
    if ended:
        log.warning("containment_leftovers_ended", mode=containment.mode.value, ended=ended)
    for stale in Path(tempfile.gettempdir()).glob(tmp_prefix(project_key(state_dir)) + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    return ended


async def end_leftovers(agents: AgentsFile, state_dir: Path, root: Path, timeout: float,
                        clock: Callable[[], float]) -> int:
    """Finish interrupted checkpoints and end the processes a previous daemon left; how many."""
    procs = []
    for unit, rec in agents.read().items():
        if not isinstance(rec, dict):
            continue
        marker = rec.get("checkpoint")
        if isinstance(marker, dict):
            try:
                tail = read_tail(Path(str(marker.get("transcript", ""))), 4000)
            except OSError:
                tail = ""
            record = await asyncio.to_thread(finish_interrupted, unit, marker,
                                             ModuleMemory(root, rec.get("module") or unit), tail)
            await asyncio.to_thread(append_history, state_dir, record)
            log.warning("checkpoint_interrupted", unit=unit, flush=record.flush)
        records = [ProcessRecord(int(p), float(t)) for p, t in rec.get("tree", [])]
        found = live_tree(records)
        group = group_members(int(rec.get("pgid", 0)), float(rec.get("create_time", 0)))
        found.extend(p for p in group if p.pid not in {f.pid for f in found})
        if found:
            log.warning("leftover_agents", unit=unit, session=rec.get("session"), pids=[p.pid for p in found])
            procs.extend(found)
    if procs:
        await end_processes(procs, timeout, clock=clock)
        log.info("leftover_agents_ended", count=len(procs))
    agents.remove()
    return len(procs)


def prepare_memory(root: Path, state_path: Path) -> None:
    """Ready the project's memory for the daemon (blocking; see the module): never fatal, each failure logged."""
    from ..memory import init_store
    from ..memory.gitworker import isolate
    from ..memory.wip import clean_leftovers
    from ..memory.wiprecord import record_in
    from ..scope.fencing import hidden_state

    isolate()  # the daemon's git work runs in a helper it can kill (a FIFO in .git/ would block libgit2)
    record_in(hidden_state(state_path))  # the WIP commits it makes, where no agent writes
    try:
        init_store(root)
    except OSError as exc:
        log.error("memory_store_unavailable", error=str(exc))
    for path in clean_leftovers(root):  # a WIP save of an older version, killed mid-way, left its index
        log.info("wip_leftover_removed", path=str(path))
