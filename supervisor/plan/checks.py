"""agentd's own verdict: a task's ``done_when`` commands, run by the daemon, never by the agent.

:func:`run_checks` checks a candidate tree (:mod:`.integrate`) out into a
fresh directory and runs the task's commands there, one after the other,
until one fails:

* in the unit's containment: each command's whole process tree in a group of
  its own (``<unit>@check-...``, the daemon's cgroup or subreaper records),
  with the unit's ``[resources]`` limits, so a timeout ends everything it
  started;
* behind a Landlock fence that lets it write only its checkout and a private
  temp directory (the commands run code the agent wrote: tests, scripts; they
  may read what the agent may, and change nothing of the project, of
  ``.git``, of the plan or of agentd's state), with the agent's view
  (:mod:`supervisor.session.mountview`, where a mount namespace can be made):
  agentd's state directory hidden but for the check's own directory (no
  dashboard token, no unit's inbox, transcripts or event index) and a
  ``/dev/pts`` of its own (no unit's terminal to write or type into); as root,
  only ordinary capabilities (:data:`supervisor.session.caps.KEEP_CAPS`);
* with a timeout (the task's ``check_timeout``);
* with the unit's environment, less the control socket (a check has nothing
  to ask the daemon), and ``AGENTD_PLAN``/``AGENTD_TASK``/``AGENTD_ATTEMPT``;
* its output kept: redacted (every secret shape and the unit's secret
  environment values), the start and the end of a very long output, in
  ``<state>/plans/<name>/checks/<task>-<attempt>.log``, and its tail in the
  verdict (what the agent is told, what the report shows).

A string command runs with ``/bin/sh -c``; a list runs as an argv.  Both are
the person's, from the plan file frozen at the start: an agent can change what
the commands *do* (the tests are its work) but never which commands run.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from ..session.fence import Fence, FenceSpec, FenceUnavailable, agent_spec, availability
from ..session.mountview import View, ViewSpec, view_mode
from ..session.redact import redact_text
from .policy import command_text

log = structlog.get_logger("agentd.plan")

#: Bytes of output kept from the start and from the end of one command (the log holds both).
KEEP = 256 * 1024
TAIL = 4000
KILL_WAIT = 2.0


@dataclass(frozen=True)
class CheckSetup:
    """Where and how one unit's checks run."""

    unit: str
    env: Mapping[str, str]  # the unit's environment (its secrets are redacted from the output)
    containment: Any = None  # supervisor.session.containment.Containment, or None (tests, no daemon)
    fence: bool = True  # behind a Landlock fence where the kernel offers one
    prefix: str = ""  # the project inside the repository (the commands run there)
    limits: Any = None  # the unit's [resources] (supervisor.session.containment.Limits), for each check's group
    hidden: Path | None = None  # agentd's state directory: hidden from the check (its own directory shown)


class _Output:
    """A command's output, bounded: the first and the last :data:`KEEP` bytes."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.skipped = 0

    def add(self, data: bytes) -> None:
        room = KEEP - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > KEEP:
            self.skipped += len(self.tail) - KEEP
            del self.tail[:len(self.tail) - KEEP]

    def text(self) -> str:
        gap = f"\n[... {self.skipped} bytes not kept ...]\n".encode() if self.skipped else b""
        return (bytes(self.head) + gap + bytes(self.tail)).decode("utf-8", "replace")


def _argv(command: str | Sequence[str]) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def _env(setup: CheckSetup, tmp: Path, check_id: str, extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in setup.env.items() if k != "AGENTD_SOCKET"}
    env.update({"TMPDIR": str(tmp), "AGENTD_SESSION": check_id, "AGENTD_UNIT": setup.unit, **extra})
    env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    return env


async def _run_one(setup: CheckSetup, command: str | Sequence[str], tree: Path, cwd: Path, tmp: Path,
                   env: dict[str, str], timeout: float) -> tuple[int | None, bool, _Output, str | None]:
    """(exit code, timed out, output, why it was not fenced) of one command."""
    check_id = env["AGENTD_SESSION"]
    steps: list[Any] = []
    member = None
    unfenced: str | None = None
    containment = setup.containment
    if containment is not None:
        member = containment.add(setup.unit, check_id, setup.limits)
        join = containment.child_step(member)
        if join is not None:
            steps.append(join)
    if setup.fence:
        mode = view_mode()
        try:
            fence = Fence.build(agent_spec(scope=FenceSpec.of([tree]), tmp_dir=tmp),
                                terminals="private" if mode.available else "none")
        except (FenceUnavailable, OSError) as exc:
            unfenced = str(exc)
        else:
            if mode.available:  # the mounts first: the fence forbids them
                steps.append(View(ViewSpec.of(setup.hidden, [tree.parent], private_pts=True), mode))
            steps.append(fence)
    else:
        unfenced = "the fence is off for checks here"

    def child() -> None:  # pragma: no cover - runs in the forked child
        for step in steps:
            step()

    output = _Output()
    try:
        proc = await asyncio.create_subprocess_exec(
            *_argv(command), cwd=str(cwd), env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            preexec_fn=child if steps else None, pass_fds=tuple(fd for s in steps for fd in s.fds))
    except OSError as exc:
        output.add(f"cannot run {command_text(command)}: {exc.strerror or exc}\n".encode())
        if member is not None:
            containment.release(member)
        return 127, False, output, unfenced
    finally:
        for step in steps:
            step.close()
    if member is not None:
        try:
            import psutil

            containment.started(member, proc.pid, psutil.Process(proc.pid).create_time())
        except Exception:  # noqa: BLE001 - already gone: the group still holds whatever it started
            pass

    async def read() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            output.add(chunk)

    reader = asyncio.ensure_future(read())
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout)
    except asyncio.TimeoutError:
        timed_out = True
    finally:
        if member is not None:
            await containment.end(member, KILL_WAIT)
        elif proc.returncode is None:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
        if proc.returncode is None:
            await proc.wait()
        try:
            await asyncio.wait_for(reader, 5.0)
        except asyncio.TimeoutError:
            reader.cancel()  # a grandchild kept the pipe open past the group's end
        if member is not None:
            try:
                containment.release(member)
            except OSError:
                pass
    return (None if timed_out else proc.returncode), timed_out, output, unfenced


async def run_checks(setup: CheckSetup, materialize: Callable[[Path], Any], commands: Sequence[str | Sequence[str]],
                     work: Path, log_path: Path, timeout: float, labels: Mapping[str, str],
                     clock: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
    """Check out (``materialize(dir)``, blocking) and run ``commands`` until one fails; one result per command run."""
    base = work / f"check-{secrets.token_hex(4)}"
    tree, tmp = base / "tree", base / "tmp"
    results: list[dict[str, Any]] = []
    logs: list[str] = []
    try:
        tree.mkdir(parents=True)
        tmp.mkdir()
        await asyncio.to_thread(materialize, tree)
        cwd = tree / setup.prefix if setup.prefix else tree
        cwd.mkdir(parents=True, exist_ok=True)
        for command in commands:
            check_id = f"check-{secrets.token_hex(6)}"
            started = clock()
            code, timed_out, out, unfenced = await _run_one(setup, command, tree, cwd, tmp,
                                                            _env(setup, tmp, check_id, labels), timeout)
            text = redact_text(out.text(), setup.env)
            ok = code == 0 and not timed_out
            result = {"command": redact_text(command_text(command), setup.env), "exit": code, "ok": ok, "timed_out": timed_out,
                      "seconds": round(clock() - started, 3), "tail": text[-TAIL:], "fenced": unfenced is None}
            if unfenced:
                result["unfenced"] = unfenced
            results.append(result)
            how = "timed out after %gs" % timeout if timed_out else f"exit {code}"
            logs.append(f"$ {result['command']}\n{text}{'' if text.endswith(chr(10)) or not text else chr(10)}"
                        f"[{how}, {result['seconds']}s]\n")
            if not ok:
                break
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if logs:
            await asyncio.to_thread(_write_log, log_path, "".join(logs))
    return results


def _write_log(path: Path, text: str) -> None:
    from ..durable import atomic_write

    try:
        atomic_write(path, text, mode=0o600)
    except OSError as exc:
        log.error("check_log_unwritable", path=str(path), error=str(exc))


def fence_available() -> bool:
    return availability().available
