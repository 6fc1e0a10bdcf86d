"""Tasks: one per module (``tasks/<module>.md``) and the global one (``current-task.md``).

Each file holds the task and the agent's ``State at interruption: ...`` line.
A module's task is written by ``agentd task UNIT ...``, by a plan, and by its
agent (``agentd task-state``, the MCP ``update_task_state`` tool, through the
daemon's inbox); the global task is the file every project had before
per-module tasks, read as before.  An agent's state for a module that has no
task of its own yet is written alone (no placeholder task): the wakeup shows it
under the global task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .store import AgentPaths, atomic_write, read_text, store_lock, validate_module

STATE_PREFIX = "State at interruption:"
_STATE_RE = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*)?State at interruption:(?:\*\*)?\s*(.*)$", re.I | re.M)
_HEADING_RE = re.compile(r"#\s*(?:current task|task(?::\s*\S+)?)\s*", re.I)
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


def heading(module: str | None) -> str:
    return "# Current task" if module is None else f"# Task: {module}"


def parse_task(text: str) -> TaskInfo:
    """Split a task file into the task body and the state line (the last one: the file ends with it, and
    a line in the task that only looks like it, written before such text was refused, never wins)."""
    state = ""
    found = list(_STATE_RE.finditer(text))
    if found:
        m = found[-1]
        state = m.group(1).strip()
        text = text[: m.start()] + text[m.end() :]
    lines = [ln for ln in text.splitlines() if not _HEADING_RE.fullmatch(ln.strip())]
    return TaskInfo(body="\n".join(lines).strip(), state=state)


def read_task(paths: AgentPaths, module: str | None = None) -> TaskInfo:
    """The task of ``module`` (None: the global task); empty when its file does not exist."""
    return parse_task(read_text(paths.task(module)))


def effective_task(paths: AgentPaths, module: str | None) -> TaskInfo:
    """The module's task when it has a file, else the global task (what a snapshot records)."""
    if module is not None and paths.task(module).exists():
        return read_task(paths, module)
    return read_task(paths, None)


#: Control characters a task may not hold (tab and newline may): they would reach the file and the wakeup raw.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_task(text: str) -> str:
    """A task's text as it is stored: line ends as ``\\n`` (a CR alone ends a line too), no other control
    character.  Raises ValueError for a line that would read as the state line (it would stand in for the
    agent's real state in the wakeup)."""
    text = _CONTROL_RE.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).strip()
    for n, line in enumerate(text.splitlines(), 1):
        if _STATE_RE.fullmatch(line):
            raise ValueError(f"line {n} of the task reads as its {STATE_PREFIX!r} line ({line.strip()[:60]!r}): "
                             "that line is the agent's, set with `agentd task-state`; reword the task")
    return text


def update_task_state(
    paths: AgentPaths, state: str, task: str | None = None, *, module: str | None = None
) -> TaskInfo:
    """Set the "State at interruption" line of ``module``'s task (None: global), optionally the task too; atomic."""
    module = validate_module(module)
    state = " ".join(_CONTROL_RE.sub(" ", state).split())
    if not state:
        raise ValueError("the state at interruption is empty: say where the work stopped and what comes next")
    body = clean_task(task) if task is not None else None
    with store_lock(paths):
        current = read_task(paths, module)
        if body is None:
            # a module with no task of its own yet (the global task describes the work): its state only, never
            # a placeholder task that every wakeup would then show; the global task keeps its template
            body = current.body if current.body or module is not None else PLACEHOLDER_TASK
        middle = f"{body}\n\n" if body else ""
        atomic_write(paths.task(module), f"{heading(module)}\n\n{middle}{STATE_PREFIX} {state}\n")
    return TaskInfo(body=body, state=state)
