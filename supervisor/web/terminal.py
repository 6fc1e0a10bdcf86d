"""The unit page's live terminal: one unit's redacted output, followed across respawns.

The same stream ``agentd attach`` shows (:mod:`supervisor.control.attach`):
the session's *output listener* gets exactly the bytes the transcript appends
to the ``.log``, after redaction, so a secret the agent prints reaches the
browser as ``[REDACTED]``.  It is read-only: nothing typed in the browser
reaches the agent (the page has the ``send`` box for that).

:class:`TerminalFeed` needs only the attach server's
:class:`~supervisor.control.attach.AttachTarget` Protocol: the unit's current
session, and a wait for the next one.  It hands what it sees to two
callbacks: ``on_session(info)`` when it starts following a session (or has
none: ``info["session"]`` is None) and ``on_data(bytes)`` for output (the
first chunk of each session is its opening, as for attach: the recent lines,
or a full-screen agent's current screen repainted,
:mod:`supervisor.control.repaint`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ..control.attach import AttachTarget
from ..control.framing import ControlError
from ..control.repaint import Opening

#: Seconds between checks that the followed session is still the unit's current one.
POLL = 0.25
#: Seconds of one wait for a next session (the feed waits again as long as the page is open).
WAIT = 30.0


class TerminalFeed:
    """Follow ``unit``'s sessions until cancelled."""

    def __init__(self, target: AttachTarget, unit: str, on_session: Callable[[dict[str, Any]], None],
                 on_data: Callable[[bytes], None]) -> None:
        self.target, self.unit = target, unit
        self.on_session, self.on_data = on_session, on_data
        self.session: Any = None

    def _current(self) -> Any:
        try:
            session = self.target.current_session(self.unit)
        except ControlError:
            return None
        return session if session is not None and getattr(session, "exit", None) is None else None

    async def run(self) -> None:
        self.target.viewer_attached(self.unit, +1)
        try:
            previous: Any = None
            while True:
                session = self._current()
                if session is None or session is previous:
                    self.on_session({"unit": self.unit, "session": None})
                    session = await self.target.wait_session(self.unit, previous, WAIT)
                    if session is None:
                        continue
                await self._follow(session)
                previous = session
        finally:
            self.target.viewer_attached(self.unit, -1)

    async def _follow(self, session: Any) -> None:
        self.session = session
        self.on_session({"unit": self.unit, "session": session.session_id, "pid": session.pid,
                         "rows": session.rows, "cols": session.cols})
        listener = Opening(session.transcript.log_path, session.rows, session.cols, self.on_data)
        session.add_output_listener(listener)
        painting = asyncio.ensure_future(listener.run())
        try:
            while True:
                await asyncio.sleep(POLL)
                with contextlib.suppress(ControlError):
                    if self.target.current_session(self.unit) is session:
                        continue
                return
        finally:
            painting.cancel()
            session.remove_output_listener(listener)
            self.session = None
