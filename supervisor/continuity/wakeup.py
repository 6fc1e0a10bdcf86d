"""The wakeup briefing: what a restarted agent reads first, within a token budget.

Sections, in the order they are printed:

1. the task and the state at interruption: the module's own
   (``tasks/<module>.md``) and the global one (``current-task.md``)
2. hard constraints (never trimmed)
2a. where the agent stopped: the ask, the plan, the files in flight, the last
   commands and how they ended, what was uncommitted and the WIP commit, from
   the agent's own trail (:mod:`.stopped`; kept by the daemon at each
   checkpoint and crash)
3. the latest decisions of the module and the global log, merged by time
4. the snapshot of the module's latest decision
5. the module's file tree (scope globs, first 30 files)
6. recent engram lines of the module and global ones, confirmed and hypotheses apart
7. the module's valid facts (stale flagged, invalid left out) and global facts
8. the recent summary (unless another module's session wrote it)
9. backtrack: older decisions whose files or words match the current task
10. warnings
11. memory sync, when the store is shared: when this clone last synced (how
    fresh its view of the other hosts is) and the newest decisions it got from them

A module's briefing never shows another module's task, notes, decisions or
facts.  A decision another unit's agent recorded (its ``by:`` field, set by
the daemon's memory channel) is shown as that unit's data, quoted, never in
the words of an instruction: only the person's text speaks to the agent.

Budget: tokens are estimated with :func:`supervisor.tokens.estimate_tokens`
(4 ASCII characters or 1 other character per token).  When the briefing is
over budget, first every item longer than :func:`.briefing.item_cap` tokens is cut,
with the exact command that prints it whole; then, while still over, one item
is removed from the least important section that still has items, in
:data:`TRIM_ORDER`; the constraints are never cut or trimmed
(:mod:`.briefing`).  Every trimmed section says how much went and the command
that gets it back.

Secrets: the rendered text is redacted
(:func:`~supervisor.session.redact.redact_text`; with the unit's secret
environment values in :func:`unit_wakeup`), whatever an agent wrote into
``.agent/``: the briefing is typed into the model.

Determinism: the text depends only on the files (no clock, no randomness,
sorted listings), so the same inputs give byte-identical output.  Decision
logs are read from their tails, so the cost stays flat as the logs grow.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..memory import decision_index, engram, facts, lineformat
from ..memory.decisions import Entry
from ..memory.gitfiles import list_files, matches
from ..memory.store import AgentPaths, read_text, validate_module
from ..memory.sync import read_record
from ..session.redact import redact_text
from ..tokens import estimate_tokens
from . import stopped as stopped_state
from .briefing import Section, cut_text, fit, item_cap, render
from .sections import (
    constraints_section,
    _decision_ref,
    _decisions_section,
    _entry_line,
    _module_args,
    _q,
    _snapshot_section,
    _task_section,
    _words,
)

__all__ = ["TRIM_ORDER", "Wakeup", "build_wakeup", "cut_text", "item_cap", "run_wakeup_command", "unit_wakeup"]

if TYPE_CHECKING:  # pragma: no cover
    from ..config.units import UnitSpec

DEFAULT_BUDGET = 2500
DEFAULT_DECISIONS = 5
TREE_FILES = 30
ENGRAM_LINES = 12
BACKTRACK_WINDOW = 500
BACKTRACK_MAX = 5
SYNC_DECISIONS = 3
COMMAND_TIMEOUT = 30.0
# least important first; "constraints" is never trimmed
TRIM_ORDER = (
    "backtrack",
    "summary",
    "tree",
    "hypotheses",
    "snapshot",
    "stopped",
    "facts",
    "confirmed",
    "decisions",
    "warnings",
    "task",
    "sync",
)
_STOPWORDS = frozenset(
    "the and for with that this from into when then than what which while will would should could have has "
    "been were are was not but all any each more most some such only also just over under after before about "
    "task state interruption current describe here make sure use using used file files module code work".split()
)


@dataclass(frozen=True)
class Wakeup:
    """A rendered briefing and what it left out."""

    text: str
    tokens: int
    budget: int
    trimmed: tuple[str, ...] = ()  # "decisions: 3 item(s); get them with: agentd recall ..."
    warnings: tuple[str, ...] = field(default=())
    source: str = "briefing"  # or the unit's own [wakeup] command
    cut: tuple[str, ...] = ()  # "decisions: 1 item(s) cut to 250 tokens"


def _tree_section(paths: AgentPaths, scope: Sequence[str], full_cmd: str) -> Section:
    try:
        files = list_files(paths.root, scope)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return Section("tree", "Module files", [f"(could not list files: {exc})"])
    where = ", ".join(scope) if scope else "whole project"
    items = files[:TREE_FILES]
    if len(files) > TREE_FILES:
        items.append(f"... {len(files) - TREE_FILES} more files in scope")
    return Section("tree", f"Module files ({where}; first {TREE_FILES})", items, restore=full_cmd)


def _note_ref(n: engram.Note) -> str:
    return _q(["agentd", "recall", "--kind", "engram", f"[{n.time}]", *_words(n.text)])


def _engram_sections(paths: AgentPaths, module: str | None) -> list[Section]:
    notes = list(reversed(engram.recent(paths, ENGRAM_LINES, module)))
    mod = _module_args(module)
    confirmed = Section("confirmed", "Engram: confirmed (newest first)", [],
                        restore=_q(["agentd", "recall", "--kind", "engram", "--tag", "confirmed", *mod]))
    other = Section("hypotheses", "Engram: hypotheses, not yet confirmed (newest first)", [],
                    restore=_q(["agentd", "recall", "--kind", "engram", "--tag", "hypothesis", *mod]))
    for n in notes:
        where = f"({n.module}) " if module is not None and n.module else ""
        if n.kind == "confirmed":
            confirmed.add(f"- [{n.time}] {where}{n.text}", _note_ref(n))
        else:
            other.add(f"- [{n.time}] [{n.kind}] {where}{n.text}", _note_ref(n))
    return [confirmed, other]


def _facts_section(paths: AgentPaths, module: str | None, warnings: list[str]) -> Section:
    restore = _q(["agentd", "recall", "--kind", "fact", *_module_args(module)])
    section = Section("facts", f"Facts ({module or 'global'}{' + global' if module else ''})", [], restore)
    for mod in ([module] if module else []) + [None]:
        for fact in facts.load(paths, mod):
            if fact.status == "invalid":
                continue
            status = facts.current_status(paths.root, fact)
            flag = ""
            if status == "stale":
                flag = "[STALE: source changed] "
                warnings.append(f"fact {fact.id} is stale: {fact.source} changed (run `agentd fact check`)")
            section.add(f"- {fact.id} {flag}{fact.text} (source: {fact.source or 'engram'})",
                        _q(["agentd", "recall", "--kind", "fact", fact.id]))
    return section


_SUMMARY_MODULE_RE = re.compile(r"\bfor module ([A-Za-z0-9][A-Za-z0-9_.-]*?)[:.,;]?(?:\s|$)")


def _summary_section(paths: AgentPaths, module: str | None, full_cmd: str) -> Section:
    """The latest session summary, unless it was written for another module."""
    text = read_text(paths.recent_summary)
    section = Section("summary", "Recent summary", [], restore=full_cmd)
    m = _SUMMARY_MODULE_RE.search(text[:1000])
    if m and m.group(1) not in ("global", module or "global"):
        section.empty_text = f"(the latest summary is module {m.group(1)}'s, not shown here)"
        return section
    lines = [ln for ln in text.splitlines() if not re.fullmatch(r"#\s*Recent summary\s*", ln.strip(), re.I)]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    for line in lines:
        section.add(line, _q(["cat", paths.rel(paths.recent_summary)]))
    return section


def task_terms(task_text: str) -> tuple[list[str], list[str]]:
    """Path-like tokens and keywords named by the task (deterministic, sorted)."""
    tokens = re.findall(r"[\w./*-]+", task_text)
    path_like = sorted({t.strip(".") for t in tokens if "/" in t or re.search(r"\w\.\w{1,5}$", t)})
    words = sorted({w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_]{3,}", task_text)} - _STOPWORDS)
    words += sorted(set(re.findall(r"[\u4e00-\u9fff]{2,}", task_text)))
    return path_like, words


def _backtrack_section(paths: AgentPaths, module: str | None, task_text: str, shown: list[Entry],
                       unit: str | None = None) -> Section:
    """Older decisions among the newest :data:`BACKTRACK_WINDOW` of the global and the module's log whose files or
    words match the task: read from the decision index (:mod:`~supervisor.memory.decision_index`), which gives
    what :func:`~supervisor.memory.decisions.latest` would, without parsing lines that did not change."""
    path_like, words = task_terms(task_text)
    restore = _q(["agentd", "recall", "--kind", "decision", *words[:4]]) if words else "agentd recall --kind decision"
    section = Section("backtrack", "Backtrack: older decisions that match the task", [], restore=restore)
    if not path_like and not words:
        return section
    seen = {e.decision.snapshot or (e.path, e.offset) for e in shown}
    with decision_index.Session(paths) as index:
        pool = index.window(None, BACKTRACK_WINDOW)
        if module is not None:
            pool += index.window(module, BACKTRACK_WINDOW)
    lowered = [w.lower() for w in words]
    touches: dict[str, bool] = {}  # a task path against a decision's file glob (many decisions name the same)
    scored = []
    for e in pool:
        if (e.snapshot or (e.path, e.offset)) in seen:
            continue
        path_hits = 0
        for p in path_like:
            for f in e.files:
                key = f"{p}\0{f}"
                hit = touches.get(key)
                if hit is None:
                    hit = touches[key] = matches(f, [p]) or matches(p, [f])
                if hit:
                    path_hits += 1
                    break
        word_hits = sum(1 for w in lowered if w in e.hay)
        if path_hits or word_hits >= 2:
            scored.append((path_hits * 3 + word_hits, e.sort_key(), e))
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    for _, _, item in scored[:BACKTRACK_MAX]:
        entry = item.entry()
        if entry is not None:
            section.add(_entry_line(entry, unit), _decision_ref(entry))
    return section


def _sync_section(paths: AgentPaths, module: str | None, warnings: list[str], unit: str | None = None) -> Section | None:
    """How fresh this clone's view of the other hosts is, and the newest decisions they sent (None: never synced)."""
    record = read_record(paths)
    if record is None:
        return None
    section = Section("sync", "Memory sync (other hosts)", [], restore=_q(["agentd", "log", "--all"]))
    where = f"{record.remote}/{record.branch}"
    if record.time:
        section.add(f"memory from other hosts as of the last sync with {where}: {record.time} (commit {record.commit[:12]})")
    else:
        section.add(f"never synced with {where} yet: nothing from other hosts")
    if record.error:
        warnings.append(f"the last sync attempt ({record.last_attempt}) failed: {record.error}")
    got = []
    for stem_module in dict.fromkeys([module, None]):
        for line in record.received.get(paths.log_stem(stem_module), []):
            try:
                got.append(Entry(lineformat.parse(line), stem_module, paths.decisions(stem_module), 0))
            except lineformat.LineError:
                continue
    got.sort(key=Entry.sort_key, reverse=True)
    if got:
        section.add(f"newest decisions received from other hosts ({record.received_total} in all):")
    for e in got[:SYNC_DECISIONS]:
        section.add(_entry_line(e, unit), _decision_ref(e))
    return section


# Assembly --------------------------------------------------------------------------

def build_wakeup(
    root: Path,
    module: str | None = None,
    scope_paths: Sequence[str] = (),
    budget: int = DEFAULT_BUDGET,
    *,
    decision_count: int = DEFAULT_DECISIONS,
    unit: str | None = None,
) -> Wakeup:
    """Build the briefing for ``module`` (None: global) within ``budget`` tokens; "Where you stopped"
    is ``unit``'s (None: the newest of the module's units)."""
    paths = AgentPaths(Path(root))
    module = validate_module(module)
    if budget <= 0:
        raise ValueError(f"budget {budget}: must be a positive number of tokens")
    warnings: list[str] = []
    if not paths.dir.is_dir():
        warnings.append(f"{paths.rel(paths.dir)} does not exist: run `agentd init`")
    scope = [p for p in scope_paths if p.strip()]
    full_args = ["agentd", "wakeup", *(["--module", module] if module else [])]
    full_args += [a for p in scope for a in ("--scope", p)]

    task_sec, task_text = _task_section(paths, module, warnings)
    constraints = constraints_section(paths, warnings)
    stop_sec = stopped_state.section(stopped_state.load(paths.root, unit, module))
    dec_sec, latest = _decisions_section(paths, module, decision_count, warnings, unit)
    snap_sec = _snapshot_section(paths, module, latest, scope)
    tree_sec = _tree_section(paths, scope, "")
    engram_secs = _engram_sections(paths, module)
    fact_sec = _facts_section(paths, module, warnings)
    summary_sec = _summary_section(paths, module, "")
    back_sec = _backtrack_section(paths, module, task_text, latest, unit)
    sync_sec = _sync_section(paths, module, warnings, unit)
    warnings = list(dict.fromkeys(warnings))
    warn_sec = Section("warnings", "Warnings", list(warnings))
    sections = [task_sec, constraints, stop_sec, dec_sec, snap_sec, tree_sec, *engram_secs, fact_sec, summary_sec, back_sec,
                warn_sec, *([sync_sec] if sync_sec else [])]

    header = f"# Wakeup briefing: module {module or 'global'}"
    untrimmed = estimate_tokens(render(header, sections))
    full_cmd = _q([*full_args, "--budget", str(max(untrimmed * 2, budget))])
    for s in (task_sec, tree_sec, summary_sec, warn_sec, stop_sec):
        s.restore = full_cmd
    header += f" (budget {budget} tokens; tokens estimated as 4 ASCII chars or 1 other char each)"
    text = fit(header, sections, budget, TRIM_ORDER)
    tokens = estimate_tokens(text)
    if tokens > budget:
        warnings.append(f"the briefing needs {tokens} tokens, over the budget of {budget}: the constraints alone are too long")
        warn_sec.items = list(warnings)
        text = render(header, sections)
        tokens = estimate_tokens(text)
    redacted = redact_text(text)
    if redacted != text:
        text, tokens = redacted, estimate_tokens(redacted)
    trimmed = tuple(f"{s.key}: {s.trimmed} item(s); get them with: {s.restore}" for s in sections if s.trimmed)
    cut = tuple(f"{s.key}: {s.cut} item(s) cut to {item_cap(budget)} tokens" for s in sections if s.cut)
    return Wakeup(text=text, tokens=tokens, budget=budget, trimmed=trimmed, warnings=tuple(warnings), cut=cut)


# Unit-defined wakeup commands ------------------------------------------------------

def run_wakeup_command(root: Path, argv: Sequence[str], timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a unit's own wakeup command (argv list, no shell) in the project root; its stdout.

    Raises ``RuntimeError`` with the command, the exit status and stderr when it fails.
    """
    if not argv:
        raise ValueError("the wakeup command is empty")
    try:
        proc = subprocess.run(
            list(argv), cwd=root, capture_output=True, text=True, timeout=timeout, check=False, errors="replace"
        )
    except FileNotFoundError:
        raise RuntimeError(f"wakeup command {_q(argv)}: {argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"wakeup command {_q(argv)}: no result within {timeout:g}s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"wakeup command {_q(argv)} exited with status {proc.returncode}: {proc.stderr.strip()[:500]}")
    return proc.stdout


def unit_wakeup(spec: UnitSpec, root: Path) -> Wakeup:
    """The one rule for a unit's wakeup: its own ``[wakeup] command``, else the built briefing.

    The daemon starts every fresh session from this, and ``agentd wakeup UNIT``
    prints exactly this, so "it prints what the agent gets" holds by
    construction.  Blocking (reads files, may run the command).
    """
    env = spec.agent.env
    if spec.wakeup.command:
        text = redact_text(run_wakeup_command(root, list(spec.wakeup.command)), env)
        return Wakeup(text, estimate_tokens(text), spec.wakeup.budget, source=" ".join(spec.wakeup.command))
    wake = build_wakeup(root, spec.module, list(spec.scope.paths), spec.wakeup.budget, unit=spec.name)
    if env:
        text = redact_text(wake.text, env)
        if text != wake.text:
            wake = replace(wake, text=text, tokens=estimate_tokens(text))
    return wake
