"""Run one module's mutants against that module's own pure tests: each in a forked child, with a deadline.

The parent imports pytest and the heavy third-party packages once, never
``supervisor``; each child is forked from it, puts an import hook in front
that serves the module's (mutated) text from the module's own path, and runs
pytest on the tests that execute the mutated lines.  So a mutant costs a fork,
the project's imports and its tests, not an interpreter start.

The baseline run (the module unchanged) traces which test executes which
line of the module: a mutant on a line no test executes survives without a
run, and a mutant is run only against the tests that reach it (all of them
when its line runs at import, such as a default or a constant).  A child
that may start a process fails (``os.fork``, ``subprocess``, ``pty`` and
the ``exec`` family raise in it): the tests a mutation run uses are pure.

Outcomes: ``killed`` (a test failed or collection broke), ``timeout`` (the
child ran past its deadline and was killed; counted as killed: the mutant
hangs), ``survived`` (every test passed), ``uncovered`` (no test executes
the line; a survivor), ``error`` (the child could not run pytest at all).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .mutants import Mutant, check, mutants

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("pytest", "_pytest.python", "_pytest.fixtures", "hypothesis", "hypothesis.strategies", "pydantic",
         "pydantic_settings", "psutil", "pexpect", "structlog", "click", "tabulate", "pyte", "tomllib", "asyncio",
         "apscheduler.triggers.cron", "watchdog.observers")
KILLED = ("killed", "timeout")


def preload() -> None:
    """Import the third-party packages every child needs, once, in the parent (never ``supervisor``)."""
    import importlib

    for name in HEAVY:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    assert not any(m == "supervisor" or m.startswith("supervisor.") for m in sys.modules), "the parent imported supervisor"


@dataclass
class Outcome:
    key: str
    operator: str
    line: int
    description: str
    status: str  # killed | timeout | survived | uncovered | error
    tests: int = 0  # how many tests the child was given
    seconds: float = 0.0
    detail: str = ""


class BaselineFailed(RuntimeError):
    """The module unchanged does not pass the tests it is mapped to (or one of them starts a process)."""


@dataclass
class Baseline:
    lines: dict[int, list[str]]  # line -> node ids of the tests that execute it ("" = outside any test)
    durations: dict[str, float]
    seconds: float


@dataclass
class Report:
    module: str
    path: str
    tests: list[str]
    baseline_seconds: float
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------- the child
class _ServeText(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serve ``name`` from ``text``, compiled under the module's real path (so ``__file__`` and tracing see it)."""

    def __init__(self, name: str, path: Path, text: str) -> None:
        self.name, self.path, self.text = name, path, text

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        exec(compile(self.text, str(self.path), "exec", dont_inherit=True), module.__dict__)


def _no_processes() -> None:
    """Make every way to start a process raise: a mutation run's tests are pure."""
    import pty
    import subprocess

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("a test of the mutation run tried to start a process; map only pure tests")

    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "execvpe", "system"):
        if hasattr(os, name):
            setattr(os, name, refuse)
    pty.fork = refuse  # type: ignore[assignment]
    subprocess.Popen._execute_child = refuse  # type: ignore[attr-defined,method-assign]


class _Recorder:
    """A pytest plugin: which test is running, and how long each took (the baseline's trace reads it)."""

    def __init__(self) -> None:
        self.current = ""
        self.durations: dict[str, float] = {}

    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> None:
        self.current = item.nodeid

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.when == "teardown":
            self.current = ""


def _trace_lines(path: str, recorder: _Recorder, hits: dict[int, set[str]]) -> Callable[..., Any]:
    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            hits.setdefault(frame.f_lineno, set()).add(recorder.current)
        return local

    def global_(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == path:
            hits.setdefault(frame.f_lineno, set()).add(recorder.current)
            return local
        return None

    return global_


def _child(name: str, path: Path, text: str, args: list[str], out: Path, trace: bool) -> int:
    import pytest
    from hypothesis import settings

    sys.meta_path.insert(0, _ServeText(name, path, text))
    settings.register_profile("mutation", database=None, derandomize=True, deadline=None, print_blob=False)
    settings.load_profile("mutation")
    _no_processes()
    recorder = _Recorder()
    hits: dict[int, set[str]] = {}
    if trace:
        import threading

        tracer = _trace_lines(str(path), recorder, hits)
        sys.settrace(tracer)
        threading.settrace(tracer)
    code = pytest.main(args, plugins=[recorder])
    sys.settrace(None)
    if trace:
        out.write_text(json.dumps({"lines": {str(k): sorted(v) for k, v in hits.items()},
                                   "durations": recorder.durations}))
    return int(code)


def _pytest_args(tests: Sequence[str], basetemp: Path) -> list[str]:
    return ["-x", "-q", "--no-header", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly",
            "-o", "addopts=", f"--basetemp={basetemp}", "--rootdir", str(REPO), *tests]


@dataclass
class _Job:
    mutant: Mutant | None
    text: str
    tests: list[str]
    timeout: float
    trace: bool = False


def _start(job: _Job, name: str, path: Path, work: Path, index: int) -> tuple[int, Path, Path]:
    out, log = work / f"{index}.json", work / f"{index}.log"
    basetemp = work / f"tmp{index}"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        code = 3
        try:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(REPO)
            code = _child(name, path, job.text, _pytest_args(job.tests, basetemp), out, job.trace)
        except BaseException as exc:  # noqa: BLE001 - the child reports through its exit status
            print(f"mutation child failed: {exc!r}", file=sys.stderr)
        finally:
            os._exit(code)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    return pid, out, log


def run_jobs(jobs: list[_Job], name: str, path: Path, parallel: int,
             done: Callable[[_Job, str, float, Path, Path], None]) -> None:
    """Run ``jobs`` in forked children, ``parallel`` at a time; ``done(job, status, seconds, out, log)``."""
    work = Path(tempfile.mkdtemp(prefix="agentd-mutation-"))
    queue = list(enumerate(jobs))
    running: dict[int, tuple[_Job, float, Path, Path]] = {}
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        while queue or running:
            while queue and len(running) < parallel:
                index, job = queue.pop(0)
                pid, out, log = _start(job, name, path, work, index)
                running[pid] = (job, time.monotonic(), out, log)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for cpid, (job, began, out, log) in list(running.items()):
                    if now - began > job.timeout:
                        try:
                            os.killpg(cpid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                        os.waitpid(cpid, 0)
                        del running[cpid]
                        done(job, "timeout", now - began, out, log)
                time.sleep(0.005)
                continue
            if pid not in running:
                continue
            job, began, out, log = running.pop(pid)
            try:
                os.killpg(pid, signal.SIGKILL)  # anything the child left behind in its group
            except (ProcessLookupError, PermissionError):
                pass
            code = os.waitstatus_to_exitcode(status)
            # 1: a test failed; 2: collection broke; 3: internal error; 4: the module did not import, so the
            # baseline's test ids are not found (pytest calls that a usage error); 5: no test ran (a runner error)
            result = {0: "survived", 1: "killed", 2: "killed", 3: "killed", 4: "killed"}.get(code, "error")
            if code < 0:
                result = "killed"  # the mutant crashed the interpreter
            done(job, result, time.monotonic() - began, out, log)
    finally:
        for cpid in running:  # interrupted: end every child still running, with its group
            try:
                os.killpg(cpid, signal.SIGKILL)
                os.waitpid(cpid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(work, ignore_errors=True)


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def module_path(name: str) -> Path:
    return REPO / (name.replace(".", "/") + ".py")


def baseline(name: str, tests: Sequence[str]) -> Baseline:
    path = module_path(name)
    result: dict[str, Any] = {}

    def done(job: _Job, status: str, seconds: float, out: Path, log: Path) -> None:
        if status != "survived":  # the unchanged module must pass its tests
            raise BaselineFailed(f"{name}: the baseline run failed ({status}):\n{log.read_text()[-4000:]}")
        data = json.loads(out.read_text())
        result["b"] = Baseline({int(k): v for k, v in data["lines"].items()}, data["durations"], seconds)

    run_jobs([_Job(None, path.read_text(), list(tests), 600.0, trace=True)], name, path, 1, done)
    return result["b"]


def _select(mutant: Mutant, base: Baseline) -> list[str] | None:
    """The tests that execute the mutant's lines, fastest first; every test for a line run at import; None: no test."""
    last = mutant.line + mutant.original.count("\n")
    ids: set[str] = set()
    for line in range(mutant.line, last + 1):
        ids.update(base.lines.get(line, ()))
    if not ids:
        return None
    if "" in ids:  # run outside any test: at import (a default, a constant, a class body)
        ids = set(base.durations)
    return sorted(ids, key=lambda t: (base.durations.get(t, 0.0), t))


def run_module(name: str, tests: Sequence[str], parallel: int = 2, only: Callable[[Mutant], bool] | None = None,
               progress: Callable[[str], None] = lambda _s: None) -> Report:
    """Every mutant of module ``name`` (dotted) against ``tests`` (pytest arguments)."""
    path = module_path(name)
    source = path.read_text()
    began = time.monotonic()
    base = baseline(name, tests)
    progress(f"{name}: baseline {base.seconds:.1f}s, {len(base.durations)} tests")
    report = Report(name, str(path.relative_to(REPO)), list(tests), round(base.seconds, 2))
    jobs: list[_Job] = []
    for mutant in mutants(source):
        if only is not None and not only(mutant):
            continue
        if not check(source, mutant):
            continue
        selected = _select(mutant, base)
        if selected is None:
            report.outcomes.append(Outcome(mutant.key, mutant.operator, mutant.line, mutant.describe(), "uncovered"))
            continue
        cost = sum(base.durations.get(t, 0.0) for t in selected)
        jobs.append(_Job(mutant, mutant.apply(source), selected, timeout=20.0 + 5 * cost))

    def done(job: _Job, status: str, seconds: float, out: Path, log: Path) -> None:
        m = job.mutant
        assert m is not None
        detail = ""
        if status == "error":
            detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        report.outcomes.append(Outcome(m.key, m.operator, m.line, m.describe(), status, len(job.tests),
                                       round(seconds, 2), detail))
        progress(f"  {status:9} {m.describe()}")

    run_jobs(jobs, name, path, parallel, done)
    report.outcomes.sort(key=lambda o: (o.line, o.key))
    report.seconds = round(time.monotonic() - began, 1)
    return report
