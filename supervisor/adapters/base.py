"""What differs between agents, behind one small interface.

An :class:`Adapter` knows, for one kind of agent:

* how to launch a fresh session that starts from a wakeup briefing
  (:meth:`Adapter.launch`: argv, environment, and where the wakeup goes: a
  system/developer message where the agent has one, else the first user
  message);
* how text it types must look (:attr:`Adapter.typing`, plain
  :class:`TypingRules`: some TUIs treat a fast ``text + Enter`` as a paste, so
  text, pause, Enter; several lines as one bracketed paste).  The one encoder,
  :meth:`Adapter.encode`, also makes typed text safe: control characters,
  escape sequences and paste delimiters inside it are removed, so text agentd
  types can never become a second command or break out of a paste;
* how to tell that a turn has ended (:meth:`Adapter.watcher`: an event from
  the agent, a prompt on the rendered screen, or quiet output);
* how much of its context window the agent uses (:meth:`Adapter.context`:
  the agent's own records where it has them, else an estimate from the clean
  transcript);
* how to leave cleanly (:meth:`Adapter.quit`: a quit command, then EOF; the
  daemon sends signals to the process group after that).
* what the agent recorded of its own work (:meth:`Adapter.trail`: its asks,
  plan and tool calls, read from its own files; :mod:`supervisor.trail`).

The daemon drives adapters (through :class:`supervisor.adapters.driver.Driver`);
adapters never start processes or timers of their own, so each can be tested
with canned output.
"""

from __future__ import annotations

import asyncio
import enum
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    from ..session.pty import Session
    from ..trail.model import Trail
    from ..config.settings import Settings
    from ..config.units import UnitSpec

from .window import (  # noqa: F401 - part of this module's interface
    OWN_COMPACTION_AT,
    WINDOW_TOLERANCE,
    ContextFigure,
    WindowSource,
    context_window,
    own_compaction_point,
)

BRACKETED_PASTE_START = b"\x1b[200~"
BRACKETED_PASTE_END = b"\x1b[201~"


@dataclass(frozen=True)
class Keystrokes:
    """Bytes to write to the agent's terminal, each followed by a pause (seconds)."""

    steps: tuple[tuple[bytes, float], ...]

    @classmethod
    def of(cls, *steps: tuple[bytes, float]) -> Keystrokes:
        return cls(tuple(steps))

    def payload(self) -> bytes:
        return b"".join(data for data, _ in self.steps)


class Paste(str, enum.Enum):
    BRACKETED = "bracketed"  # several lines as one ESC[200~ ... ESC[201~ paste, then Enter
    LINES = "lines"  # each line + Enter (only for REPLs without bracketed paste; the unit opts in)


@dataclass(frozen=True)
class TypingRules:
    """How an agent wants text typed: the pause before Enter, and how several lines go in."""

    submit_pause: float = 0.0
    paste: Paste = Paste.BRACKETED
    enter: bytes = b"\r"


# C0 controls but TAB and LF, DEL, and C1 controls (as characters): never typed from text.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
_PASTE_MARKS = re.compile(r"\x1b\[20[01]~")


def safe_text(text: str) -> str:
    """``text`` as agentd may type it: CR and CRLF become LF; paste delimiters, ESC and every
    other control character (C0 but TAB and LF, DEL, C1) are removed.

    So a CR cannot submit a second message, Ctrl-D cannot end the agent, and
    ``ESC[201~`` cannot close a bracketed paste early.  ``agentd send --raw`` is
    the one way to type control keys.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _UNSAFE.sub("", _PASTE_MARKS.sub("", text))


@dataclass(frozen=True)
class Launch:
    """How to start one session."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    #: Text to type as the first user message once the agent is ready, or None
    #: when the wakeup already went in through argv / a system prompt.
    first_input: str | None = None
    #: Where the wakeup went, for the record: "first-message", "argv",
    #: "system-prompt", "developer-instructions", or "none".
    wakeup_via: str = "none"


@dataclass(frozen=True)
class Sandbox:
    """How the agent's own sandbox is set for a unit (``agentd status`` shows it).

    ``mode`` names what runs (``workspace-write``, ``acceptEdits``, ``bypassed``,
    ``none``); ``fenced`` when agentd's own Landlock fence is on for the unit;
    ``warning`` when the sandbox is bypassed without the fence."""

    mode: str
    bypassed: bool
    fenced: bool
    writable: tuple[str, ...] = ()
    warning: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "bypassed": self.bypassed, "fenced": self.fenced, "writable": list(self.writable),
                "warning": self.warning}


def fence_on(spec: UnitSpec) -> bool:
    """Whether the unit asks for agentd's Landlock fence in place of the agent's own sandbox
    (``[scope] fence = "on"``).  With ``"auto"`` (the default) an agent that keeps a sandbox of
    its own keeps it, and agentd watches (:func:`supervisor.scope.fencing.decide_fence`)."""
    return spec.scope.fence == "on"


class BlockKind(str, enum.Enum):
    """A screen that stops the agent until someone answers it."""

    TRUST = "trust"  # "Trust this folder?"
    LOGIN = "login"  # sign in / API key prompt
    UPDATE = "update"  # "Update available" prompt
    APPROVAL = "approval"  # a tool/command approval prompt
    ONBOARDING = "onboarding"  # first-run screens (theme, welcome)
    UNREACHABLE = "unreachable"  # the model API cannot be reached: retrying, or given up until a new message


@dataclass(frozen=True)
class Blocked:
    """A blocking screen the agent shows: what it is, what to do, and the keys that answer it
    when the unit's policy says agentd may (else None)."""

    kind: BlockKind
    todo: str
    answer: Keystrokes | None = None


class Meaning(str, enum.Enum):
    """What an event from the agent itself (``agentd notify``) means to the supervisor."""

    TURN_END = "turn_end"  # the agent finished a turn (its own signal; the watcher is told)
    PRE_COMPACT = "pre_compact"  # about to compact on its own (recorded; checkpoint if there is time)
    COMPACTED = "compacted"  # it compacted anyway (recorded; the wakeup must follow)
    OWN_COMPACTION = "own_compaction"  # with COMPACTED: on its own (auto), not a /compact a person typed
    TURN_BEGAN = "turn_began"  # a turn began (a prompt was submitted, by agentd or a person)
    INJECT_WAKEUP = "inject_wakeup"  # type the wakeup at the next turn end


def notify_argv(unit: str) -> list[str]:
    """How an agent calls back: ``agentd notify --unit UNIT`` with this very agentd."""
    agentd = Path(sys.executable).parent / "agentd"
    head = [str(agentd)] if agentd.is_file() else [sys.executable, "-m", "supervisor"]
    return [*head, "notify", "--unit", unit]


class Turn(str, enum.Enum):
    UNKNOWN = "unknown"  # nothing seen yet
    BUSY = "busy"  # a turn is running: never type now
    IDLE = "idle"  # the agent waits for input


class TurnWatcher:
    """Follows one session's turns.

    The daemon calls :meth:`feed` with every output chunk, :meth:`submitted`
    when it typed a message, and :meth:`turn_ended` when the agent itself
    reported the end of a turn (notify, hook).  Subclasses decide
    :meth:`poll` (e.g. prompt on screen plus quiet output).  Waiting is
    event-driven with a polling fallback the daemon drives through
    :meth:`tick`.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.state = Turn.UNKNOWN
        self.turns_ended = 0
        self.last_output_at = clock()
        self.submitted_at: float | None = None
        self.ended_at: float | None = None  # clock() of the last turn end (status: time since)
        self.on_change: Callable[[], None] | None = None  # told when a turn starts or ends (the change bus)
        self._changed = asyncio.Event()
        self._wake_on_output = False

    # inputs ----------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        self.last_output_at = self.clock()

    def typing(self) -> None:
        """agentd is about to type a message (before the first keystroke)."""

    def submitted(self) -> None:
        self.state = Turn.BUSY
        self.submitted_at = self.clock()
        self._notify()

    def turn_ended(self) -> None:
        if self.state != Turn.IDLE:
            self.state = Turn.IDLE
            self.turns_ended += 1
            self.ended_at = self.clock()
            self._notify()

    def tick(self) -> None:
        """Re-evaluate :meth:`poll` (the daemon calls this a few times a second while someone waits)."""
        if self.state != Turn.IDLE and self.poll():
            self.turn_ended()

    def poll(self) -> bool:
        """True when the agent is, by what this watcher can see, waiting for input."""
        return False

    def due(self) -> float | None:
        """``clock()`` time at which :meth:`poll` may turn true with no new event (a quiet spell ends), or
        None; waits wake then instead of at their next tick."""
        return None

    def next_wait(self, tick: float) -> float:
        """How long a waiter sleeps before it looks again: until :meth:`due` when it comes before ``tick``;
        with nothing due, ``tick`` or until the next output (:meth:`output_arrived`)."""
        due, now = self.due(), self.clock()
        if due is None or due <= now:
            self._wake_on_output = True
            return tick
        return min(tick, due - now + 0.002)

    def output_arrived(self) -> None:
        """Output came (a subclass's :meth:`feed` calls this): a waiter with nothing due looks again."""
        if self._wake_on_output:
            self._wake_on_output = False
            self._changed.set()
            self._changed = asyncio.Event()

    # waiting ----------------------------------------------------------------
    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        if self.on_change is not None:
            self.on_change()

    @property
    def idle(self) -> bool:
        return self.state == Turn.IDLE

    async def wait_idle(self, timeout: float, tick: float = 0.1) -> bool:
        """Wait until the agent is idle; False at the deadline."""
        return await self.wait_turns(0, timeout, tick)

    async def wait_turns(self, count: int, timeout: float, tick: float = 0.1) -> bool:
        """Wait until ``turns_ended`` reaches ``count``; False at the deadline."""
        deadline = self.clock() + timeout
        while True:
            self.tick()
            if self.turns_ended >= count and self.idle:
                return True
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            await self.wait_change(min(self.next_wait(tick), remaining))

    async def wait_change(self, timeout: float) -> None:
        """Return at the next turn change, or after ``timeout`` seconds (the polling fallback)."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass


class Adapter(ABC):
    """Everything that differs per agent kind.  One instance per unit."""

    kind: ClassVar[str] = "?"

    def __init__(self, spec: UnitSpec, settings: Settings) -> None:
        self.spec = spec
        self.settings = settings

    @abstractmethod
    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        """The argv/env of a fresh session that starts from ``wakeup`` (None: no briefing)."""

    @property
    @abstractmethod
    def typing(self) -> TypingRules:
        """How this agent wants text typed."""

    def encode(self, text: str) -> Keystrokes:
        """Keystrokes that type ``text`` (made safe by :func:`safe_text`) and submit it as one message."""
        rules = self.typing
        text = safe_text(text)
        if "\n" not in text:
            return Keystrokes.of((text.encode(), rules.submit_pause), (rules.enter, 0.0))
        if rules.paste is Paste.BRACKETED:
            return Keystrokes.of((BRACKETED_PASTE_START + text.encode() + BRACKETED_PASTE_END, rules.submit_pause),
                                 (rules.enter, 0.0))
        steps = [(line.encode() + rules.enter, rules.submit_pause) for line in text.split("\n")]
        steps[-1] = (steps[-1][0], 0.0)
        return Keystrokes(tuple(steps))

    def interrupt(self) -> Keystrokes:
        """Keystrokes that interrupt a running turn (default: Ctrl-C)."""
        return Keystrokes.of((b"\x03", 0.5))

    @abstractmethod
    def quit(self) -> Keystrokes:
        """Keystrokes that make the agent exit by itself (then the daemon signals)."""

    @abstractmethod
    def watcher(self, session: Session) -> TurnWatcher:
        """A new turn watcher for ``session``."""

    @abstractmethod
    def context(self, session: Session) -> ContextFigure:
        """The session's context use now (cheap: called on every status and tick)."""

    def outgoing(self, session: Session, text: str) -> str:
        """The message to type when agentd types ``text`` into ``session`` (a send, a task, a checkpoint
        prompt, the wakeup), before :meth:`encode`.  An agent without hooks gets here what the hooks give
        the others each turn (the generic adapter adds the constraints digest).  Default: ``text``."""
        return text

    def written(self, session: Session, path: Path) -> str | None:
        """The scope watcher saw ``session``'s agent write ``path`` (absolute): a text for agentd to type at
        the agent's next turn end (the module's facts, the first time), or None.  Agents with hooks get
        the facts from their hooks.  Default: None."""
        return None

    def on_agent_event(self, session: Session, event: Mapping[str, Any]) -> list[Meaning]:
        """An event the agent reported through ``agentd notify`` (Codex ``notify``, Claude
        Code hooks); returns what it means (see :class:`Meaning`).  Default: nothing
        (the event is only logged)."""
        return []

    def failure(self, session: Session) -> str | None:
        """Why ``session`` cannot go on although its process runs (e.g. the model server is
        unreachable), or None.  The daemon then ends the session and applies the restart
        policy with this reason.  Default: never."""
        return None

    def hook_output(self, event: Mapping[str, Any], meanings: list[Meaning], wakeup: str | None) -> str | None:
        """What ``agentd notify`` prints for the agent (hook answers such as additional
        context); ``wakeup`` is given when a meaning asks for it.  Default: nothing."""
        return None

    def own_sandbox(self) -> str | None:
        """The agent's own sandbox that its sessions keep (a short description such as
        ``"codex workspace-write"``), or None when it runs without one.  agentd's kernel
        fence cannot contain an agent that keeps a sandbox needing ``mount`` (bubblewrap),
        so with ``[scope] fence = "auto"`` such a unit is watched instead
        (:func:`supervisor.scope.fencing.decide_fence`).  Default: none."""
        return None

    def refused_writes(self, session: Session) -> list[str] | None:
        """Paths whose writes the agent's own records show refused with ``EACCES`` since the last
        call (a failed ``apply_patch`` or ``Edit``), as the agent named them; None when the adapter
        keeps no such trail, and agentd reads "Permission denied" messages in the transcript
        instead (:func:`supervisor.scope.allowset.denied_paths`).  agentd keeps those outside the
        session's fence: each is a violation known with certainty.  Default: None."""
        return None

    def trail(self, session: Session) -> Trail | None:
        """What ``session``'s agent recorded of its own work (:class:`~supervisor.trail.model.Trail`:
        its asks, its plan, every tool call), read from the agent's own files; None when this kind
        keeps none.  Blocking (reads files): the daemon calls it in a thread, also after the
        session ended.  Default: None."""
        return None

    def record(self, session: Session) -> Path | None:
        """The file in which the agent keeps its own record of ``session`` (Codex's rollout, Claude Code's
        session transcript) once the adapter knows it; None for a kind that keeps none.  The driver links
        it beside the transcript (:mod:`supervisor.trail.records`) for the event index.  Default: None."""
        return None

    def sandbox(self) -> Sandbox:
        """The agent's own sandbox for this unit (default: the agent kind has none)."""
        fenced = fence_on(self.spec)
        return Sandbox(mode="none", bypassed=False, fenced=fenced)

    def blocked(self, session: Session) -> Blocked | None:
        """A blocking screen the agent shows now (trust, login, update, an approval prompt), or None.
        Called each second: implementations render the screen only after output went quiet."""
        return None

    def state_dir(self, session_id: str) -> Path:
        """A private directory for this session's adapter files (under the state dir)."""
        path = self.settings.state_path / "sessions" / self.spec.name / session_id
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path
