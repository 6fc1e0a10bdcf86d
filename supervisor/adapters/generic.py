"""The ``generic`` adapter: any line-based REPL agent, and the fake agent.

Everything comes from the unit's ``[agent]`` keys:

``command``        argv of the agent (never run through a shell)
``talks_to``       ``agent`` (default) or ``shell``: a shell or REPL runs what is
                   typed, so for ``shell`` agentd types nothing of its own
                   (the wakeup goes to a file, no checkpoint prompt, no
                   warnings or broadcasts); ``agentd send`` still types
``wakeup_via``     ``first-message`` (the daemon types the wakeup once the
                   agent is idle), ``file`` (the wakeup is only written to a
                   file), ``none`` (not delivered).  Whenever there is a
                   wakeup it is also written to ``<session state dir>/wakeup.md``
                   and ``AGENTD_WAKEUP_FILE`` names it, so scripts can read it.
``prompt``         regex searched in the rendered screen's cursor line (see
                   :meth:`supervisor.session.screen.Screen.cursor_line`); anchor it,
                   e.g. ``'^fake> $'``
``quiet``          seconds of silence that also end a turn (0: off); with
                   neither ``prompt`` nor ``quiet`` set, 2 s of silence
``submit_pause``   pause between the text and Enter
``paste``          how several lines are typed: ``bracketed`` (one
                   ``ESC[200~ ... ESC[201~`` paste, then Enter) or ``lines``
                   (each line + Enter)
``quit_command``   typed (plus Enter) before Ctrl-D when leaving
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar

from ..session.screen import Screen
from .base import Adapter, Blocked, ContextFigure, Keystrokes, Launch, Paste, TurnWatcher, TypingRules

if TYPE_CHECKING:  # pragma: no cover
    from ..session.pty import Session
    from ..trail.model import Trail

__all__ = ["DEBOUNCE", "DEBOUNCE_FACTOR", "DEBOUNCE_MIN", "DEFAULT_QUIET", "QUIT_PAUSE", "WAKEUP_ENV", "WAKEUP_FILE", "GenericAdapter", "ScreenWatcher"]

#: Output must have been quiet this long before a prompt on screen counts (a redraw may be under way):
#: at most DEBOUNCE; an agent whose output has shown no pause gets DEBOUNCE_MIN, one that has paused
#: inside its output (between two reads, not across a message agentd typed) DEBOUNCE_FACTOR times its
#: longest such pause (see ScreenWatcher.debounce).
DEBOUNCE = 0.15
DEBOUNCE_MIN = 0.05
DEBOUNCE_FACTOR = 2.0
#: Quiet seconds that end a turn when the unit sets neither ``prompt`` nor ``quiet``.
DEFAULT_QUIET = 2.0
#: Pause after the quit command, before Ctrl-D.
QUIT_PAUSE = 1.0
WAKEUP_FILE = "wakeup.md"
WAKEUP_ENV = "AGENTD_WAKEUP_FILE"
ENTER = b"\r"
#: How much of the clean transcript's end the generic trail reads.
TRAIL_BYTES = 8000
EOF_KEY = b"\x04"


class ScreenWatcher(TurnWatcher):
    """Turn end = the prompt on the rendered cursor line after a short quiet, or a longer quiet.

    * ``prompt``: the turn has ended when ``prompt`` is found in the cursor
      line and output has been quiet for ``debounce`` seconds.  After
      :meth:`submitted`, the agent must first have printed something (its echo
      or its answer), so the prompt still on screen from before the message
      does not count.
    * ``quiet`` (> 0): the turn has ended when nothing was printed for
      ``quiet`` seconds since the later of the last output and the submission.

    The debounce adapts to the agent (issue 19): :data:`DEBOUNCE_MIN` until
    its output shows a pause between :data:`DEBOUNCE_MIN` and the ``debounce``
    given (a redraw in steps, a spinner, a slow stream), then twice the longest
    such pause, never more than the ``debounce`` given.  A wait wakes when the debounce ends
    (:meth:`due`), not at its next tick.

    The screen is rendered only when output has been quiet for ``debounce``
    seconds and someone polls, so a busy agent costs a byte append per chunk.
    Once idle, the state stays idle until the next :meth:`submitted` (output
    while idle, e.g. a status line, does not make a turn).
    """

    def __init__(
        self,
        screen: Screen,
        prompt: re.Pattern[str] | None,
        quiet: float,
        *,
        debounce: float = DEBOUNCE,
        size: Callable[[], tuple[int, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock)
        if prompt is None and quiet <= 0:
            quiet = DEFAULT_QUIET
        self.screen = screen
        self.prompt = prompt
        self.quiet = quiet
        self.max_debounce = debounce
        self.longest_pause = 0.0  # the longest pause seen inside the agent's output, below max_debounce
        self._fed = False
        self._size = size

    @property
    def debounce(self) -> float:
        """Seconds of quiet before a prompt on screen counts (adaptive: see the class docstring)."""
        return min(self.max_debounce, max(DEBOUNCE_MIN, DEBOUNCE_FACTOR * self.longest_pause))

    def feed(self, data: bytes) -> None:
        now = self.clock()
        pause = now - self.last_output_at
        # a pause inside the output: not the start-up, not one spanning a message agentd typed, and not
        # one under the minimum (a slow stream's parking, session.parking.INTERVAL = 0.1 s, is above it: a
        # parked stream's batches are learnt as pauses: the debounce becomes twice that, within its cap)
        if (self._fed and DEBOUNCE_MIN <= pause < self.max_debounce
                and (self.submitted_at is None or self.submitted_at < self.last_output_at)):
            self.longest_pause = max(self.longest_pause, pause)
        self._fed = True
        self.last_output_at = now
        self.screen.feed(data)
        if self._wake_on_output:
            self.output_arrived()

    def due(self) -> float | None:
        answered = self.submitted_at is None or self.last_output_at > self.submitted_at
        times = [self.last_output_at + self.debounce] if self.prompt is not None and answered and self._fed else []
        if self.quiet > 0:
            times.append(max(self.last_output_at, self.submitted_at or self.last_output_at) + self.quiet)
        return min(times) if times else None

    def prompt_visible(self) -> bool:
        """Whether the prompt regex matches the rendered cursor line now (renders if needed)."""
        if self.prompt is None:
            return False
        if self._size is not None:
            self.screen.resize(*self._size())
        return self.prompt.search(self.screen.cursor_line()) is not None

    def poll(self) -> bool:
        now = self.clock()
        answered = self.submitted_at is None or self.last_output_at > self.submitted_at
        if self.prompt is not None and answered and now - self.last_output_at >= self.debounce and self.prompt_visible():
            return True
        if self.quiet > 0:
            since = max(self.last_output_at, self.submitted_at or self.last_output_at)
            if now - since >= self.quiet:
                return True
        return False


class GenericAdapter(Adapter):
    """Line-based REPL agents configured entirely from the unit (see the module docstring)."""

    kind: ClassVar[str] = "generic"

    # -- launch -------------------------------------------------------------------
    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        agent = self.spec.agent
        extra: dict[str, str] = {}
        if wakeup is not None:
            path = self.state_dir(session_id) / WAKEUP_FILE
            path.write_text(wakeup, encoding="utf-8")
            extra[WAKEUP_ENV] = str(path)
        route = agent.wakeup_route
        if wakeup is None or route == "none":
            return Launch(argv=list(agent.command), env=extra, first_input=None, wakeup_via="none")
        if route == "file":
            return Launch(argv=list(agent.command), env=extra, first_input=None, wakeup_via="file")
        return Launch(argv=list(agent.command), env=extra, first_input=wakeup, wakeup_via="first-message")

    # -- typing -------------------------------------------------------------------
    @property
    def typing(self) -> TypingRules:
        agent = self.spec.agent
        return TypingRules(submit_pause=agent.submit_pause, paste=Paste(agent.paste), enter=ENTER)

    def quit(self) -> Keystrokes:
        command = self.spec.agent.quit_command
        if command:
            return Keystrokes.of((command.encode() + ENTER, QUIT_PAUSE), (EOF_KEY, 0.0))
        return Keystrokes.of((EOF_KEY, 0.0))

    # -- watching -----------------------------------------------------------------
    def watcher(self, session: Session) -> ScreenWatcher:
        agent = self.spec.agent
        prompt = re.compile(agent.prompt) if agent.prompt else None
        watcher = ScreenWatcher(
            Screen(session.rows, session.cols),
            prompt,
            agent.quiet,
            size=lambda: (session.rows, session.cols),
        )
        self._watching = (session.session_id, watcher)
        return watcher

    def blocked(self, session: Session) -> Blocked | None:
        """A trust, login or approval screen on the rendered screen, once output went quiet (supervisor.adapters.screens)."""
        from .screens import QUIET, screen_block

        session_id, watcher = getattr(self, "_watching", (None, None))
        if watcher is None or session_id != session.session_id or watcher.clock() - watcher.last_output_at < QUIET:
            return None
        seen = (session_id, watcher.screen.fed_bytes)  # looked at once per new output (the watch asks each second)
        if getattr(self, "_block_seen", None) != seen:
            self._block_seen, self._block_kind = seen, screen_block("generic", watcher.screen)
        kind = self._block_kind
        return Blocked(kind, f"the agent shows a {kind.value} screen: answer it in `agentd attach`") if kind else None

    def trail(self, session: Session) -> Trail | None:
        """What the screen showed: the last lines and the commands seen (:func:`~supervisor.trail.generic.screen_trail`)."""
        from ..trail.generic import screen_trail

        from ..trail.generic import after_echo

        prompt = re.compile(self.spec.agent.prompt) if self.spec.agent.prompt else None
        try:
            typed = (self.state_dir(session.session_id) / WAKEUP_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            typed = None  # no wakeup this session
        return screen_trail(after_echo(session.transcript.tail(TRAIL_BYTES), typed), prompt=prompt)

    def context(self, session: Session) -> ContextFigure:
        return ContextFigure(
            used=session.transcript.estimated_tokens,
            window=self.spec.context.window,
            exact=False,
            source="transcript estimate",
        )
