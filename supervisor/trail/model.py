"""The agent's own trail as plain data: what it was asked, its plan, and every tool call in order.

A :class:`Trail` is what one session of an agent left in its own records
(Codex's rollout, Claude Code's transcript, or a generic agent's screen), read
by the parsers of this package.  It serves two readers:

* the wakeup's "Where you stopped" section (the last ask, the plan with what
  is done, the files in flight, the last commands and how they ended);
* the fragmentation report (issue 16): :attr:`Trail.actions` holds every tool
  call in order, each with the files it read and changed and, for commands,
  the exit status and the tokens the session had used when the model made
  it, so "actions to the first productive edit", re-reads, repeated commands
  and the tokens to resume are counted from the same data.

Everything here is pure: no files, no clock.  :meth:`Trail.as_dict` /
:meth:`Trail.from_dict` round-trip it through JSON.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .common import is_agentd_command

class Kind(str, enum.Enum):
    """What a tool call did, for the reader (the raw tool name is kept apart)."""

    COMMAND = "command"  # ran a command (a shell call that is not only a read)
    READ = "read"  # only read files (Read, cat, sed -n, rg ...)
    EDIT = "edit"  # changed files (apply_patch, Edit, Write ...)
    PLAN = "plan"  # wrote its plan or todo list
    OTHER = "other"  # anything else (search tools, sub-agents, ...)


class StepStatus(str, enum.Enum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"

    @classmethod
    def parse(cls, value: Any) -> StepStatus:
        text = str(value or "").strip().lower().replace("-", "_").replace(" ", "_")
        if text in ("completed", "complete", "done"):
            return cls.COMPLETED
        if text in ("in_progress", "active", "running", "doing"):
            return cls.IN_PROGRESS
        return cls.PENDING


@dataclass(frozen=True)
class PlanStep:
    text: str
    status: StepStatus


@dataclass(frozen=True)
class Action:
    """One tool call, in the order the agent made it.

    ``reads`` / ``edits`` are the files it read and changed (relative to the
    project root where they are inside it).  ``exit_code`` is the command's
    status where the agent recorded one; ``ok`` is False when the tool call
    failed (a non-zero exit, or the tool reported an error), None when unknown.
    """

    kind: Kind
    tool: str
    command: str | None = None
    exit_code: int | None = None
    ok: bool | None = None
    reads: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()
    output: str = ""  # the end of a command's output (short)
    at: str | None = None  # the agent's own timestamp, when it has one
    call_id: str | None = None
    #: Tokens the session had used when the model made this call: every request so far, input (cached or
    #: not) plus output, this call's own response included; None where the agent's record has no usage.
    tokens: int | None = None
    #: An edit's digest: its files and what it wrote (:func:`~.common.change_digest`); the same change made
    #: again has the same one.  None where the record does not say what was written.
    change: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind.value, "tool": self.tool}
        for name in ("command", "exit_code", "ok", "output", "at", "call_id", "tokens", "change"):
            value = getattr(self, name)
            if value not in (None, ""):
                data[name] = value
        if self.reads:
            data["reads"] = list(self.reads)
        if self.edits:
            data["edits"] = list(self.edits)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Action:
        return cls(kind=Kind(data.get("kind", "other")), tool=str(data.get("tool", "?")), command=data.get("command"),
                   exit_code=data.get("exit_code"), ok=data.get("ok"), reads=tuple(data.get("reads") or ()),
                   edits=tuple(data.get("edits") or ()), output=str(data.get("output") or ""), at=data.get("at"),
                   call_id=data.get("call_id"), tokens=data.get("tokens"), change=data.get("change"))


@dataclass
class Trail:
    """One session's trail (see the module docstring)."""

    source: str  # where it was read from, e.g. "codex rollout rollout-...jsonl"
    session: str | None = None  # the agent's own session/thread id
    cwd: str | None = None
    asks: list[str] = field(default_factory=list)  # the user messages, oldest first
    plan: list[PlanStep] = field(default_factory=list)  # the newest plan or todo list
    actions: list[Action] = field(default_factory=list)
    screen: list[str] = field(default_factory=list)  # generic agents: the last lines printed
    notes: list[str] = field(default_factory=list)  # what could not be read, and why
    goal: str | None = None  # Codex's goal (create_goal), when the agent set one
    goal_status: str | None = None  # its newest status (update_goal): active, complete, blocked, paused

    # -- derived views ----------------------------------------------------------------
    def commands(self, *, reads: bool = False, agentd: bool = False) -> list[Action]:
        """Commands in order; without ``reads``, those that only read files are left out; without ``agentd``,
        agentd's own (``agentd note``, ``decide``, ``task-state``: :func:`~.common.is_agentd_command`), which
        are never the agent's work."""
        kinds = (Kind.COMMAND, Kind.READ) if reads else (Kind.COMMAND,)
        return [a for a in self.actions if a.command is not None and a.kind in kinds
                and (agentd or not is_agentd_command(a.command))]

    def files_read(self) -> list[str]:
        """Files read (successfully or not known to have failed), first read first."""
        return _unique(p for a in self.actions if a.ok is not False for p in a.reads)

    def files_changed(self) -> list[str]:
        """Files changed by the agent's own edits, most recently changed last."""
        seen: dict[str, None] = {}
        for a in self.actions:
            if a.ok is False:
                continue
            for p in a.edits:
                seen.pop(p, None)
                seen[p] = None
        return list(seen)

    def last_ask(self, agentd_text: Callable[[str], bool] = lambda _t: False) -> str | None:
        """The newest user message that agentd did not type itself (its wakeup, its prompts)."""
        for text in reversed(self.asks):
            if text.strip() and not agentd_text(text):
                return text
        return None

    # -- JSON ---------------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "session": self.session, "cwd": self.cwd, "asks": list(self.asks),
                "plan": [{"text": s.text, "status": s.status.value} for s in self.plan],
                "actions": [a.as_dict() for a in self.actions], "screen": list(self.screen), "notes": list(self.notes),
                "goal": self.goal, "goal_status": self.goal_status}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trail:
        return cls(source=str(data.get("source", "?")), session=data.get("session"), cwd=data.get("cwd"),
                   asks=[str(a) for a in data.get("asks") or []],
                   plan=[PlanStep(str(s.get("text", "")), StepStatus.parse(s.get("status")))
                         for s in data.get("plan") or [] if isinstance(s, Mapping)],
                   actions=[Action.from_dict(a) for a in data.get("actions") or [] if isinstance(a, Mapping)],
                   screen=[str(s) for s in data.get("screen") or []], notes=[str(n) for n in data.get("notes") or []],
                   goal=data.get("goal"), goal_status=data.get("goal_status"))

    def mapped(self, fn: Callable[[str], str]) -> Trail:
        """The same trail with ``fn`` applied to every text the agent wrote (e.g. secret redaction)."""
        return Trail(source=self.source, session=self.session, cwd=self.cwd, asks=[fn(a) for a in self.asks],
                     plan=[replace(s, text=fn(s.text)) for s in self.plan],
                     actions=[replace(a, command=fn(a.command) if a.command is not None else None, output=fn(a.output))
                              for a in self.actions],
                     screen=[fn(s) for s in self.screen], notes=list(self.notes),
                     goal=fn(self.goal) if self.goal is not None else None, goal_status=self.goal_status)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
