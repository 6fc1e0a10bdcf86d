"""Being told: each plan event goes to the ``[notify]`` commands, to ``/metrics`` and to the dashboard's stream.

An event is a flat JSON object: ``event`` (one of
:data:`supervisor.config.notify.EVENTS`), ``time`` (ISO 8601, UTC), ``plan``,
and what it is about (``task``, ``unit``, ``reason``, ``kind``, ``blocked_by``,
``commit``, ``report`` ...), e.g.::

    {"event": "task_parked", "time": "2026-12-04T03:12:09Z", "plan": "night", "task": "auth",
     "unit": "api", "kind": "tokens", "reason": "its token budget is spent (412000 of 400000)"}

:class:`Announcer` runs each matching command with the event on stdin, off the
loop, one at a time per command (events keep their order), with the section's
timeout (then the command's process group is killed), and logs a failure: a
broken notifier never stops a plan.  The command is the person's: the daemon's
settings (``[notify]`` in ``etc/agentd.toml``) and the plan file frozen at
``agentd plan start``; agents have no way to set it (docs/plan.md, "Security").
The same events are counted for ``/metrics`` (``agentd_plan_events_total``)
and handed to the dashboard's subscribers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import structlog

from ..config.notify import NotifySection
from ..session.redact import redact_text

log = structlog.get_logger("agentd.plan")

#: Events kept for a dashboard page that connects later (the newest).
RECENT = 200


def stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Announcer:
    """Where plan events go (see the module docstring); one per daemon."""

    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], Any], settings_notify: NotifySection | None = None,
                 environ: dict[str, str] | None = None) -> None:
        self.spawn = spawn
        self.settings_notify = settings_notify
        self.environ = dict(os.environ if environ is None else environ)
        self.counts: Counter[tuple[str, str]] = Counter()  # (plan, event) -> announced
        self.recent: list[dict[str, Any]] = []
        self.subscribers: set[asyncio.Queue[dict[str, Any]]] = set()
        self._queues: dict[tuple[str, ...], asyncio.Queue[dict[str, Any]]] = {}
        self.failures = 0

    def announce(self, event: dict[str, Any], plan_notify: NotifySection | None = None) -> None:
        """Send ``event`` everywhere it goes (never waits).  Its texts are redacted first: a reason can quote
        an agent's output (a usage-limit line, an exit)."""
        event = {k: redact_text(v) if isinstance(v, str) else v for k, v in event.items()}
        self.counts[(str(event.get("plan") or ""), str(event["event"]))] += 1
        self.recent = [*self.recent[-(RECENT - 1):], event]
        for queue in list(self.subscribers):
            if queue.qsize() < 1000:
                queue.put_nowait(event)
        for section in self._sections(plan_notify):
            if event["event"] in section.events:
                self._queue(section).put_nowait(event)

    def _sections(self, plan_notify: NotifySection | None) -> Iterable[NotifySection]:
        seen: set[tuple[str, ...]] = set()
        for section in (plan_notify, self.settings_notify):
            if section is not None and section.command not in seen:
                seen.add(section.command)
                yield section

    def _queue(self, section: NotifySection) -> asyncio.Queue[dict[str, Any]]:
        queue = self._queues.get(section.command)
        if queue is None:
            queue = self._queues[section.command] = asyncio.Queue()
            self.spawn(self._send_all(section, queue))
        return queue

    async def _send_all(self, section: NotifySection, queue: asyncio.Queue[dict[str, Any]]) -> None:
        while True:
            event = await queue.get()
            try:
                await self.send(section, event)
            except Exception as exc:  # noqa: BLE001 - a broken notifier never stops a plan
                self.failures += 1
                log.error("notify_failed", command=section.command[0], what=event.get("event"),
                          error=f"{type(exc).__name__}: {exc}")

    async def send(self, section: NotifySection, event: dict[str, Any]) -> int | None:
        """Run the command once with ``event`` on stdin; its exit code (None: killed at the timeout)."""
        env = {k: v for k, v in self.environ.items() if k != "AGENTD_SOCKET"}
        env.update({"AGENTD_EVENT": str(event["event"]), "AGENTD_PLAN": str(event.get("plan") or "")})
        proc = await asyncio.create_subprocess_exec(
            *section.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)
        data = (json.dumps(event, sort_keys=True) + "\n").encode()
        try:
            _, err = await asyncio.wait_for(proc.communicate(data), section.timeout)
        except asyncio.TimeoutError:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
            self.failures += 1
            log.error("notify_timeout", command=section.command[0], what=event["event"], timeout=section.timeout)
            return None
        if proc.returncode != 0:
            self.failures += 1
            log.error("notify_failed", command=section.command[0], what=event["event"], exit=proc.returncode,
                      stderr=err.decode(errors="replace")[-300:])
        else:
            log.info("notified", command=section.command[0], what=event["event"], plan=event.get("plan"))
        return proc.returncode

    def subscribe(self) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self.subscribers.discard(queue)
