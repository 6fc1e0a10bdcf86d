"""``agentd doctor``: everything wrong with the store, one finding per line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import decisions, facts
from .store import AgentPaths
from .task import read_task


@dataclass(frozen=True)
class Finding:
    """One problem: severity ("error"/"warning"), where, what and what to do."""

    severity: str
    where: str
    message: str

    def render(self) -> str:
        return f"{self.severity}: {self.where}: {self.message}"


def diagnose(root: Path) -> list[Finding]:
    """Malformed/torn decision lines, stale or unreadable fact sources, missing files."""
    paths = AgentPaths(Path(root))
    if not paths.dir.is_dir():
        return [Finding("error", paths.rel(paths.dir), "missing: run `agentd init`")]
    out: list[Finding] = []
    for path, hint in (
        (paths.constraints, "create it with `agentd init` or by hand"),
        (paths.current_task, "create it with `agentd init` or by hand"),
        (paths.engram, "create it with `agentd init`"),
    ):
        if not path.exists():
            out.append(Finding("error", paths.rel(path), f"missing: {hint}"))
    for bad in decisions.scan_bad_lines(paths):
        snippet = bad.text if len(bad.text) <= 60 else bad.text[:57] + "..."
        out.append(Finding("error", f"{paths.rel(bad.path)}:{bad.line}", f"{bad.reason}; line skipped: {snippet!r}"))
    for fact in facts.load_all(paths):
        if fact.status == "invalid":
            continue
        status = facts.current_status(paths.root, fact)
        where = f"{paths.rel(paths.facts(None if fact.module == 'global' else fact.module))}:{fact.line}"
        if status == "stale":
            out.append(Finding("warning", where, f"fact {fact.id} is stale: its source {fact.source} changed or is gone (run `agentd fact check`, then re-add or invalidate it)"))
    task = read_task(paths)
    if paths.current_task.exists() and task.empty:
        out.append(Finding("warning", paths.rel(paths.current_task), "the task is empty: describe the current task"))
    return out
