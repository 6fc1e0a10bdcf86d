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

What hooks give Codex and Claude Code each turn, a REPL gets with what agentd
types (:meth:`GenericAdapter.outgoing`): the hard constraints' digest (at
most 150 tokens, :func:`~.hookctx.constraints_digest`) after each send, task,
warning and checkpoint prompt (not after the wakeup, which holds them whole,
nor after a ``/`` or ``!`` command of the REPL's own); and a module's facts
once per session, typed at the turn end after the scope watcher saw the
agent's first write in that module (:meth:`GenericAdapter.written`).  With
``talks_to = "shell"`` agentd types none of this (the shell would run it).

Its trail is its screen (:mod:`supervisor.trail.generic`): the whole clean
transcript, from after the wakeup's echo to where agentd's checkpoint prompt
was typed (the adapter notes where each message it types begins).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..session.screen import Screen
from .base import Adapter, Blocked, ContextFigure, Keystrokes, Launch, Paste, TurnWatcher, TypingRules, safe_text
from .hookctx import HookContext

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
#: How much of the clean transcript the generic trail reads at most (the whole of it, but a runaway one).
TRAIL_BYTES = 16 * 1024 * 1024
#: A message that starts so is the REPL's own command (aider's ``/run``, a shell escape): typed as it is.
REPL_COMMAND = ("/", "!")
#: What agentd's checkpoint prompt starts with (continuity/policy.py's default).
CHECKPOINT_MARK = "CHECKPOINT"
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


@dataclass
class _Run:
    """What the adapter knows of one session: its wakeup, where each message agentd typed began in the clean
    transcript (and whether it was the checkpoint prompt), the modules whose facts it was given."""

    wakeup: str | None
    hooks: HookContext
    typed: list[tuple[int, bool]] = field(default_factory=list)


class GenericAdapter(Adapter):
    """Line-based REPL agents configured entirely from the unit (see the module docstring)."""

    kind: ClassVar[str] = "generic"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._runs: dict[str, _Run] = {}

    def _run(self, session_id: str, wakeup: str | None = None) -> _Run:
        run = self._runs.get(session_id)
        if run is None:
            run = _Run(wakeup, HookContext(self.settings.project_root, self.settings.units_path))
            self._runs = {**dict(list(self._runs.items())[-1:]), session_id: run}  # this session and the one before
        return run

    # -- launch -------------------------------------------------------------------
    def launch(self, wakeup: str | None, session_id: str, env: Mapping[str, str]) -> Launch:
        agent = self.spec.agent
        extra: dict[str, str] = {}
        if wakeup is not None:
            path = self.state_dir(session_id) / WAKEUP_FILE
            path.write_text(wakeup, encoding="utf-8")
            extra[WAKEUP_ENV] = str(path)
        route = agent.wakeup_route
        self._runs.pop(session_id, None)
        self._run(session_id, wakeup if route == "first-message" else None)
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

    def outgoing(self, session: Session, text: str) -> str:
        """``text`` with the constraints digest after it (see the module docstring); where it begins in the
        clean transcript is noted (the trail ends where the checkpoint prompt began)."""
        run = self._run(session.session_id)
        run.typed.append((_text_size(session), _is_checkpoint(text, self.spec.checkpoint.prompt)))
        if not self.spec.agent.types_own_text or text == run.wakeup or text.lstrip().startswith(REPL_COMMAND):
            return text
        digest = run.hooks.prompt_context()
        if not digest or digest in text:
            return text
        if Paste(self.spec.agent.paste) is Paste.LINES:  # each line is a message there: one line more, no more
            return f"{text}  {' '.join(digest.split())}"
        return f"{text}\n\n{digest}"

    def written(self, session: Session, path: Path) -> str | None:
        """The module's facts, the first time this session writes in it (typed at its next turn end)."""
        if not self.spec.agent.types_own_text:
            return None
        text = self._run(session.session_id).hooks.path_context(path)
        if text and Paste(self.spec.agent.paste) is Paste.LINES:  # typed line by line, each line would be a message
            return " ".join(text.split())
        return text

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
        """What the screen showed (:func:`~supervisor.trail.generic.screen_trail`): the whole clean transcript,
        after the wakeup's echo, up to where agentd typed its checkpoint prompt when that was the last thing
        it typed (when the adapter did not see the session's typing, a reload since: up to the prompt's echo)."""
        from ..trail.generic import after_echo, screen_trail, until_checkpoint

        run = self._runs.get(session.session_id)
        path = Path(session.transcript.text_path)
        end = run.typed[-1][0] if run is not None and run.typed and run.typed[-1][1] else None
        notes: list[str] = []
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END) if end is None else min(end, fh.seek(0, os.SEEK_END))
                start = max(0, size - TRAIL_BYTES)
                fh.seek(start)
                raw = fh.read(size - start)
        except OSError as exc:
            return None if not path.exists() else _unreadable(path, exc)
        if start:
            notes.append(f"read the last {TRAIL_BYTES} bytes of {path.name} only ({start} before them)")
        text = raw.decode("utf-8", errors="replace")
        if run is None or not run.typed:  # where agentd typed is not known here (a reload): the prompt's echo
            text = until_checkpoint(text, self.spec.checkpoint.prompt or CHECKPOINT_MARK + " requested by agentd")
        typed = run.wakeup if run is not None else self._wakeup_file(session.session_id)
        prompt = re.compile(self.spec.agent.prompt) if self.spec.agent.prompt else None
        root = self.settings.project_root.resolve()
        trail = screen_trail(after_echo(text, typed), prompt=prompt, cwd=str(self.spec.workdir_path(root)), root=str(root))
        trail.notes.extend(notes)
        return trail

    def _wakeup_file(self, session_id: str) -> str | None:
        try:
            return (self.state_dir(session_id) / WAKEUP_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None  # no wakeup this session

    def context(self, session: Session) -> ContextFigure:
        return ContextFigure(
            used=session.transcript.estimated_tokens,
            window=self.spec.context.window,
            exact=False,
            source="transcript estimate",
        )


def _text_size(session: Session) -> int:
    """The clean transcript's size now: where the next message agentd types begins in it."""
    try:
        return os.stat(session.transcript.text_path).st_size
    except (AttributeError, OSError):
        return 0


def _is_checkpoint(text: str, prompt: str | None) -> bool:
    """Whether ``text`` is agentd's checkpoint prompt (the unit's own, or the default)."""
    head = safe_text(text).lstrip()
    return head.startswith(CHECKPOINT_MARK) or bool(prompt) and head[:80] == safe_text(prompt or "").lstrip()[:80]


def _unreadable(path: Path, exc: OSError) -> Trail:
    from ..trail.generic import SCREEN_SOURCE
    from ..trail.model import Trail

    return Trail(source=SCREEN_SOURCE, notes=[f"could not read {path.name}: {exc.strerror or exc}"])
