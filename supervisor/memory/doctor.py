"""``agentd doctor``: everything wrong with the store, one finding per line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..session.redact import redact_text
from . import decisions, facts
from .store import AgentPaths
from .task import read_task

#: Files larger than this are not scanned for secrets (they are reported as skipped).
SECRET_SCAN_MAX = 16 * 1024 * 1024


@dataclass(frozen=True)
class Finding:
    """One problem: severity ("error"/"warning"), where, what and what to do."""

    severity: str
    where: str
    message: str

    def render(self) -> str:
        return f"{self.severity}: {self.where}: {self.message}"


def scan_secrets(paths: AgentPaths) -> list[Finding]:
    """Lines under ``.agent/`` that hold something shaped like a secret (key, token, password).

    ``.agent/`` is committed and typed into the next session, so each is an
    error.  The finding shows the line redacted, never the secret.
    """
    out: list[Finding] = []
    for path in sorted(p for p in paths.dir.rglob("*") if p.is_file() and p.name != ".lock"):
        where = paths.rel(path)
        try:
            if path.stat().st_size > SECRET_SCAN_MAX:
                out.append(Finding("warning", where, f"not scanned for secrets: larger than {SECRET_SCAN_MAX} bytes"))
                continue
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            out.append(Finding("warning", where, f"not scanned for secrets: {exc.strerror or exc}"))
            continue
        redacted = redact_text(text)
        if redacted == text:
            continue
        found = False
        for number, line in enumerate(text.splitlines(), 1):  # only files that hold one: per line
            shown = redact_text(line)
            if shown == line:
                continue
            found = True
            snippet = shown if len(shown) <= 80 else shown[:77] + "..."
            out.append(Finding("error", f"{where}:{number}",
                               f"looks like a secret (shown redacted: {snippet!r}); remove it: .agent/ is "
                               "committed and typed into the next session"))
        if not found:  # a secret only whole across lines
            out.append(Finding("error", where, "looks like it holds a secret across lines; remove it: .agent/ is "
                                               "committed and typed into the next session"))
    return out


def diagnose(root: Path) -> list[Finding]:
    """Malformed/torn decision lines, stale or unreadable fact sources, missing files, secrets."""
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
    out.extend(scan_secrets(paths))
    return out
