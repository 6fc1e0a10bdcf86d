"""Who may run which control command: the caller the kernel names, and each command's declared access.

The threat model is that the agent is the untrusted party (issue 25 §2).  Every
process that runs the agent's CLI, its hooks or anything it started has the
daemon's uid, so the socket's uid check lets them all in; this module decides
what each of them may then do.

**The caller** (:class:`Caller`) comes from the kernel, never from the
request: the server reads the peer's pid with ``SO_PEERCRED`` (pinned by a
pidfd, :mod:`supervisor.control.peer`) and asks its :class:`Callers` (the
daemon's containment, :meth:`supervisor.daemon.confinement.Confinement.caller`)
which session that process belongs to.  One of three kinds:

* ``operator``: a process outside every unit (the person's shell, systemd, a
  script): every right;
* ``unit``: a process of a unit's session (the agent, its hooks, its children):
  only the commands declared for a unit, and only for itself;
* ``stray``: an agent's process no session can be proved to own (a ``setsid``
  orphan, a child of the daemon's own helpers, an agent of another agentd
  daemon): the least rights, ``ping`` only.

**The access** of each command is declared on its table entry
(``Command(..., who=...)``, :mod:`supervisor.daemon.commands`):

* :data:`OPERATOR` (the default, so a new command is the operator's until
  someone decides otherwise): only the operator;
* :data:`ANYONE`: every caller (``ping``);
* :class:`Own` (**an own-unit command**): a unit may run it *for itself*.  It
  names the arguments that say which unit (``unit=``, or ``units=`` for a
  list) and which session (``session=``); for a caller inside a unit the
  server **binds** them to the caller's unit and session before the handler
  runs (an argument left out is filled in; one naming another unit or session
  is refused), so the handler acts for the kernel's unit whatever the request
  said.  The operator's requests pass as they are.  Making a command an
  own-unit command is one table line, e.g. a memory command written on the
  agent's behalf::

      "note": Command(note, frozenset({"unit", "text"}), "a note for the unit's module", who=Own("unit")),

  where ``note`` writes for ``args["unit"]``: the caller's unit when an agent
  asked, the named unit when the operator did.  Whatever else such a handler
  acts on (the module, the scope, the files) it derives from that unit's
  spec, never from another argument an agent could fill in (``module=``).

:func:`permit` is the decision (pure): the arguments to run with, or
:class:`Refused` with a message that names the caller (its unit) and the command.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Kind(enum.Enum):
    OPERATOR = "operator"
    UNIT = "unit"
    STRAY = "stray"


@dataclass(frozen=True)
class Caller:
    """Who is calling, as the kernel says (see the module doc)."""

    kind: Kind
    unit: str | None = None  # kind UNIT
    session: str | None = None  # kind UNIT
    pid: int = 0
    why: str = ""  # how it was told (for the log, and a stray's error)

    @classmethod
    def operator(cls, pid: int = 0, why: str = "outside every unit") -> Caller:
        return cls(Kind.OPERATOR, pid=pid, why=why)

    @classmethod
    def of_unit(cls, unit: str, session: str, pid: int = 0) -> Caller:
        return cls(Kind.UNIT, unit, session, pid)

    @classmethod
    def stray(cls, pid: int, why: str) -> Caller:
        return cls(Kind.STRAY, pid=pid, why=why)

    def describe(self) -> str:
        if self.kind is Kind.UNIT:
            return f"unit {self.unit!r} (session {self.session}, pid {self.pid})"
        if self.kind is Kind.STRAY:
            return f"an agent's process no unit claims (pid {self.pid}: {self.why})"
        return "the operator"

    def log_fields(self) -> dict[str, Any]:
        return {"caller": self.kind.value, "caller_unit": self.unit, "caller_session": self.session,
                "caller_pid": self.pid}


#: What a server without a :class:`Callers` (tests, a socket nobody else can reach) treats every peer as.
OPERATOR_CALLER = Caller.operator(why="the server does not tell callers apart")


class Callers(Protocol):
    """Which session a peer process belongs to (the daemon's containment implements it)."""

    def caller(self, pid: int) -> Caller:
        """The caller running as ``pid`` (blocking: reads ``/proc``; the server calls it off the loop).

        Raises ``ProcessLookupError`` when the process is gone, ``OSError`` when ``/proc`` cannot be read.
        """
        ...


class Operator:
    """Access: the operator only."""

    def __repr__(self) -> str:
        return "OPERATOR"


class Anyone:
    """Access: every caller, strays included."""

    def __repr__(self) -> str:
        return "ANYONE"


@dataclass(frozen=True)
class Own:
    """Access: the operator, and a unit for itself; the named arguments are bound to the caller's unit and session.

    ``unit``: the argument naming one unit; ``units``: the argument listing
    units (left out, it becomes the caller's own); ``session``: the argument
    naming a session (bound to the caller's).
    """

    unit: str | None = "unit"
    units: str | None = None
    session: str | None = None


OPERATOR = Operator()
ANYONE = Anyone()
Access = Operator | Anyone | Own


class Refused(Exception):
    """The caller may not run this command with these arguments; the message says who, what and why."""


def permit(cmd: str, access: Access, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments ``cmd`` runs with for ``caller``; :class:`Refused` when it may not run it."""
    if caller.kind is Kind.OPERATOR or isinstance(access, Anyone):
        return dict(args)
    if caller.kind is Kind.STRAY:
        raise Refused(f"permission denied: {cmd!r} refused to {caller.describe()}; a process agentd cannot "
                      "trace to a unit may only ping")
    who = f"unit {caller.unit!r}"
    if not isinstance(access, Own):
        raise Refused(f"permission denied: {who} may not run {cmd!r}: only the operator may, from outside every "
                      "unit (the caller runs inside that unit's session)")
    bound = dict(args)
    if access.unit is not None:
        named = bound.get(access.unit)
        if named is not None and named != caller.unit:
            raise Refused(f"permission denied: {who} may run {cmd!r} only for itself, not for {named!r}")
        bound[access.unit] = caller.unit
    if access.units is not None:
        named = bound.get(access.units)
        listed = named if isinstance(named, list) else [] if named is None else [named]
        others = [u for u in listed if u != caller.unit]
        if others:
            raise Refused(f"permission denied: {who} may run {cmd!r} only for itself, not for "
                          f"{', '.join(repr(o) for o in others)}")
        bound[access.units] = [caller.unit]
    if access.session is not None:
        named = bound.get(access.session)
        if named is not None and named != caller.session:
            raise Refused(f"permission denied: {who} may run {cmd!r} only for its own session ({caller.session}), "
                          f"not for {named!r}")
        bound[access.session] = caller.session
    return bound
