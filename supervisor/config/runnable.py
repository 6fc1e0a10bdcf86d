"""Commands agentd runs from configuration: refused when what they run lies where an agent may write.

"Never run a command an agent can configure."  The configuration itself is
the person's (``units/``, ``etc/agentd.toml`` and ``plans/`` are read-only to
every fenced agent), but a command names files: ``[wakeup] command = ["bash",
"etc/wakeup.sh"]`` runs whatever ``etc/wakeup.sh`` holds when agentd runs it.
If a unit's agent may write that script (its ``[scope] paths`` or
``writable`` cover it), the agent decides what agentd runs: outside any fence
(a wakeup command, ``[notify]``), or as another unit (an ``[agent] command``
in another unit's scope runs that agent's code inside this unit's fence,
speaking for it).

So each such command is checked against every unit's writable area
(:func:`may_write`: what :mod:`supervisor.plan.planfile` uses for the plan
files too) and refused, with the reason, by ``agentd check`` and at start:

* what a command *runs* (:func:`runs`): its program when given as a path
  (whether or not it exists yet: an agent may create it) or found on ``PATH``
  inside the project, the script an interpreter runs (``sh x.sh``, ``python
  x.py``, ``python tool/``: existing or not), every argument naming an
  existing executable file (``timeout 5 x.sh``; not data: ``--log FILE``),
  the words of a ``-c`` shell string naming an existing file it runs (in a
  command's place, after an interpreter, ``source`` or ``.``, or executable;
  not one it reads: ``tail -1 .agent/decisions-core.log``; a string that
  evals a file's content is not seen),
  a Python ``-m`` module below the working directory;
  and for ``python -c`` / ``python -m`` (without ``-I``), which import from
  their working directory first, that directory itself when an agent may add
  a file to it (``python -I -m tool`` is safe there);
* :func:`command_problem` says which unit may write which of them (for a
  link, where it points and where the link lies: an agent that may write the
  link's directory may re-point it);
* :func:`refuse_agent_writable` refuses a unit whose ``[wakeup] command``
  runs a file any unit's agent may write, or whose ``[agent] command`` runs a
  file *another* unit's agent may write (the unit's own agent changing its
  own launcher gains nothing agentd's fence does not allow; but a unit that
  keeps its own sandbox instead could start its next session without it:
  :func:`own_launcher` is ``agentd check``'s warning).  Limit: an ``[agent] command`` is not held to the
  working-directory rule (``python -m agent`` in a project root another unit
  may add files to); agents are binaries, and give agents scopes.

``done_when`` commands are the plan's checks: they run code the agent wrote by
design, inside a fence of their own (:mod:`supervisor.plan.checks`); the plan
file warns when a check runs a path an agent may change.  Pure but for the
file system lookups (``exists``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .units import UnitError, UnitSpec

_SHELLS = re.compile(r"(ba|da|z|k|fi)?sh")
_PYTHON = re.compile(r"python[\d.]*")
#: Programs whose first word that is not an option is a script they run (which need not exist yet).
_INTERPRETERS = re.compile(r"(ba|da|z|k|fi)?sh|python[\d.]*|node(js)?|perl[\d.]*|ruby[\d.]*|php[\d.]*|lua[\d.]*"
                           r"|tclsh[\d.]*|Rscript|deno|bun")


def _rel(path: Path, root: Path, *, link: bool = False) -> str | None:
    """``path`` relative to the project root (links resolved, as the kernel would; ``link``: but the last
    part, where a link itself lies), "" for the root itself."""
    path = Path(path)
    try:
        where = path.parent.resolve() / path.name if link and path.name else path.resolve()
        rel = where.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None
    return "" if rel == "." else rel


def may_write(unit: UnitSpec, rel: str, root: Path) -> bool:
    """Whether ``unit``'s agent may write the project path ``rel`` (its scope less its forbid globs, or its extra
    writable paths)."""
    from ..memory.gitfiles import matches

    paths = [g for g in unit.scope.paths if g.strip()]
    if not paths or matches(rel, paths):
        forbidden = [g for g in unit.scope.forbid if g.strip()]
        if not (forbidden and matches(rel, forbidden)):
            return True
    for extra in unit.scope.writable:
        target = Path(extra).expanduser()
        target = target if target.is_absolute() else Path(root) / target
        inside = _rel(target, root)
        if inside is not None and (inside == "" or rel == inside or rel.startswith(inside.rstrip("/") + "/")):
            return True
    return False


def _outside_writers(units: Mapping[str, UnitSpec], path: Path) -> set[str]:
    """Outside the project no scope reaches ``path``, but an absolute ``writable`` may."""
    return {n for n, u in units.items() if any(
        Path(os.path.normpath(Path(w).expanduser())) in (Path(path), *Path(path).parents)
        for w in u.scope.writable if Path(w).expanduser().is_absolute())}


def writers(units: Mapping[str, UnitSpec], path: Path, root: Path) -> list[str]:
    """The units whose agent may write ``path`` (or, for a directory, a file below it).

    Both where a link points and where the link itself lies count: an agent that may write the link's
    directory may point it elsewhere (or replace it with a script)."""
    names: set[str] = set()
    path = Path(os.path.normpath(path))
    for link in (False, True) if path.is_symlink() else (False,):
        rel = _rel(path, root, link=link)
        if rel is None:
            names |= _outside_writers(units, path) | _outside_writers(units, path.resolve())
            continue
        probes = [rel] if link or not path.is_dir() else [rel, f"{rel}/x" if rel else "x"]
        names |= {n for n, u in units.items() if any(may_write(u, p, root) for p in probes)}
    return sorted(names)


def _existing(word: str, cwd: Path, *, missing: bool = False) -> Path | None:
    """The file ``word`` names (from ``cwd``) when it exists, or (``missing``) whether or not it does."""
    if not word or word.startswith("-") or "\0" in word:
        return None
    candidate = Path(word).expanduser()
    candidate = candidate if candidate.is_absolute() else cwd / candidate
    try:
        there = missing or candidate.exists() or candidate.is_symlink()
    except OSError:
        there = missing
    return Path(os.path.normpath(candidate)) if there else None


def _script(name: str, words: Sequence[str]) -> str | None:
    """The script an interpreter ``name`` runs: its first word that is not an option (or the word after
    ``--``); None for code given inline (``-c``, ``-e``), a module (``-m``), or no interpreter."""
    if not _INTERPRETERS.fullmatch(name):
        return None
    shell = bool(_SHELLS.fullmatch(name))
    code = ("c",) if shell else ("c", "m") if _PYTHON.fullmatch(name) else ("e", "E", "p", "r")  # inline code
    skip = False
    for n, word in enumerate(words):
        if skip:
            skip = False
        elif word == "--":
            return words[n + 1] if n + 1 < len(words) else None
        elif word in ("--eval", "--print"):
            return None
        elif word.startswith("-") and not word.startswith("--"):
            if any(c in word[1:] for c in code):
                return None
            skip = word in (("-o", "-O") if shell else ("-W", "-X"))  # an option's own argument
        elif not word.startswith("-"):
            return word
    return None


def runs(argv: Sequence[str], cwd: Path, path_env: str | None = None, *, cwd_imports: bool = True) -> list[Path]:
    """The files and directories ``argv`` runs or loads code from (see the module doc), as absolute paths.

    ``cwd_imports``: count the working directory of a Python run with ``-c`` or ``-m`` (not ``-I``/``-P``,
    which leave it out of ``sys.path``)."""
    if not argv:
        return []
    found: list[Path] = []
    program = argv[0]
    name = Path(program).name
    if "/" in program:  # a path: what lies there when agentd runs it, whether or not it exists now
        hit = _existing(program, cwd, missing=True)
        if hit is not None:
            found.append(hit)
    else:
        where = shutil.which(program, path=path_env if path_env is not None else os.environ.get("PATH"))
        if where:
            found.append(Path(where))
    words = list(argv[1:])
    code: list[str] = []  # the words of a shell string: a file they run counts (below)
    if _SHELLS.fullmatch(name) and "-c" in words:
        at = words.index("-c")
        if at + 1 < len(words):
            try:
                code = shlex.split(words[at + 1])
            except ValueError:
                code = words[at + 1].split()
    script = _script(name, argv[1:])
    for word in words:
        hit = _existing(word, cwd, missing=word == script)
        # a directory runs only as a script; a file as the script, or as a program a wrapper starts
        # (`timeout 5 x.sh`: executable), never as a value (`--input-log FILE`, data the agent may write anyway)
        if hit is not None and (word == script or (hit.is_file() and os.access(hit, os.X_OK))):
            found.append(hit)
    for k, word in enumerate(code):
        hit = _existing(word, cwd)
        if hit is None or hit.is_dir():
            continue
        # a file the shell string runs: in a command's place, after an interpreter or `source`/`.`, or
        # executable (`./x`); one it only reads (`tail -1 .agent/decisions-core.log`) is data, not code
        before = code[k - 1].rstrip(";&|(") if k else ""
        if (k == 0 or code[k - 1].endswith((";", "&&", "||", "|", "(")) or before in ("source", ".", "exec")
                or _INTERPRETERS.fullmatch(Path(before).name) or os.access(hit, os.X_OK)):
            found.append(hit)
    words += code
    if _PYTHON.fullmatch(name):
        if "-m" in words and words.index("-m") + 1 < len(words):
            module = words[words.index("-m") + 1].replace(".", "/")
            for candidate in (cwd / f"{module}.py", cwd / module):
                if candidate.exists():
                    found.append(candidate)
        first = next((i for i, w in enumerate(words) if w in ("-c", "-m")), None)
        safe = first is not None and any(w in ("-I", "-P") or (w.startswith("-") and not w.startswith("--")
                                                               and ("I" in w or "P" in w)) for w in words[:first])
        if cwd_imports and first is not None and not safe:  # sys.path[0] is the working directory: a module there wins
            found.append(cwd / "__cwd__.py")
    return list(dict.fromkeys(found))


def command_problem(what: str, argv: Sequence[str], cwd: Path, units: Mapping[str, UnitSpec], root: Path,
                    *, path_env: str | None = None, exclude: str | None = None, cwd_imports: bool = True) -> str | None:
    """Why agentd must not run ``argv`` (``what``: where it is configured), or None: a unit's agent (but
    ``exclude``) may write a file it runs."""
    others = {n: u for n, u in units.items() if n != exclude}
    for path in runs(argv, cwd, path_env, cwd_imports=cwd_imports):
        names = writers(others, path, root)
        if not names:
            continue
        rel = _rel(path, root)
        shown = ("its working directory (Python imports from it)" if path.name == "__cwd__.py" else
                 "the project directory" if rel == "" else str(rel if rel is not None else path))
        units_said = ", ".join(repr(n) for n in names)
        return (f"{what} runs {shown}, which the agent of unit {units_said} may write: agentd never runs a command "
                "an agent can change; keep what it runs outside every unit's [scope] paths and writable (e.g. in "
                "etc/), or narrow those scopes")
    return None


def refuse_agent_writable(specs: dict[str, UnitSpec], root: Path) -> tuple[dict[str, UnitSpec], list[UnitError]]:
    """Units whose ``[wakeup] command`` runs what any unit's agent may write, or whose ``[agent] command`` runs
    what another unit's agent may write, are refused (one error each, naming the file and the unit)."""
    from .units import UnitError

    errors: list[UnitError] = []
    for name, spec in specs.items():
        problems = []
        if spec.wakeup.command:
            found = command_problem("[wakeup] command", spec.wakeup.command, Path(root), specs, root)
            if found:
                problems.append(found)
        found = command_problem("[agent] command", spec.agent.command, spec.workdir_path(root), specs, root,
                                path_env=spec.agent.env.get("PATH"), exclude=name, cwd_imports=False)
        if found:
            problems.append(found.replace("never runs a command an agent can change",
                                          "never runs one agent's code as another unit"))
        if problems:
            errors.append(UnitError(spec.path, "; ".join(problems)))
    refused = {e.path for e in errors}
    return {n: s for n, s in specs.items() if s.path not in refused}, errors


def own_launcher(spec: UnitSpec, root: Path) -> str | None:
    """A warning when the unit's own agent may write what its ``[agent] command`` runs: it then decides how its
    next session starts (without its own sandbox's flags, say), or None."""
    found = command_problem("[agent] command", spec.agent.command, spec.workdir_path(root), {spec.name: spec}, root,
                            path_env=spec.agent.env.get("PATH"), cwd_imports=False)
    if found is None:
        return None
    head = found.split(": agentd never runs", 1)[0]
    return (f"{head}: it decides how its next session starts (an agent that keeps its own sandbox may start "
            "without it); keep the launcher outside its [scope]")
