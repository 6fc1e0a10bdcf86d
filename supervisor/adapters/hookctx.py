"""What agentd adds to an agent's turns: through its native hooks (Codex and Claude Code), or with the text it types.

Two things, both plain text the adapters return as a hook's
``additionalContext`` (an agent without hooks, a generic REPL, gets the same
from :mod:`supervisor.adapters.generic`: the digest with each message agentd
types, the facts typed at the turn end after the scope watcher saw its first
write in a module, :meth:`HookContext.path_context`):

* **the hard constraints in every turn** (``UserPromptSubmit``):
  :func:`constraints_digest` is every line of ``.agent/constraints.md`` when they
  fit in :data:`DIGEST_BUDGET` tokens, else as many as fit, each cut short,
  with their count and where the full list is.  Both CLIs keep each turn's
  additional context in the conversation, so this is paid once per turn and
  stays until the next compaction: it must stay small;
* **a module's facts when the agent touches it** (``PreToolUse`` on an edit or
  a write): :func:`edited_paths` finds the paths a tool call writes (Claude
  Code's ``Write``/``Edit``/``MultiEdit``/``NotebookEdit``, Codex's
  ``apply_patch`` and shell commands: redirections and the usual file
  commands), :class:`ModuleMap` says which unit's module each lies in (the
  units' ``[scope] paths``), and :func:`module_facts` lists that module's valid
  facts and its stale ones, flagged.  :class:`HookContext` gives each module's
  facts once per session (again after a compaction).

Pure functions over the project's files; the adapters call them from
``hook_output`` (the daemon runs that off its event loop).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..memory.gitfiles import matches
from ..tokens import estimate_tokens

#: Default token budget of the constraints digest added to every turn.
DIGEST_BUDGET = 150
#: How the digest begins (a REPL's test double strips what follows it: supervisor/fakeagent).
DIGEST_HEAD = "agentd: the project's"
#: Token budget of one module's facts.
FACTS_BUDGET = 400
#: Tools that write the file named by ``tool_input.file_path`` (Claude Code).
FILE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)
#: Shell commands whose (non-option) operands are all written; and those whose last operand is.
_WRITES_ALL = {"tee", "touch", "rm", "mkdir", "truncate", "rmdir", "chmod"}
_WRITES_LAST = {"cp", "mv", "install", "ln", "rsync"}
_REDIRECT = re.compile(r"^(?:\d|&)?>>?(.*)$")


def constraint_lines(root: Path) -> list[str]:
    """The hard constraints of ``.agent/constraints.md``, one per line (comments and headings dropped)."""
    try:
        text = (Path(root) / ".agent" / "constraints.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def constraints_digest(root: Path, budget: int = DIGEST_BUDGET) -> str | None:
    """The hard constraints for one turn, in at most ``budget`` tokens (None: there are none)."""
    lines = [re.sub(r"^[-*]\s+", "", ln) for ln in constraint_lines(root)]
    if not lines:
        return None
    head = f"{DIGEST_HEAD} {len(lines)} hard constraint{'s' if len(lines) != 1 else ''} (never break them):"
    full = "\n".join([head, *(f"- {ln}" for ln in lines)])
    if estimate_tokens(full) <= budget:
        return full
    tail = "(full list: .agent/constraints.md)"
    kept: list[str] = []
    used = estimate_tokens(head) + estimate_tokens(tail) + 2
    for line in lines:
        short = line if len(line) <= 90 else line[:87].rstrip() + "..."
        cost = estimate_tokens(short) + 2
        if used + cost > budget:
            break
        kept.append(f"- {short}")
        used += cost
    more = len(lines) - len(kept)
    if more:
        tail = f"... and {more} more (full list: .agent/constraints.md)"
    return "\n".join([head, *kept, tail])


@dataclass(frozen=True)
class ModuleScope:
    module: str
    globs: tuple[str, ...]  # relative to the project root; empty: the whole project


class ModuleMap:
    """Which module a project path belongs to, from the units' ``[scope] paths``."""

    def __init__(self, root: Path, scopes: list[ModuleScope]) -> None:
        self.root = Path(root).resolve()
        # units naming their paths first, then units scoped to the whole project
        self.scopes = sorted(scopes, key=lambda s: (not s.globs, s.module))

    @classmethod
    def of_units(cls, root: Path, units_dir: Path) -> ModuleMap:
        from ..config.units import load_units

        specs, _errors = load_units(units_dir)
        return cls(root, [ModuleScope(s.module, tuple(s.scope.paths)) for s in specs.values()])

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the project root ('/'-separated), or None outside it or inside ``.agent/``."""
        try:
            rel = Path(path).resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError):
            return None
        if rel in (".", "") or rel.split("/")[0] in (".agent", ".agentd", ".git"):
            return None
        return rel

    def module_of(self, path: Path) -> str | None:
        rel = self.relative(path)
        if rel is None:
            return None
        for scope in self.scopes:
            if matches(rel, scope.globs):
                return scope.module
        return None


def edited_paths(tool_name: str, tool_input: Mapping[str, Any], cwd: Path) -> list[Path]:
    """The paths a tool call writes, as far as its input says (absolute, first seen first)."""
    found: list[str] = []
    if tool_name in FILE_TOOLS:
        for key in ("file_path", "notebook_path", "path"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                found.append(value)
    else:
        texts = [v for k, v in tool_input.items() if isinstance(v, str) and k in ("command", "input", "patch", "cmd")]
        for text in texts:
            patched = [a or b for a, b in _PATCH_FILE.findall(text)]
            found += patched if patched else shell_writes(text)
    out: list[Path] = []
    for raw in found:
        path = Path(raw.strip()).expanduser()
        path = path if path.is_absolute() else Path(cwd) / path
        if path not in out:
            out.append(path)
    return out


def shell_writes(command: str) -> list[str]:
    """Paths a shell command line writes: redirection targets and the operands of the usual file commands."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return []
    out: list[str] = []
    words: list[str] = []

    def flush() -> None:
        if not words:
            return
        name = Path(words[0]).name
        operands = [w for w in words[1:] if not w.startswith("-")]
        if name in _WRITES_ALL:
            out.extend(operands)
        elif name in _WRITES_LAST and len(operands) >= 2:
            out.append(operands[-1])
        elif name == "sed" and any(w.startswith("-i") for w in words[1:]) and operands:
            out.append(operands[-1])
        words.clear()

    expect_target = False
    for token in tokens:
        if expect_target:
            expect_target = False
            if not set(token) <= set(";&|"):
                out.append(token)
                continue
        if token and set(token) <= set(";&|"):
            flush()
            continue
        redirect = _REDIRECT.match(token)
        if redirect:
            target = redirect.group(1)
            if target.startswith("&"):
                continue  # 2>&1
            if target:
                out.append(target)
            else:
                expect_target = True
            continue
        words.append(token)
    flush()
    return [p for p in out if p and p not in ("/dev/null", "-")]


def module_facts(root: Path, module: str, budget: int = FACTS_BUDGET) -> str | None:
    """A module's valid facts and its stale ones (flagged), in at most ``budget`` tokens; None when it has none."""
    from ..memory import facts as facts_mod
    from ..memory.store import AgentPaths

    try:
        facts = facts_mod.load(AgentPaths(Path(root)), module)
    except Exception:  # noqa: BLE001 - a broken facts file must not break the agent's tool call
        return None
    lines: list[str] = []
    for fact in facts:
        status = facts_mod.current_status(Path(root), fact)
        if status == "invalid":
            continue
        flag = "" if status == "valid" else "[STALE: its source lines changed; re-check before relying on it] "
        source = f" (source: {fact.source})" if fact.source else ""
        lines.append(f"- {flag}{fact.text}{source}")
    if not lines:
        return None
    head = f"agentd: known facts of module {module} (you are about to edit it):"
    kept, used = [], estimate_tokens(head)
    for line in lines:
        if used + estimate_tokens(line) > budget:
            kept.append(f"... and {len(lines) - len(kept)} more: `agentd fact list --module {module}`")
            break
        kept.append(line)
        used += estimate_tokens(line)
    return "\n".join([head, *kept])


@dataclass
class HookContext:
    """One session's hook context: the modules whose facts were already given."""

    root: Path
    units_dir: Path
    given: set[str] = field(default_factory=set)
    _map: ModuleMap | None = None
    _digest: tuple[tuple[int, int] | None, str | None] | None = None  # (constraints.md's mtime and size, digest)

    def module_map(self) -> ModuleMap:
        if self._map is None:
            self._map = ModuleMap.of_units(self.root, self.units_dir)
        return self._map

    def prompt_context(self) -> str | None:
        """The constraints digest for a turn that begins (``UserPromptSubmit``; a message typed into a REPL):
        read again only when ``constraints.md`` changed."""
        try:
            info = (Path(self.root) / ".agent" / "constraints.md").stat()
            stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = None
        if self._digest is None or self._digest[0] != stamp:
            self._digest = (stamp, constraints_digest(self.root))
        return self._digest[1]

    def path_context(self, path: Path) -> str | None:
        """Facts of the module ``path`` (absolute) lies in, the first time this session writes in it."""
        module = self.module_map().module_of(path)
        if module is None or module in self.given:
            return None
        self.given.add(module)
        return module_facts(self.root, module)

    def tool_context(self, event: Mapping[str, Any]) -> str | None:
        """Facts of the modules a tool call is about to write, each once per session (``PreToolUse``)."""
        tool = str(event.get("tool_name") or "")
        tool_input = event.get("tool_input")
        if not isinstance(tool_input, Mapping):
            return None
        cwd = Path(str(event.get("cwd") or self.root))
        parts = [text for path in edited_paths(tool, tool_input, cwd) if (text := self.path_context(path))]
        return "\n\n".join(parts) or None

    def compacted(self) -> None:
        """The conversation was compacted: the facts given so far are gone from it."""
        self.given.clear()
