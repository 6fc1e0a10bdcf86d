"""The recall probe of a respawn: what its wakeup should carry, checked against what was delivered.

After a cycle the keeper asks whether the fresh session's first message
carried what the old one knew (issue 16): the task's first line, the latest
decisions, the files in flight, the last command, the WIP commit, the hard
constraints.  Those probes are built here, from the same sections the wakeup
is built from (:mod:`.sections`), and scored by :mod:`supervisor.report.probes`
(pure).  Blocking: the keeper calls it in its thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..memory import decisions
from ..memory.store import AgentPaths
from ..memory.task import read_task
from ..report import probes as pr
from . import stopped as stopped_store
from .sections import constraints_section
from .stopped import command_item


def project_probes(root: Path, module: str, stopped: Any) -> list[pr.Probe]:
    """The probes of a respawn of a unit of ``module`` (``stopped``: where the old session stopped)."""
    paths = AgentPaths(Path(root))
    mod = None if module in (None, "", "global") else module
    own = read_task(paths, mod) if mod is not None and paths.task(mod).exists() else None
    task = own if own is not None and not own.empty else read_task(paths, None)
    first = next((ln for ln in task.body.splitlines() if ln.strip()), None) if not task.empty else None
    latest_mod = decisions.latest(paths, mod, 1)[0] if mod is not None else []
    latest_glob = decisions.latest(paths, None, 1)[0]
    trail = getattr(stopped, "trail", None)
    in_flight = list(trail.files_changed()) if trail is not None else []
    in_flight += [u.split(" ", 1)[-1].split(" -> ")[-1] for u in getattr(stopped, "uncommitted", None) or []
                  if not u.startswith("... ")]
    commands = trail.commands() if trail is not None else []  # the agent's own: agentd's are left out
    wip = (getattr(stopped, "wip", None) or {}).get("commit")
    return pr.build(task=first, module=mod, module_decision=latest_mod[-1].decision.decision if latest_mod else None,
                    global_decision=latest_glob[-1].decision.decision if latest_glob else None, in_flight=in_flight,
                    last_command=command_item(commands[-1]) if commands else None, wip=wip,
                    constraints=constraints_section(paths, []).items)


def recall(root: Path, unit: str, module: str, delivered: str | None) -> pr.Recall:
    """Probe recall of the session just started from ``delivered`` (blocking)."""
    stopped = stopped_store.load(Path(root), unit)
    return pr.check(project_probes(root, module, stopped), delivered)
