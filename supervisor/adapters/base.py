"""What differs between agents, behind one small interface.

An :class:`Adapter` knows, for one kind of agent:

* how to launch a fresh session that starts from a wakeup briefing
  (:meth:`Adapter.launch`: argv, environment, and where the wakeup goes: a
  system/developer message where the agent has one, else the first user
  message);
* how to type text so that it is submitted (:meth:`Adapter.encode`: some TUIs
  treat a fast ``text + Enter`` as a paste, so text, pause, Enter; bracketed
  paste for several lines);
* how to tell that a turn has ended (:meth:`Adapter.watcher`: an event from
  the agent, a prompt on the rendered screen, or quiet output);
* how much of its context window the agent uses (:meth:`Adapter.context`:
  the agent's own records where it has them, else an estimate from the clean
  transcript);
* how to leave cleanly (:meth:`Adapter.quit`: a quit command, then EOF; the
  daemon sends signals to the process group after that).

The daemon drives adapters; adapters never start processes or timers of
their own, so each can be tested with canned output.
"""

from __future__ import annotations

import asyncio
import enum
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    from ..session.pty import Session
    from ..config.settings import Settings
    from ..config.units import UnitSpec

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
class ContextFigure:
    """Tokens in use and the window; ``exact`` when the agent reported them itself."""

    used: int
    window: int
    exact: bool
    source: str

    @property
    def ratio(self) -> float:
        return self.used / self.window if self.window else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"used": self.used, "window": self.window, "ratio": round(self.ratio, 4), "exact": self.exact, "source": self.source}


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

    def __init__(self) -> None:
        self.state = Turn.UNKNOWN
        self.turns_ended = 0
        self.last_output_at = time.monotonic()
        self.submitted_at: float | None = None
        self._changed = asyncio.Event()

    # inputs ----------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        self.last_output_at = time.monotonic()

    def submitted(self) -> None:
        self.state = Turn.BUSY
        self.submitted_at = time.monotonic()
        self._notify()

    def turn_ended(self) -> None:
        if self.state != Turn.IDLE:
            self.state = Turn.IDLE
            self.turns_ended += 1
            self._notify()

    def tick(self) -> None:
        """Re-evaluate :meth:`poll` (the daemon calls this a few times a second while someone waits)."""
        if self.state != Turn.IDLE and self.poll():
            self.turn_ended()

    def poll(self) -> bool:
        """True when the agent is, by what this watcher can see, waiting for input."""
        return False

    # waiting ----------------------------------------------------------------
    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    @property
    def idle(self) -> bool:
        return self.state == Turn.IDLE

    async def wait_idle(self, timeout: float, tick: float = 0.1) -> bool:
        """Wait until the agent is idle; False at the deadline."""
        return await self.wait_turns(0, timeout, tick)

    async def wait_turns(self, count: int, timeout: float, tick: float = 0.1) -> bool:
        """Wait until ``turns_ended`` reaches ``count``; False at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            self.tick()
            if self.turns_ended >= count and self.idle:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), min(tick, remaining))
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

    @abstractmethod
    def encode(self, text: str) -> Keystrokes:
        """Keystrokes that type ``text`` and submit it as one message."""

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

    def on_agent_event(self, session: Session, event: Mapping[str, Any]) -> list[str]:
        """An event the agent reported through ``agentd notify`` (Codex ``notify``, Claude
        Code hooks); returns what it means, any of:

        ``"turn_end"``       the agent finished a turn (its own signal; the watcher is told);
        ``"pre_compact"``    the agent is about to compact on its own (recorded; checkpoint if time);
        ``"compacted"``      the agent compacted anyway (recorded; the wakeup must follow);
        ``"inject_wakeup"``  agentd should type the wakeup at the next turn end.

        Default: nothing (the event is only logged)."""
        return []

    def failure(self, session: Session) -> str | None:
        """Why ``session`` cannot go on although its process runs (e.g. the model server is
        unreachable), or None.  The daemon then ends the session and applies the restart
        policy with this reason.  Default: never."""
        return None

    def hook_output(self, event: Mapping[str, Any], meanings: list[str], wakeup: str | None) -> str | None:
        """What ``agentd notify`` prints for the agent (hook answers such as additional
        context); ``wakeup`` is given when a meaning asks for it.  Default: nothing."""
        return None

    def state_dir(self, session_id: str) -> Path:
        """A private directory for this session's adapter files (under the state dir)."""
        path = self.settings.state_path / "sessions" / self.spec.name / session_id
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path
