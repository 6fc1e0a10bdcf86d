"""The agent kinds agentd knows: one list, read by every layer that differs per kind.

A kind's behaviour lives in its adapter package (``supervisor/adapters/<kind>/``:
launch, hooks, the window, screens; registered in
:data:`supervisor.adapters.ADAPTERS`).  What the layers *below* the adapters
must know of a kind (they may not import an adapter) is one :class:`Kind`
here:

* the unit file's ``[agent] kind`` accepts exactly these names
  (:mod:`supervisor.config.units`);
* the prompt marks by which the event index splits a transcript into turns
  (:mod:`supervisor.eventindex.turns`);
* the record lines the event index reads from the agent's own record
  (:mod:`supervisor.eventindex.trails`), when the kind keeps one;
* the CLI version agentd was verified with and how to install it
  (``agentd doctor --env``).

Adding a kind (aider, Gemini CLI, opencode): a package under
``supervisor/adapters/``, one :class:`Kind` line here and one line in
``ADAPTERS`` (docs/architecture.md, "Adding an agent kind").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """What the layers below the adapters know of one agent kind."""

    name: str
    #: a line starting with one of these (after blanks) is the agent's prompt; () = the unit's [agent] prompt
    marks: tuple[str, ...] = ()
    #: the record lines the event index parses (a line containing one of these), when the agent keeps a record
    record_lines: tuple[bytes, ...] = ()
    #: the CLI version the adapter was verified with, and the command that installs it
    verified: str | None = None
    install: str | None = None

    @property
    def has_record(self) -> bool:
        """Whether the event index reads the agent's own record (instead of its screen)."""
        return bool(self.record_lines)


#: Every kind, by name: the one list.
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("generic"),
    Kind("codex", marks=("›",), record_lines=(b'"response_item"',), verified="0.169.0",
         install="npm install -g @openai/codex@0.169.0"),
    Kind("claude", marks=("❯",), record_lines=(b'"user"', b'"assistant"'), verified="2.1.328",
         install="npm install -g @anthropic-ai/claude-code@2.1.328"),
)}

#: The prompt marks tried for a transcript of a kind with none of its own.
ANY_MARKS: tuple[str, ...] = tuple(dict.fromkeys(m for k in KINDS.values() for m in k.marks))


