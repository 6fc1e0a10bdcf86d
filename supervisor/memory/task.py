"""``current-task.md``: the task and the agent's "State at interruption: ..." line."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .store import AgentPaths, atomic_write, read_text, store_lock

STATE_PREFIX = "State at interruption:"
_STATE_RE = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*)?State at interruption:(?:\*\*)?\s*(.*)$", re.I | re.M)
PLACEHOLDER_TASK = "(describe the current task here)"
PLACEHOLDER_STATE = "(not set)"
TASK_TEMPLATE = f"# Current task\n\n{PLACEHOLDER_TASK}\n\n{STATE_PREFIX} {PLACEHOLDER_STATE}\n"


@dataclass(frozen=True)
class TaskInfo:
    """The task text (without the state line) and the state at interruption."""

    body: str
    state: str

    @property
    def empty(self) -> bool:
        return not self.body or self.body == PLACEHOLDER_TASK

    @property
    def state_empty(self) -> bool:
        return not self.state or self.state == PLACEHOLDER_STATE

    def head(self, max_chars: int = 300) -> str:
        """The first lines of the task, for snapshots (at most ``max_chars``)."""
        text = " ".join(ln.strip() for ln in self.body.splitlines() if ln.strip())
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def parse_task(text: str) -> TaskInfo:
    """Split ``current-task.md`` into the task body and the state line."""
    state = ""
    m = _STATE_RE.search(text)
    if m:
        state = m.group(1).strip()
        text = text[: m.start()] + text[m.end() :]
    lines = [ln for ln in text.splitlines() if not re.fullmatch(r"#\s*current task\s*", ln.strip(), re.I)]
    return TaskInfo(body="\n".join(lines).strip(), state=state)


def read_task(paths: AgentPaths) -> TaskInfo:
    return parse_task(read_text(paths.current_task))


def update_task_state(paths: AgentPaths, state: str, task: str | None = None) -> TaskInfo:
    """Set the "State at interruption" line (and optionally replace the task); atomic."""
    state = " ".join(state.split())
    if not state:
        raise ValueError("the state at interruption is empty: say where the work stopped and what comes next")
    with store_lock(paths):
        current = read_task(paths)
        body = task.strip() if task is not None else (current.body or PLACEHOLDER_TASK)
        atomic_write(paths.current_task, f"# Current task\n\n{body}\n\n{STATE_PREFIX} {state}\n")
    return TaskInfo(body=body, state=state)
