"""Fakes for replaying events into a unit supervisor and the continuity cycle, in milliseconds.

:class:`FakeClock` is advanced by hand (and by the fakes' waits, so a deadline
passes without real time); :class:`FakeDriver` is a session whose agent does
what the test says; :class:`FakeRuntime` is the daemon as a unit sees it;
:class:`FakeHost` is the cycle's host and :func:`plan` a cycle plan.
No process, PTY or file is involved (the memory probe is a fake too).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.adapters.base import ContextFigure, Launch, Meaning
from supervisor.config.units import UnitSpec
from supervisor.continuity import cycle
from supervisor.continuity.policy import After, Seen, Trigger
from supervisor.daemon.lifecycle import UnitState
from supervisor.session.process import ExitInfo


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeWatcher:
    idle: bool = True
    turns_ended: int = 0
    ended_at: float | None = None

    @property
    def state(self) -> Any:
        from supervisor.adapters.base import Turn

        return Turn.IDLE if self.idle else Turn.BUSY

    def tick(self) -> None:
        pass


class FakeConfined:
    """A session neither contained nor fenced (``adapters.confine.Confined`` as status sees it)."""

    fence = None

    def status(self) -> dict[str, Any]:
        return {"scope": None}


class FakeDriver:
    """A running agent scripted by the test.

    ``on_type(text)`` decides what the agent does with each message (default:
    the turn ends at once).  ``person`` says whether a person types.  Waiting
    past a deadline advances the fake clock instead of sleeping.
    """

    _next = 0

    def __init__(self, clock: FakeClock, wakeup: str | None = None, first_input: bool = True) -> None:
        FakeDriver._next += 1
        self.session_id = f"s{FakeDriver._next}"
        self.pid = 10_000 + FakeDriver._next
        self.clock = clock
        self.watcher = FakeWatcher()
        self.launched = Launch(argv=["fake"], first_input=wakeup if first_input else None,
                               wakeup_via="first-message" if first_input else "argv")
        self.wakeup = wakeup
        self.typed: list[str] = []
        self.exit: ExitInfo | None = None
        self.closed = False
        self.ended: list[bool] = []  # graceful flag of each end()
        self.figure: ContextFigure | None = ContextFigure(100, 1000, True, "fake")
        self.person = False
        self.failure_text: str | None = None
        self.confined = FakeConfined()
        self.started = clock()
        self.last_output = clock()
        self.meanings: list[Meaning] = []
        self.on_type: Callable[[FakeDriver, str], None] = lambda d, text: d.turn_ends()
        self.interrupted = 0
        self.screen: Any = None  # a supervisor.adapters.base.Blocked the agent shows, or None
        self.keys: list[bytes] = []  # keystrokes sent with send_keys

    # what the agent does
    def turn_ends(self) -> None:
        self.watcher.idle = True
        self.watcher.turns_ended += 1
        self.watcher.ended_at = self.clock()

    def dies(self, code: int | None = 1, signal: int | None = None) -> None:
        self.exit = ExitInfo(code=code, signal=signal)

    # the Driver surface
    @property
    def exited(self) -> bool:
        return self.exit is not None

    @property
    def idle(self) -> bool:
        return self.watcher.idle

    @property
    def turns_ended(self) -> int:
        return self.watcher.turns_ended

    @property
    def uptime(self) -> float:
        return self.clock() - self.started

    @property
    def silent_for(self) -> float:
        return self.clock() - self.last_output

    #: What the watch compares to skip a look (Driver.activity); None: looked at every tick.
    activity: Any = None
    argv = ["fake"]
    env: dict[str, str] = {}
    transcript_bytes = 0
    transcript_problem = None
    transcript_path = "/nonexistent/fake.txt"

    def context(self) -> ContextFigure | None:
        return self.figure

    def failure(self) -> str | None:
        return self.failure_text

    def blocked(self) -> Any:
        return self.screen

    sigstopped = False  # the agent's process is stopped (SIGSTOP)

    def process_stopped(self) -> bool:
        return self.sigstopped

    async def send_keys(self, keys: Any) -> None:
        self.keys.append(keys.payload())
        self.screen = None

    def tail(self, n: int) -> str:
        return "last lines of the fake agent"

    trail_value: Any = None  # what the agent's own trail holds (a Trail), or None

    def trail(self) -> Any:
        return self.trail_value

    def reap(self) -> ExitInfo | None:
        return self.exit

    def record(self) -> dict[str, Any]:
        return {"session": self.session_id, "pid": self.pid, "create_time": 0.0, "pgid": self.pid, "tree": []}

    def leftovers(self) -> list[Any]:
        return []

    async def end_leftovers(self, timeout: float) -> list[Any]:
        return []

    def on_agent_event(self, event: dict[str, Any]) -> list[Meaning]:
        if Meaning.TURN_END in self.meanings:
            self.turn_ends()
        return list(self.meanings)

    def hook_output(self, event: Any, meanings: Any, wakeup: str | None) -> str | None:
        return None

    async def type(self, text: str) -> None:
        if self.exited:
            raise ConnectionError("the session is not running")
        self.typed.append(text)
        self.watcher.idle = False
        self.last_output = self.clock()
        self.on_type(self, text)

    def send_raw(self, data: bytes) -> None:
        self.typed.append(data.decode())

    async def interrupt(self) -> None:
        self.interrupted += 1
        self.turn_ends()

    async def wait_turns(self, count: int, deadline: float) -> bool:
        while not self.exited:
            if self.watcher.turns_ended >= count and self.watcher.idle:
                return True
            if self.clock() >= deadline:
                return False
            await asyncio.sleep(0)
            self.clock.advance(0.5)
        return False

    async def wait_ready(self, deadline: float, activity: Callable[[str], None] = lambda _s: None) -> bool:
        while not self.exited and self.clock() < deadline:
            if self.person:
                activity("waiting: a person is typing in an attached terminal")
            elif not self.watcher.idle:
                activity("waiting for the agent's turn to end")
            else:
                return True
            await asyncio.sleep(0)
            self.clock.advance(0.5)
        return False

    async def end(self, timeout: float, graceful: bool) -> list[Any]:
        self.ended.append(graceful)
        if self.exit is None:
            self.exit = ExitInfo(signal=15)
        return []

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeMemory:
    """The memory files: ``writes`` says how many times the agent wrote them."""

    writes: int = 0
    autos: list[str] = field(default_factory=list)

    def fingerprint(self) -> str:
        return f"v{self.writes}"

    def write_auto(self, reason: str, tail: str) -> None:
        self.autos.append(reason)


@dataclass
class FakeKeeper:
    """Keeps nothing on disk: records each keep (moment, session, the trail it read) and answers ``wip``."""

    calls: list[tuple[str, str | None, Any]] = field(default_factory=list)
    wip: str | None = "0123456789abcdef0123456789abcdef01234567"
    fail: Exception | None = None
    entered: threading.Event = field(default_factory=threading.Event)  # set when a keep begins
    gate: threading.Event | None = None  # when given, a keep waits for it (it runs in a thread)

    def keep(self, moment: Any, session: str | None, trail: Callable[[], Any]) -> Any:
        from supervisor.continuity.keeper import Kept

        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail is not None:
            raise self.fail
        self.calls.append((moment.value, session, trail()))
        return Kept(None, self.wip, (f"kept {session} at {moment.value}",))


class FakeHost:
    """The cycle's Host: records states, activities, marks and ends; pauses advance the fake clock."""

    def __init__(self, clock: FakeClock, memory: FakeMemory, respawn_problem: str | None = None) -> None:
        self.clock = clock
        self.memory = memory
        self.states: list[UnitState] = []
        self.activities: list[str | None] = []
        self.untils: list[float | None] = []  # each activity's latest end (clock time), None when unbounded
        self.marks: list[dict[str, Any] | None] = []
        self.ended = 0
        self.stopped_why: str | None = None
        self.respawn_problem = respawn_problem
        self.fresh: FakeDriver | None = None
        self.on_pause = lambda: None

    def set_state(self, state: UnitState, reason: str) -> None:
        self.states.append(state)

    def set_activity(self, text: str | None, until: float | None = None) -> None:
        self.activities.append(text)
        self.untils.append(until)

    async def pause(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.on_pause()
        await asyncio.sleep(0)

    async def mark(self, marker: dict[str, Any] | None) -> None:
        self.marks.append(marker)

    async def delivered(self) -> str | None:
        return "delivered via first-message" if self.fresh else None

    async def end_session(self) -> None:
        self.ended += 1

    def stopped(self, why: str) -> None:
        self.stopped_why = why

    async def respawn(self, why: str) -> tuple[FakeDriver | None, str | None, int | None]:
        if self.respawn_problem:
            return None, self.respawn_problem, None
        self.fresh = FakeDriver(self.clock)
        return self.fresh, None, 123


def plan(after: After = After.RESPAWN, deadline: float = 60.0, grace: float = 5.0) -> cycle.Plan:
    return cycle.Plan(Trigger.COMMAND, "write your notes", after, deadline=deadline, grace=grace, why="stop command")


class FakeRuntime:
    """The daemon as a unit sees it: launches fake drivers, keeps records, queues timers."""

    def __init__(self, clock: FakeClock, root: Path) -> None:
        self.clock = clock
        self.root = root
        self.default_stop_timeout = 1.0
        self.stopping = False
        self.drivers: list[FakeDriver] = []
        self.cycles: list[Any] = []
        self.sessions: list[Any] = []
        self.timers: list[tuple[float, Any]] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.launch_error: Exception | None = None
        self.first_input = True
        self.script: Callable[[FakeDriver], None] = lambda d: None  # set up each new driver
        self.memory_files = FakeMemory()
        self.given_up: list[str] = []
        self.published: list[str] = []  # units whose change the bus would have carried, in order
        self.keeper_fake = FakeKeeper()
        self.persist_gate: asyncio.Event | None = None

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.append(task)
        return task

    def call_later(self, delay: float, unit: Any) -> Any:
        self.timers.append((self.clock() + delay, unit))

        class Handle:
            def cancel(self_inner) -> None:
                self.timers[:] = [t for t in self.timers if t[1] is not unit]

        return Handle()

    def launch(self, unit: Any, wakeup: str | None) -> FakeDriver:
        if self.launch_error is not None:
            raise self.launch_error
        driver = FakeDriver(self.clock, wakeup, self.first_input)
        self.script(driver)
        self.drivers.append(driver)
        return driver

    def changed(self, unit: Any) -> None:
        self.published.append(unit.name)  # what the change bus would carry

    def gave_up(self, unit: Any) -> None:
        self.given_up.append(unit.name)

    async def persist(self) -> None:
        if self.persist_gate is not None:  # a test holds the start of a session right after its launch
            await self.persist_gate.wait()

    async def sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await asyncio.sleep(0)

    def record_cycle(self, record: Any) -> None:
        self.cycles.append(record)

    def cycles_of(self, trigger: str) -> list[Any]:
        """The checkpoint cycles of ``trigger`` (not the records of work kept when a session ended otherwise)."""
        return [c for c in self.cycles if c.trigger == trigger and c.flush != "skipped"]

    def record_session(self, record: Any) -> None:
        self.sessions.append(record)

    def memory(self, module: str, env: Any = None) -> FakeMemory:
        return self.memory_files

    def keeper(self, spec: Any, env: Any = None) -> FakeKeeper:
        return self.keeper_fake


    async def settle(self, timeout: float = 10.0) -> None:
        """Let every task started so far (and those they start) run to its end."""
        while pending := [t for t in self.tasks if not t.done()]:
            done, _ = await asyncio.wait(pending, timeout=timeout)
            if not done:
                raise AssertionError(f"tasks did not settle: {pending}")


def spec(tmp_path: Path, text: str = "", name: str = "u") -> UnitSpec:
    """A unit spec from TOML text (an [agent] command is added when missing)."""
    import tomllib

    data = tomllib.loads(text)
    data.setdefault("agent", {}).setdefault("command", ["python"])
    return UnitSpec(name=name, path=tmp_path / f"{name}.toml", **data)


#: A unit that takes no wakeup at start and counts a freeze after 30 s (the freeze and watch replays).
QUIET = "[wakeup]\non_start = false\n[freeze]\nafter = 30\n"


def seen(**kw: object) -> Seen:
    base = dict(context=ContextFigure(100, 1000, True, "t"), session_age=10.0, silent_for=0.0, run_age=10.0,
                failure=None, may_type=False)
    base.update(kw)
    return Seen(**base)  # type: ignore[arg-type]
