"""Probe recall: did the new session receive what it needs to go on? A containment check, no model.

At each respawn the probes are listed from what agentd knows:

* ``task``: the task's first line (the module's own task, else the global one);
* ``decision (MODULE)`` and ``decision (global)``: the latest decision of each log;
* ``file in flight: PATH``: each file the old session changed (its trail), or
  was left uncommitted in its scope;
* ``last command``: the old session's real last command, from its trail (never
  agentd's own ``agentd note``/``decide``/``task-state``), as "Where you
  stopped" shows it: the command and how it ended (``→ exit N``), so that
  agentd's own command in the wakeup, or the words somewhere else, do not
  count;
* ``WIP commit``: the commit that saved its uncommitted work (12 characters);
* ``constraint N``: every hard constraint line.

Each probe is a needle looked for in the text the new session actually
received (:func:`delivered_text`: what the adapter typed as the first message,
or the wakeup file it handed to the agent: Codex's developer instructions,
Claude Code's appended system prompt), with whitespace folded.  ``recall =
found / probes``; the missing probes are named.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The longest part of a text used as a needle (a briefing may cut a long item after its start).
NEEDLE_CHARS = 80


@dataclass(frozen=True)
class Probe:
    name: str
    needles: tuple[str, ...]  # all must be found


@dataclass
class Recall:
    found: int
    probes: int
    missing: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # every probe's name, in order

    @property
    def recall(self) -> float:
        return round(self.found / self.probes, 4) if self.probes else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"recall": self.recall, "found": self.found, "probes": self.probes, "missing": list(self.missing),
                "checked": list(self.checked)}


def fold(text: str) -> str:
    return " ".join(str(text).split())


def needle(text: str, limit: int = NEEDLE_CHARS) -> str:
    return fold(text)[:limit].strip()


def build(*, task: str | None = None, module: str | None = None, module_decision: str | None = None,
          global_decision: str | None = None, in_flight: Sequence[str] = (), last_command: str | None = None,
          wip: str | None = None, constraints: Sequence[str] = ()) -> list[Probe]:
    """The probes of one respawn (see the module docstring); empty parts give no probe."""
    probes: list[Probe] = []
    if task and needle(task):
        probes.append(Probe("task", (needle(task),)))
    if module and module_decision and needle(module_decision):
        probes.append(Probe(f"decision ({module})", (needle(module_decision),)))
    if global_decision and needle(global_decision):
        probes.append(Probe("decision (global)", (needle(global_decision),)))
    for path in dict.fromkeys(p for p in in_flight if p.strip()):
        probes.append(Probe(f"file in flight: {path}", (path,)))
    if last_command and fold(last_command):
        probes.append(Probe("last command", (fold(last_command),)))  # whole: the command and how it ended
    if wip:
        probes.append(Probe("WIP commit", (wip[:12],)))
    for number, line in enumerate((c for c in constraints if needle(c)), 1):
        probes.append(Probe(f"constraint {number}", (needle(line.lstrip("-*0123456789. ")),)))
    return probes


def check(probes: Sequence[Probe], text: str | None) -> Recall:
    """How many probes ``text`` contains (whitespace folded), and which are missing."""
    hay = fold(text or "")
    missing = [p.name for p in probes if not all(n in hay for n in p.needles)]
    return Recall(found=len(probes) - len(missing), probes=len(probes), missing=missing, checked=[p.name for p in probes])


def delivered_text(launch: Any) -> str | None:
    """What the adapter handed the new session: its first message, else the wakeup file named in its
    environment (``*WAKEUP_FILE``, the file Claude Code appends to its system prompt and Codex's
    developer instructions hold); None when it delivered nothing."""
    if launch is None:
        return None
    first = getattr(launch, "first_input", None)
    if first is not None:
        return str(first)
    env: Mapping[str, str] = getattr(launch, "env", None) or {}
    for key, value in env.items():
        if key.endswith("WAKEUP_FILE") and getattr(launch, "wakeup_via", "none") != "none":
            try:
                return Path(os.path.expanduser(value)).read_text(encoding="utf-8")
            except OSError:
                return None
    return None
