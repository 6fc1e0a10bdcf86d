"""How a resumed session came back, in figures: pure functions over two trails and blob hashes.

A session that followed another (a cycle, a crash restart, a scheduled start)
is compared with what the session before it left (:class:`Baseline`: the files
it read and the commands it ran, each with the git blob hash of the files
involved at its end) and with the unit's first, cold session:

* **actions to the first productive edit**: the position (1-based) of the
  first tool call that changed a file in scope and whose change survived
  (the file's blob at the end differs from the one the previous session left);
* **re-reads**: files the previous session had read, read again before this
  session changed them itself, whose blob is the same as the previous session
  left it (when this session never changed the file, its blob at the end must
  still be that one; when it changed it later, the read came first, so the
  file was as it was left);
* **repeated commands**: the same command (whitespace folded) run again with the
  same input files (the files its words name, by blob hash); agentd's own
  commands (the notes and decisions each checkpoint asks for) are not counted;
* **edits made twice**: an edit that makes the very change (the same file, the
  same text written: :attr:`~..trail.model.Action.change`) an edit of the
  previous session made, made again after the respawn;
* **constraint breaks**: edits outside the scope or to a forbidden path, and
  edits within the session's first :data:`UNDO_WINDOW` tool calls that put a
  recorded decision's file back as it was before the decision (its blob at the
  end equals the one in the snapshot before the decision's own);
* **time to resume**: seconds from the session's first tool call to the first
  productive edit, from the agent's own timestamps;
* **tokens to resume**: the tokens of every model request of the session, from
  its first (the wakeup) to the response that made the first productive edit,
  input (cached or not) plus output (:attr:`~..trail.model.Action.tokens`:
  Codex's ``token_count``, Claude Code's ``message.usage``).

A resumed session **fragmented** (:attr:`Figures.fragmented`) when it re-read
a file, repeated a command, made an edit twice or broke a constraint: the
report's headline is the share of resumes that did.

A generic agent's trail is its screen: ``$ cat|less|head|tail FILE`` and
``$ sed -n ...`` lines are reads, other ``$`` lines commands with their exit
status; it shows no edits and no tokens, so :attr:`Figures.cannot` says so.
Nothing here touches a file or a clock.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ..memory.gitfiles import matches
from ..trail.common import is_agentd_command, reads_of_command
from ..trail.model import Action, Kind, Trail

#: A file's blob id at some moment, or None when it did not exist.
Blobs = Mapping[str, "str | None"]


@dataclass
class Baseline:
    """What one session left, for the one after it: its reads and commands with their files' blobs."""

    session: str | None
    reads: dict[str, str | None] = field(default_factory=dict)  # path -> blob at the session's end
    commands: dict[str, dict[str, str | None]] = field(default_factory=dict)  # command -> {input: blob}
    edits: dict[str, str | None] = field(default_factory=dict)  # files it changed -> blob at its end
    changes: dict[str, list[str]] = field(default_factory=dict)  # each edit's change digest -> the files it edited

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Baseline:
        return cls(session=data.get("session"), reads=dict(data.get("reads") or {}),
                   commands={str(k): dict(v or {}) for k, v in (data.get("commands") or {}).items()},
                   edits=dict(data.get("edits") or {}),
                   changes={str(k): [str(p) for p in v or []] for k, v in (data.get("changes") or {}).items()})


#: An edit this early in a resumed session that undoes a decision's file is a constraint break.
UNDO_WINDOW = 20


@dataclass(frozen=True)
class Settled:
    """A recorded decision and the files it changed: path -> (blob before the decision, blob with it)."""

    decision: str
    files: Mapping[str, tuple[str | None, str | None]]


@dataclass
class Figures:
    """One resumed session's figures (see the module docstring); None where they cannot be known."""

    session: str | None
    previous: str | None  # the session it followed (None for a cold session)
    actions: int  # tool calls in its trail
    actions_to_edit: int | None  # position of the first productive edit; None: none (yet)
    cold_actions_to_edit: int | None = None  # the unit's first session's figure, beside it
    rereads: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)  # files an edit changed again the way the session before did
    breaks: list[str] = field(default_factory=list)  # "outside scope: PATH", "forbidden: PATH"
    seconds_to_edit: float | None = None
    tokens_to_edit: int | None = None
    cannot: list[str] = field(default_factory=list)  # what this trail cannot tell
    edits_seen: bool = True  # False for a screen: no edits, so no breaks either (None in the report, not 0)

    @property
    def fragmented(self) -> bool:
        """It re-read, repeated a command, made an edit twice or broke a constraint (the headline's count)."""
        return bool(self.rereads or self.repeated or self.twice or self.breaks)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rereads_count"], data["repeated_count"], data["twice_count"], data["breaks_count"] = (
            len(self.rereads), len(self.repeated), len(self.twice), len(self.breaks))
        data["fragmented"] = self.fragmented
        return data


def norm_command(command: str) -> str:
    return " ".join(command.split())


def reads_of(action: Action) -> tuple[str, ...]:
    """The files an action read: its own ``reads``, or those of a plain read command seen on a screen."""
    if action.ok is False:
        return ()
    if action.reads:
        return action.reads
    if action.kind is Kind.COMMAND and action.command and not action.edits:
        return reads_of_command(action.command) or ()
    return ()


def is_command(action: Action) -> bool:
    """A command that is not only a read (those count as reads, not as repeated commands), nor agentd's own
    (``agentd note``/``decide``/``task-state``: what the checkpoint asks for each time, not repeated work)."""
    return (action.kind is Kind.COMMAND and action.command is not None and not reads_of(action)
            and not is_agentd_command(action.command))


def command_words(command: str) -> list[str]:
    """The words of a command that may name input files (``None``-safe: unparsable text splits on blanks)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return [w for w in words[1:] if w and not w.startswith("-")]


def command_inputs(command: str, exists: Callable[[str], bool]) -> list[str]:
    """The files a command names (the words that are existing files), in order, once each."""
    return list(dict.fromkeys(w for w in command_words(command) if exists(w)))


def baseline(trail: Trail | None, session: str | None, blob: Callable[[str], str | None],
             exists: Callable[[str], bool]) -> Baseline:
    """What ``trail``'s session leaves for the next one, with the blobs as they are now (its end)."""
    out = Baseline(session)
    if trail is None:
        return out
    for action in trail.actions:
        for path in reads_of(action):
            out.reads[path] = blob(path)
        if is_command(action):
            out.commands[norm_command(action.command or "")] = {p: blob(p) for p in command_inputs(action.command or "", exists)}
    for path in trail.files_changed():
        out.edits[path] = blob(path)
    for action in trail.actions:
        if action.change and action.ok is not False and action.edits:
            out.changes[action.change] = list(action.edits)
    return out


def first_productive_edit(trail: Trail, scope: Sequence[str], before: Blobs, after: Blobs) -> int | None:
    """The 1-based position of the first tool call that changed a file in scope for good, or None."""
    for index, action in enumerate(trail.actions, 1):
        if action.ok is False or not action.edits:
            continue
        for path in action.edits:
            if not matches(path, scope):
                continue
            undone = path in before and path in after and before[path] == after[path]
            if not undone:
                return index
    return None


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        a = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return None
    return round((b - a).total_seconds(), 3)


def undone(trail: Trail, settled: Sequence[Settled], now: Blobs, window: int = UNDO_WINDOW) -> list[str]:
    """``undid "DECISION": PATH`` for each decision's file this session edited within its first ``window``
    tool calls and left as it was before the decision."""
    early = {p for a in trail.actions[:window] if a.ok is not False for p in a.edits}
    out: list[str] = []
    for item in settled:
        for path, (before, after) in item.files.items():
            if path in early and before != after and path in now and now[path] == before:
                out.append(f'undid "{item.decision}": {path}')
    return out


def resumed(trail: Trail, session: str | None, previous: Baseline | None, now: Blobs, *, scope: Sequence[str] = (),
            forbid: Sequence[str] = (), cold: int | None = None, generic: bool = False,
            settled: Sequence[Settled] = ()) -> Figures:
    """The figures of ``trail``'s session after ``previous`` (None: it is the cold session).

    ``now`` holds the blobs at this session's end of every file the previous
    session read, its commands' inputs, and the files this session changed.
    """
    before: dict[str, str | None] = {}
    if previous is not None:
        before.update(previous.edits)
        before.update(previous.reads)
        for inputs in previous.commands.values():
            before.update(inputs)
    figures = Figures(session=session, previous=previous.session if previous else None, actions=len(trail.actions),
                      actions_to_edit=first_productive_edit(trail, scope, before, now), cold_actions_to_edit=cold)
    if previous is None:
        figures.cold_actions_to_edit = figures.actions_to_edit
    changed_by_me: set[str] = set()
    rereads: dict[str, None] = {}
    repeated: dict[str, None] = {}
    twice: dict[str, None] = {}
    for action in trail.actions:
        for path in reads_of(action):
            if (previous is not None and path in previous.reads and path not in changed_by_me
                    and previous.reads[path] is not None
                    and (path in _all_edits(trail) or now.get(path) == previous.reads[path])):
                rereads[path] = None
        if previous is not None and is_command(action):
            key = norm_command(action.command or "")
            inputs = previous.commands.get(key)
            if inputs is not None and not (changed_by_me & set(inputs)) and all(now.get(p) == b for p, b in inputs.items()):
                repeated[key] = None
        if action.ok is not False and previous is not None and action.change in previous.changes:
            twice.update(dict.fromkeys(action.edits))
        if action.ok is not False:
            for path in action.edits:
                changed_by_me.add(path)
                if forbid and matches(path, forbid):
                    figures.breaks.append(f"forbidden: {path}")
                elif scope and not matches(path, scope):
                    figures.breaks.append(f"outside scope: {path}")
    figures.rereads, figures.repeated, figures.twice = list(rereads), list(repeated), list(twice)
    if previous is not None:
        figures.breaks += undone(trail, settled, now)
    figures.breaks = list(dict.fromkeys(figures.breaks))
    edit_at = trail.actions[figures.actions_to_edit - 1].at if figures.actions_to_edit else None
    if edit_at and trail.actions[0].at:
        figures.seconds_to_edit = _seconds(trail.actions[0].at, edit_at)
    if figures.actions_to_edit is not None:
        figures.tokens_to_edit = trail.actions[figures.actions_to_edit - 1].tokens
    if generic:
        figures.edits_seen = False
        figures.cannot.append("a generic agent's screen shows no file edits and no tokens: no actions to the "
                              "first edit, no edits made twice, no tokens to resume, no constraint breaks; re-reads "
                              "are `$ cat|less|head|tail FILE` and `$ sed -n` lines, commands the other `$` lines")
    else:
        if figures.seconds_to_edit is None and figures.actions_to_edit is not None:
            figures.cannot.append("time to resume: the trail has no timestamps")
        if figures.tokens_to_edit is None and figures.actions_to_edit is not None:
            figures.cannot.append("tokens to resume: the agent's record has no usage for that call")
    return figures


def _all_edits(trail: Trail) -> set[str]:
    return {p for a in trail.actions if a.ok is not False for p in a.edits}


def files_to_hash(trail: Trail | None, previous: Baseline | None) -> list[str]:
    """The files whose blobs :func:`resumed` and :func:`baseline` need at this session's end."""
    paths: dict[str, None] = {}
    if previous is not None:
        paths.update(dict.fromkeys(previous.reads))
        paths.update(dict.fromkeys(previous.edits))
        for inputs in previous.commands.values():
            paths.update(dict.fromkeys(inputs))
    if trail is not None:
        for action in trail.actions:
            paths.update(dict.fromkeys(reads_of(action)))
            paths.update(dict.fromkeys(action.edits))
    return list(paths)
