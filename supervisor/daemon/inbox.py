"""The daemon's side of the memory channel: each unit's inbox, read as untrusted input and applied for that unit.

An agent's memory commands write request files into ``<state>/inbox/<unit>/``
(:mod:`supervisor.memory.channel`); only that unit's fence or sandbox may
write there, so the directory says who asks.  :meth:`Inbox.run` looks at
each loaded unit's inbox (in a thread, never on the loop; one ``stat`` when
nothing changed) when inotify says a request arrived
(:class:`~supervisor.daemon.dirwake.DirWake`; at the latest every
``ALIVE_EVERY`` seconds, and every 0.2 s where inotify cannot be had), and
applies each unit's requests in a thread of their own (one at a time per
unit, so a slow one never holds up another unit's checkpoint).  Fifty idle
units cost no thread hop and no ``stat`` between two looks; a request is seen
within milliseconds.  For each request:

1. reads it without following links or blocking (a regular file of at most
   64 KiB) and removes it: a request is applied at most once, and a unit
   gets at most 60 a minute;
2. checks it (:func:`~supervisor.memory.channel.parse_request`, then
   :meth:`Inbox.policy`): the module must be the unit's own (another
   module, or the global log and task, are the person's), the task itself is
   the person's (an agent sets only its "State at interruption"), and every
   path it names (``files``, ``scope``, a fact's source) is relative, inside
   the project and inside the unit's scope, never in ``.git``, ``.agent`` or
   agentd's state;
3. applies it in a worker process (the daemon's own ``supervisor`` package,
   Python in isolated mode, started outside the project, so nothing the agent
   wrote can be imported) that sees the files as the agent does: agentd's
   state directory hidden
   (:mod:`supervisor.session.mountview`), so a snapshot cannot hash, through
   a symbolic link, a file the agent could not read (the dashboard token,
   another unit's transcript) into ``.git/objects``;
4. writes the reply beside it, logs ``memory_request`` (unit, operation,
   outcome), and after a decision runs ``AGENTD_SYNC=after-decision`` from
   the daemon's own environment.

Decisions are recorded with ``by: <unit>``; notes, facts and the task state
belong to the unit's module.  ``.alive`` in each inbox is touched every few
seconds, so a command knows whether to wait for an answer.

``task-done`` (``agentd task-state --done``) is the agent's claim that its
plan task is done: after the optional state line is written, the claim goes
to ``claim`` (:meth:`supervisor.plan.service.PlanService.claimed`) for the
unit whose inbox it came from, on the daemon's loop, and its answer (the
check is queued, or why the claim is ignored) is the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import subprocess
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..memory.channel import (ALIVE, ALIVE_EVERY, INBOX_DIR, MAX_REQUEST, REPLY_SUFFIX, REQUEST_RE, ChannelError,
                              Request, inbox_path, parse_request, write_reply)
from ..memory.gitfiles import matches
from ..scope.allowset import covers
from ..scope.fencing import hidden_state
from ..session.mountview import View, ViewSpec, view_mode
from ..session.redact import redact_text
from .dirwake import DirWake

if TYPE_CHECKING:  # pragma: no cover
    from ..config.units import UnitSpec

log = structlog.get_logger("agentd")

#: Where the daemon's own ``supervisor`` package is imported from (the worker imports that one only).
PACKAGE_PARENT = Path(__file__).resolve().parents[2]

#: Requests taken from one inbox per pass (the others wait for the next pass); entries looked at per inbox.
PER_PASS = 16
SCAN_LIMIT = 256
#: Replies nobody collected, and torn temp files, are removed after this long.
STALE_AFTER = 600.0
WORKER_TIMEOUT = 120.0
#: An inbox's mtime older than this (seconds) is trusted to change with its next request.
SETTLED = 0.5
#: Requests one unit may make in a minute (a checkpoint makes three).
RATE = 60
#: The shortest time between two passes (seconds): what an agent flooding its inbox can cost.
MIN_GAP = 0.05
#: Units whose requests are applied at once (each waits on a worker process).
WORKERS = 4
#: Top-level names a request may never name: git's, the memory store's (the daemon writes them).
_NEVER = (".git", ".agent")
#: The longest a claim waits for the plan's answer.
CLAIM_TIMEOUT = 30.0
#: What a claim is handed to: (unit, session or None, the task named or None, how it came) -> the plan's answer.
Claim = Callable[[str, "str | None", "str | None", str], Awaitable[Mapping[str, Any]]]


def _literal_prefix(glob: str) -> str:
    """The directories of ``glob`` before its first wildcard ('' when it starts with one)."""
    parts = []
    for seg in glob.split("/"):
        if any(c in seg for c in "*?["):
            break
        parts.append(seg)
    return "/".join(parts)


class Inbox:
    """Every loaded unit's inbox, served (see the module doc).  ``specs`` gives the loaded units now."""

    def __init__(self, root: Path, state_dir: Path, specs: Callable[[], Mapping[str, UnitSpec]], *,
                 environ: Mapping[str, str] | None = None, interval: float = 0.2,
                 clock: Callable[[], float] = time.time, claim: Claim | None = None) -> None:
        self.root = Path(root).resolve()
        self.claim = claim
        self._loop: asyncio.AbstractEventLoop | None = None
        self.state_dir = Path(state_dir).resolve()
        self.specs = specs
        self.environ = dict(os.environ if environ is None else environ)
        self.interval = interval
        self.clock = clock
        self._seen: dict[str, int] = {}  # unit -> the inbox's mtime when it was last found empty
        self._recent: dict[str, deque[float]] = {}  # unit -> when its latest requests came (the rate limit)
        self._alive_at = 0.0
        self._inbox_root = self.state_dir / INBOX_DIR
        self._watch: DirWake | None = None  # while :meth:`run` serves with inotify
        try:
            self._state_rel: str | None = self.state_dir.relative_to(self.root).as_posix()
        except ValueError:
            self._state_rel = None

    async def run(self) -> None:
        """Serve the inboxes until cancelled: each pass lists them (a thread), then each unit's requests are
        applied in a thread of their own, one unit at a time at most once: a unit with slow requests (a
        snapshot of a large scope) never holds up another unit's checkpoint."""
        loop = self._loop = asyncio.get_running_loop()
        # threads of its own: requests that wait on worker processes never take the daemon's other threads
        pool = ThreadPoolExecutor(max_workers=WORKERS + 1, thread_name_prefix="agentd-inbox")
        tasks: dict[str, asyncio.Future[int]] = {}
        wake = asyncio.Event()
        with contextlib.suppress(OSError):  # watched from the start: the first unit's inbox is created in it
            self._inbox_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        watch = self._watch = self._open_watch(loop, wake)

        def served(unit: str) -> None:
            tasks.pop(unit, None)
            wake.set()  # what was left beyond PER_PASS is taken at once

        try:
            while True:
                wake.clear()  # a request that arrives during this pass wakes the next one
                started = loop.time()
                try:
                    specs = dict(self.specs())  # read on the loop: reloads change the units there
                    if watch is not None:
                        self._watch_inboxes(watch, specs)
                    found = await loop.run_in_executor(pool, self.collect, specs, set(tasks))
                    for unit, (spec, inbox, names) in found.items():
                        tasks[unit] = loop.run_in_executor(pool, self.handle_all, unit, spec, inbox, names)
                        tasks[unit].add_done_callback(lambda _t, u=unit: served(u))
                except Exception as exc:
                    log.error("inbox_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
                if watch is None:
                    await asyncio.sleep(self.interval)
                    continue
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), ALIVE_EVERY)
                # an agent that writes files as fast as it can gets a pass per MIN_GAP, no more
                await asyncio.sleep(max(0.0, started + MIN_GAP - loop.time()))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            if watch is not None:
                watch.close()
                self._watch = None  # served no more: a later scan() lists on the heartbeat again

    def _open_watch(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> DirWake | None:
        """inotify on the inboxes (None: it cannot be had, and the inboxes are polled every ``interval``)."""
        try:
            watch = DirWake(wake.set, lambda directory, name: directory == str(self._inbox_root)
                            or REQUEST_RE.fullmatch(name) is not None)
        except OSError as exc:
            log.warning("inbox_polled", reason=str(exc), every=self.interval)
            return None
        watch.attach(loop)
        return watch

    def _watch_inboxes(self, watch: DirWake, specs: Mapping[str, UnitSpec]) -> None:
        """Watch the inbox directory (a unit's inbox created there wakes a pass) and each loaded unit's inbox."""
        try:
            present = set(os.listdir(self._inbox_root))  # a missing inbox is watched once its creation wakes a pass
        except OSError:
            present = set()
        wanted = {str(self._inbox_root)} | {str(inbox_path(self.state_dir, unit)) for unit in specs if unit in present}
        for path in list(watch.paths):
            if path not in wanted:
                watch.forget(path)  # a unit removed by a reload
        for path in wanted:
            if not watch.watching(path):
                try:
                    watch.watch(path)
                except OSError as exc:  # out of watches: the pass every ALIVE_EVERY seconds still serves it
                    log.warning("inbox_not_watched", path=path, error=str(exc))

    # ------------------------------------------------------------------ scanning
    def scan(self, specs: Mapping[str, UnitSpec] | None = None) -> int:
        """One pass over every unit's inbox, its requests applied here (blocking); the number handled."""
        found = self.collect(dict(specs if specs is not None else self.specs()))
        return sum(self.handle_all(unit, spec, inbox, names) for unit, (spec, inbox, names) in found.items())

    def collect(self, specs: Mapping[str, UnitSpec],
                skip: Collection[str] = ()) -> dict[str, tuple[UnitSpec, Path, list[str]]]:
        """The requests waiting in each unit's inbox but the ``skip`` units' (those being served: oldest first,
        at most PER_PASS a unit); blocking."""
        now = self.clock()
        beat = now - self._alive_at >= ALIVE_EVERY
        if beat:
            self._alive_at = now
        out: dict[str, tuple[UnitSpec, Path, list[str]]] = {}
        for unit, spec in specs.items():
            inbox = inbox_path(self.state_dir, unit)
            if beat:
                self._touch(inbox / ALIVE)
            if unit in skip:
                continue
            try:
                mtime = os.stat(inbox).st_mtime_ns  # before the listing: a change after it shows as a new mtime
            except OSError:
                continue
            if self._seen.get(unit) == mtime and not (beat and self._watch is None):  # inotify: a change wakes
                continue
            found, busy = self._requests(inbox, now)
            if found:
                out[unit] = (spec, inbox, found[:PER_PASS])
            # trusted only once it is older than a timestamp tick: a change within the same tick keeps the mtime
            settled = now - mtime / 1e9 > SETTLED
            self._seen[unit] = mtime if settled and not found and not busy else -1
        return out

    def handle_all(self, unit: str, spec: UnitSpec, inbox: Path, names: list[str]) -> int:
        for name in names:
            self.handle(unit, spec, inbox, name)
        return len(names)

    @staticmethod
    def _touch(path: Path) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError:
            return  # the agent put something else there: its commands will just wait less
        try:
            os.utime(fd)
        finally:
            os.close(fd)

    def _requests(self, inbox: Path, now: float) -> tuple[list[str], bool]:
        """The request names waiting (oldest first), and whether anything else there still needs a look."""
        found: list[tuple[int, str]] = []
        busy = False
        try:
            with os.scandir(inbox) as it:
                for count, entry in enumerate(it):
                    if count >= SCAN_LIMIT:
                        busy = True
                        break
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if REQUEST_RE.fullmatch(entry.name):
                        if stat.S_ISREG(st.st_mode):  # a directory, link or fifo of that name is left alone
                            found.append((st.st_mtime_ns, entry.name))
                    elif entry.name != ALIVE and now - st.st_mtime > STALE_AFTER and stat.S_ISREG(st.st_mode):
                        self._unlink(inbox / entry.name)  # an uncollected reply, a torn temp file
                    elif entry.name.endswith(REPLY_SUFFIX) or entry.name.endswith(".tmp"):
                        busy = True  # look again until it is collected or stale
        except OSError:
            return [], False
        return [name for _, name in sorted(found)], busy

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            os.unlink(path)
        except OSError:
            pass

    @staticmethod
    def _read(path: Path) -> bytes:
        """The request's bytes: a regular file, no link followed, never blocking; at most MAX_REQUEST + 1."""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ChannelError("a request must be a regular file")
            return os.read(fd, MAX_REQUEST + 1)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ one request
    def handle(self, unit: str, spec: UnitSpec, inbox: Path, name: str) -> None:
        """Read, check, apply and answer one request (never raises)."""
        ident = name.removesuffix(".req")
        path = inbox / name
        op = "?"
        try:
            try:
                data = self._read(path)
            finally:
                self._unlink(path)
            self._admit(unit)
            request = parse_request(data)
            op = request.op
            module, scope = self.policy(unit, spec, request)
            if request.op == "task-done" and not (request.args.get("state") or "").strip():
                reply = {"ok": True, "text": ""}  # a claim alone: nothing to write
            else:
                reply = self._work({"root": str(self.root), "module": module, "scope": scope, "unit": unit,
                                    "request": {"v": 1, "op": request.op, "args": request.args}})
            if request.op == "task-done" and reply.get("ok"):
                reply = self._claimed(unit, request.args.get("session"), str(reply.get("text") or ""))
        except (ChannelError, OSError) as exc:
            reply = {"ok": False, "text": f"refused: {exc}" if isinstance(exc, ChannelError) else f"unreadable: {exc.strerror}"}
        ok, text = bool(reply.get("ok")), str(reply.get("text", ""))
        try:
            write_reply(inbox, ident, ok, text)
        except OSError as exc:
            log.warning("inbox_reply_failed", unit=unit, error=str(exc))
        log.info("memory_request", unit=unit, op=op, ok=ok, result=redact_text(text[:300], spec.agent.env))
        if ok and op == "decide":
            self._sync_after_decision()

    def _claimed(self, unit: str, session: str | None, written: str) -> dict[str, Any]:
        """Hand ``unit``'s claim to the plan (on the daemon's loop when it runs); the reply to the agent."""
        head = f"{written}\n" if written else ""
        if self.claim is None:
            return {"ok": False, "text": f"{head}not claimed: no plan runs in this daemon"}
        coro = self.claim(unit, session or None, None, "task-state --done")
        try:
            if self._loop is not None and self._loop.is_running():
                answer = asyncio.run_coroutine_threadsafe(coro, self._loop).result(CLAIM_TIMEOUT)
            else:  # scan() called without the daemon's loop (tests, tools)
                answer = asyncio.run(coro)
        except Exception as exc:  # noqa: BLE001 - a claim that could not be made is the agent's answer, not a crash
            log.error("plan_claim_failed", unit=unit, error=f"{type(exc).__name__}: {exc}")
            return {"ok": False, "text": f"{head}not claimed: the plan could not take it ({type(exc).__name__})"}
        log.info("plan_claim", unit=unit, via="task-state --done", **{k: v for k, v in answer.items() if k != "unit"})
        if "checking" in answer:
            return {"ok": True, "text": f"{head}claimed: agentd now checks task {answer['checking']} (attempt "
                                        f"{answer.get('attempt')}); the verdict comes as your next message"}
        return {"ok": False, "text": f"{head}not claimed: {answer.get('ignored') or answer}"}

    def _admit(self, unit: str) -> None:
        """At most RATE requests of one unit a minute (each costs a worker process): ChannelError beyond."""
        now = self.clock()
        recent = self._recent.setdefault(unit, deque())
        while recent and now - recent[0] > 60.0:
            recent.popleft()
        if len(recent) >= RATE:
            raise ChannelError(f"more than {RATE} memory requests in a minute from unit {unit}: wait, then write "
                               "what matters in fewer, fuller notes")
        recent.append(now)

    def _sync_after_decision(self) -> None:
        from ..memory.sync import sync_after_decision

        try:
            said = sync_after_decision(self.root, self.environ)
        except Exception as exc:  # noqa: BLE001 - a failed sync never fails the decision
            said = f"sync failed: {exc}"
        if said:
            log.info("memory_sync_after_decision", result=said)

    def policy(self, unit: str, spec: UnitSpec, request: Request) -> tuple[str | None, list[str]]:
        """The module a request of ``unit`` writes and the globs its snapshot hashes; ChannelError when refused."""
        own = None if spec.module == "global" else spec.module
        args = request.args
        asked = args.get("module")
        if asked is not None and (None if asked == "global" else asked) != own:
            raise ChannelError(f"unit {unit} writes only its own module's memory ({own or 'global'}); "
                               f"{asked}'s is read-only to it")
        if request.op == "task-state" and args.get("task"):
            raise ChannelError(f"the task is the person's (`agentd task {unit} TEXT`); an agent sets only where "
                               "it stopped (its State at interruption)")
        if request.op == "note" and args["kind"] not in ("confirmed", "hypothesis"):
            raise ChannelError("kind: confirmed or hypothesis")
        scope = [g for g in spec.scope.paths if g.strip()]
        if request.op == "decide":
            files = [f.strip() for part in args.get("files", ()) for f in part.split(",") if f.strip()]
            self._paths_ok("files", files, scope)
            asked_scope = [g.strip() for g in args.get("scope", ()) if g.strip()]
            self._paths_ok("scope", asked_scope, scope)
            return own, asked_scope or scope
        if request.op == "fact-add":
            self._paths_ok("source", [args["source"].strip().rsplit(":", 1)[0]], scope)
        return own, scope

    def _paths_ok(self, field: str, globs: Iterable[str], scope: list[str]) -> None:
        for glob in globs:
            g = glob[2:] if glob.startswith("./") else glob
            segs = g.split("/")
            if not g or g.startswith(("/", "~")) or "\\" in g or ".." in segs:
                raise ChannelError(f"{field}: {glob!r} must be a path relative to the project root, without '..'")
            if segs[0] in _NEVER or (self._state_rel and (g == self._state_rel or g.startswith(self._state_rel + "/"))):
                raise ChannelError(f"{field}: {glob!r} is agentd's or git's own, not the project's")
            if scope and not self.within(g, scope):
                raise ChannelError(f"{field}: {glob!r} is outside the unit's scope {scope}")

    @staticmethod
    def within(glob: str, scope: list[str]) -> bool:
        """Whether every path ``glob`` can name is in ``scope`` (on the safe side: a glob whose wildcards
        start before any directory of the scope is refused)."""
        prefix = _literal_prefix(glob)
        if prefix == glob:  # a plain path: that file, or that directory and all below it
            return matches(glob, scope) or any(covers(s, glob) for s in scope)
        return bool(prefix) and (matches(prefix, scope) or any(covers(s, prefix) for s in scope))

    def _work(self, job: dict[str, Any]) -> dict[str, Any]:
        """Apply ``job`` in a worker process that sees the files as the agent does (agentd's state hidden)."""
        mode = view_mode()
        preexec = View(ViewSpec.of(hidden_state(self.state_dir)), mode) if mode.available else None
        env = {k: v for k, v in self.environ.items() if not k.startswith("AGENTD_")}
        # isolated (-I) and started outside the project: a `supervisor/` an agent put in the project root (the
        # first entry of sys.path for `python -m` run there) must never be what runs
        code = f"import sys; sys.path.insert(0, {str(PACKAGE_PARENT)!r}); from supervisor.memory.channel import main; main()"
        try:
            proc = subprocess.run([sys.executable, "-I", "-c", code], input=json.dumps(job).encode(),
                                  capture_output=True, timeout=WORKER_TIMEOUT, env=env, cwd="/",
                                  preexec_fn=preexec, check=False)
        except (subprocess.SubprocessError, OSError) as exc:
            log.error("inbox_worker_failed", error=f"{type(exc).__name__}: {exc}")
            return {"ok": False, "text": f"the daemon could not apply it: {type(exc).__name__}"}
        try:
            reply = json.loads(proc.stdout)
            if isinstance(reply, dict):
                return reply
        except ValueError:
            pass
        log.error("inbox_worker_failed", code=proc.returncode, stderr=proc.stderr.decode(errors="replace")[-2000:])
        return {"ok": False, "text": "the daemon could not apply it (its worker failed; see agentd's log)"}
