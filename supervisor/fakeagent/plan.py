"""The fake agent in a plan: scripted per task (``--plan-script FILE``).  A TEST DOUBLE, not an agent.

Every text agentd writes about a plan's task starts with (or, in a wakeup,
contains) ``[plan P / task T / attempt N of M]`` (supervisor.plan.policy.header).
A message holding that line is handled here: the script says what to do for
task ``T``::

    {"tasks": {
       "a1": {"attempts": [["put src/a/one.txt one", "claim"]]},
       "a2": {"attempts": [["put src/a/two.txt broken", "claim"], ["put src/a/two.txt fixed", "claim"]]},
       "a3": {"every": ["work 40"]}
    }}

``attempts[N-1]`` runs for attempt ``N`` (the last one again beyond the
list); ``every`` runs on every message about the task (a spinning agent:
work lines, no edit, no claim).  Actions:

``put PATH TEXT``  write TEXT and a newline to PATH (directories made), replacing it
``claim``          say ``TASK DONE: T`` as the last line of the reply, and report it
                   the way Claude Code's Stop hook does: ``agentd notify`` with
                   ``{"hook_event_name": "Stop", "last_assistant_message": ...}``
``claim-channel``  claim through the memory channel: ``agentd task-state --done TEXT``
anything else      a fake agent command (``work N``, ``run ...``, ``sleep S`` ...)

A message about a task the script does not name is an ordinary task message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .terminal import out

HEADER_RE = re.compile(r"\[plan (?P<plan>\S+) / task (?P<task>\S+) / attempt (?P<attempt>\d+) of (?P<max>\d+)\]")


class PlanScript:
    """What the fake agent does for each task of a plan (see the module docstring)."""

    def __init__(self, path: str, agentd: Callable[[], list[str]]) -> None:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        self.tasks: dict[str, dict[str, Any]] = data.get("tasks", {})
        self.agentd = agentd  # how to run the agentd CLI (agent.agentd_argv)

    def handle(self, agent: Any, text: str) -> bool:
        """Act on ``text`` if it is about a scripted task; False when it is not."""
        m = HEADER_RE.search(text)
        if m is None or m.group("task") not in self.tasks:
            return False
        task, attempt = m.group("task"), int(m.group("attempt"))
        script = self.tasks[task]
        if "every" in script:
            actions = script["every"]
        else:
            attempts = script.get("attempts") or [[]]
            actions = attempts[min(attempt, len(attempts)) - 1]
        out(f"working on task {task}, attempt {attempt}\n")
        for action in actions:
            name, _, rest = action.partition(" ")
            if name == "put":
                path, _, content = rest.partition(" ")
                target = Path(path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content + "\n", encoding="utf-8")
                out(f"wrote {path}\n")
            elif name == "claim":
                self.claim(task, attempt)
            elif name == "claim-channel":
                self.claim_channel(task, attempt)
            else:
                agent.run_command(action)
        return True

    def claim_channel(self, task: str, attempt: int) -> None:
        try:
            result = subprocess.run([*self.agentd(), "task-state", "--done", f"task {task} attempt {attempt} finished"],
                                    stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out(f"claim not made: {exc}\n")
            return
        out(f"{result.stdout.strip() or result.stderr.strip()}\n")

    def claim(self, task: str, attempt: int) -> None:
        message = f"I finished task {task} (attempt {attempt}).\nTASK DONE: {task}"
        out(message + "\n")
        unit = os.environ.get("AGENTD_UNIT", "")
        event = json.dumps({"hook_event_name": "Stop", "last_assistant_message": message})
        try:
            result = subprocess.run([*self.agentd(), "notify", "--unit", unit, event], stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out(f"claim not reported: {exc}\n")
            return
        if result.returncode != 0 or result.stderr.strip():
            out(f"claim not reported: {(result.stderr.strip().splitlines() or ['exit %d' % result.returncode])[-1]}\n")
