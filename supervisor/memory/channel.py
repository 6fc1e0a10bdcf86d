"""The one narrow channel from an agent to the memory store: a request file in its unit's inbox.

Inside a unit ``.agent/`` is read-only (agentd's fence, Codex's sandbox
profile): what a person wrote there (constraints, other modules' tasks and
facts, ``local/``) must not be an agent's to change, nor another unit's
memory.  So an agent's ``agentd note | decide | task-state | fact add |
fact invalidate`` and the MCP tools write a *request* into the unit's inbox,
``<state>/inbox/<unit>/``, a directory only that unit's sandbox can write;
the daemon (:mod:`supervisor.daemon.inbox`) checks it as untrusted input,
writes the memory on the agent's behalf for the unit that owns the inbox,
and leaves a reply beside it.  Who asks is the directory the request lies
in, which the kernel enforces; never an environment variable nor an argument
(``$AGENTD_INBOX`` only tells the command where to write).  The control
socket is no such channel: Codex's sandbox refuses ``connect`` (EPERM).

Files, each written whole (temp file, fsync, rename)::

    <id>.req      {"v": 1, "op": "note", "args": {...}}     the agent's request
    <id>.reply    {"ok": true, "text": "..."}               the daemon's answer
    .alive        touched by the daemon every few seconds while it serves the inbox

This module is both sides' shared part: the format and its checks
(:func:`parse_request`: size, JSON shape, field types and lengths, no control
characters), the client (:func:`submit`, which waits for the reply with a
deadline, or says the request is queued when no daemon answers), and
:func:`apply`, which the daemon runs in a worker process (:func:`main`)
that sees the files as the agent does.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..durable import atomic_write

VERSION = 1
INBOX_DIR = "inbox"
ALIVE = ".alive"
#: A request larger than this is refused unread.
MAX_REQUEST = 64 * 1024
#: The daemon touches ``.alive`` this often; older than ALIVE_STALE means nobody serves the inbox.
ALIVE_EVERY = 5.0
ALIVE_STALE = 20.0
REQUEST_RE = re.compile(r"([0-9a-f]{16,32})\.req")
REPLY_SUFFIX = ".reply"

#: (field, type, max length or count) per operation; "module" is what the agent asked for (only its own is allowed).
_TEXT, _LIST, _INT = "text", "list", "int"
OPS: dict[str, dict[str, tuple[str, int]]] = {
    "note": {"text": (_TEXT, 4000), "kind": (_TEXT, 16), "module": (_TEXT, 64)},
    "decide": {"text": (_TEXT, 1000), "why": (_TEXT, 2000), "tags": (_LIST, 10), "files": (_LIST, 100),
               "alternatives": (_TEXT, 2000), "scope": (_LIST, 50), "module": (_TEXT, 64)},
    "task-state": {"state": (_TEXT, 4000), "task": (_TEXT, 4000), "module": (_TEXT, 64)},
    "fact-add": {"text": (_TEXT, 2000), "source": (_TEXT, 600), "module": (_TEXT, 64)},
    "fact-invalidate": {"id": (_TEXT, 64), "why": (_TEXT, 2000)},
    # `agentd task-state --done`: the unit's claim that its plan task is done (and, optionally, where it stands).
    # Which unit claims is the inbox; "session" ($AGENTD_SESSION) only narrows it (a claim from an older
    # session of the unit is ignored), it never names another unit.
    "task-done": {"state": (_TEXT, 4000), "session": (_TEXT, 64)},
}
REQUIRED = {"note": ("text", "kind"), "decide": ("text", "why"), "task-state": ("state",),
            "fact-add": ("text", "source"), "fact-invalidate": ("id", "why"), "task-done": ()}
LIST_ITEM_MAX = 512
#: Control characters, line and paragraph separators, bidirectional overrides and isolates.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class ChannelError(ValueError):
    """A request that is not acceptable; the message names the field and what is wrong."""


@dataclass(frozen=True)
class Request:
    op: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    """What became of a request: ``done`` (the daemon applied it), ``refused`` (it said why), or ``queued``."""

    status: str
    text: str

    @property
    def ok(self) -> bool:
        return self.status != "refused"


def inbox_path(state_dir: Path, unit: str) -> Path:
    return Path(state_dir) / INBOX_DIR / unit


def ensure_inbox(state_dir: Path, unit: str) -> Path:
    """The unit's inbox, created (mode 0700) when missing."""
    path = inbox_path(state_dir, unit)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


# ------------------------------------------------------------------ the format and its checks
def _check_text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise ChannelError(f"{name}: expected text, got {type(value).__name__}")
    if len(value) > limit:
        raise ChannelError(f"{name}: {len(value)} characters, at most {limit}")
    bad = _CONTROL_RE.search(value)
    if bad:
        raise ChannelError(f"{name}: control character U+{ord(bad.group()):04X} at {bad.start()}: write plain text")
    return value


def parse_request(data: bytes) -> Request:
    """Check a request file's bytes (untrusted) and return it; raises :class:`ChannelError`."""
    if len(data) > MAX_REQUEST:
        raise ChannelError(f"request of {len(data)} bytes, at most {MAX_REQUEST}")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ChannelError(f"not a JSON request: {type(exc).__name__}") from None
    if not isinstance(obj, dict) or set(obj) != {"v", "op", "args"}:
        raise ChannelError('a request is {"v": 1, "op": ..., "args": {...}}')
    if obj["v"] != VERSION:
        raise ChannelError(f"request version {obj['v']!r}: this daemon reads version {VERSION}")
    op, args = obj["op"], obj["args"]
    if op not in OPS:
        raise ChannelError(f"unknown operation {op!r}: one of {', '.join(OPS)}")
    if not isinstance(args, dict):
        raise ChannelError("args: expected an object")
    schema = OPS[op]
    out: dict[str, Any] = {}
    for name, value in args.items():
        if name not in schema:
            raise ChannelError(f"{op}: unknown field {name!r}")
        if value is None:
            continue
        kind, limit = schema[name]
        if kind == _LIST:
            if not isinstance(value, list) or len(value) > limit:
                raise ChannelError(f"{name}: expected a list of at most {limit} items")
            out[name] = [_check_text(f"{name}[{i}]", v, LIST_ITEM_MAX) for i, v in enumerate(value)]
        else:
            out[name] = _check_text(name, value, limit)
    missing = [name for name in REQUIRED[op] if not (out.get(name) or "").strip()]
    if missing:
        raise ChannelError(f"{op}: {', '.join(missing)} missing or empty")
    return Request(op, out)


def encode_request(op: str, args: Mapping[str, Any]) -> bytes:
    """The request's bytes (checked the way the daemon will check them)."""
    data = json.dumps({"v": VERSION, "op": op, "args": {k: v for k, v in args.items() if v not in (None, [], ())}},
                      ensure_ascii=False).encode("utf-8")
    parse_request(data)
    return data


# ------------------------------------------------------------------ the client (inside the unit)
def _alive(inbox: Path, now: float) -> bool:
    try:
        return now - os.stat(inbox / ALIVE).st_mtime < ALIVE_STALE
    except OSError:
        return False


def submit(inbox: Path, op: str, args: Mapping[str, Any], *, timeout: float = 30.0,
           clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Write the request, wait for the daemon's reply (at most ``timeout`` seconds, a few when no daemon
    serves the inbox) and return it; a request not answered by then stays queued.  Raises
    :class:`ChannelError` for a request the daemon would refuse unread, OSError when the inbox is not writable."""
    data = encode_request(op, args)
    ident = secrets.token_hex(8)
    atomic_write(inbox / f"{ident}.req", data, mode=0o600)
    reply = inbox / f"{ident}{REPLY_SUFFIX}"
    start = clock()
    deadline = start + (timeout if _alive(inbox, start) else min(timeout, 2.0))
    pause = 0.02
    while True:
        try:
            raw = reply.read_bytes()
        except FileNotFoundError:
            raw = None
        if raw is not None:
            try:
                reply.unlink()
            except OSError:
                pass
            try:
                answer = json.loads(raw)
                return Outcome("done" if answer["ok"] else "refused", str(answer["text"]))
            except (ValueError, KeyError, TypeError):
                return Outcome("refused", "the daemon's reply was unreadable")
        if clock() >= deadline:
            return Outcome("queued", f"queued: the daemon will apply it ({inbox / (ident + '.req')})")
        sleep(pause)
        pause = min(pause * 2, 0.2)


def write_reply(inbox: Path, ident: str, ok: bool, text: str) -> None:
    atomic_write(inbox / f"{ident}{REPLY_SUFFIX}", json.dumps({"ok": ok, "text": text}, ensure_ascii=False), mode=0o600)


# ------------------------------------------------------------------ applying (the daemon's worker)
def apply(root: Path, request: Request, module: str | None, scope: Sequence[str], unit: str) -> str:
    """Write ``request`` into the store for ``module`` (the requesting unit's), ``scope`` being the globs a
    decision's snapshot hashes; returns the text to show the agent.  The daemon has checked the paths and
    the module already.  Raises the memory library's errors (StoreError, LineError, ValueError)."""
    from . import add_fact, append_note, invalidate, record_decision, update_task_state
    from .facts import load, parse_source
    from .store import AgentPaths, StoreError

    args, paths = request.args, AgentPaths(Path(root))
    if request.op == "note":
        return append_note(root, args["text"], args["kind"], module=module).render()
    if request.op == "decide":
        rec = record_decision(root, args["text"], args["why"], module=module, tags=args.get("tags", ()),
                              files=args.get("files", ()), alternatives=args.get("alternatives", ""),
                              scope_paths=scope, by=unit)
        return f"{paths.rel(rec.path)}: {rec.line}"
    if request.op == "task-state" or (request.op == "task-done" and (args.get("state") or "").strip()):
        info = update_task_state(paths, args["state"], module=module)
        return f"{paths.rel(paths.task(module))}: State at interruption: {info.state}"
    if request.op == "task-done":
        return ""
    if request.op == "fact-add":
        rel = parse_source(args["source"])[0]
        target = Path(root) / rel
        if target.is_symlink() or not target.is_file() or target.stat().st_size > 8 << 20:
            raise StoreError(f"source {rel}: not a regular file of at most 8 MiB in the project")
        fact = add_fact(root, module, args["text"], args["source"])
        return f"{fact.id} ({fact.module}): {fact.text} [source {fact.source}, sha {fact.sha}]"
    if request.op == "fact-invalidate":
        wanted = args["id"].strip().upper()
        if not any(f.id.upper() == wanted for f in load(paths, module)):
            raise StoreError(f"no fact {args['id']} of module {module or 'global'}: an agent invalidates only its "
                             "own module's facts")
        fact = invalidate(root, args["id"], args["why"])
        return f"{fact.id} ({fact.module}): invalid: {fact.invalid_why}"
    raise ChannelError(f"unknown operation {request.op!r}")


def main() -> int:  # pragma: no cover - the worker process; tested through the daemon
    """The worker: ``{"root", "module", "scope", "unit", "request"}`` as JSON on stdin, the reply on stdout."""
    from .lineformat import LineError
    from .store import StoreError

    job = json.loads(sys.stdin.read())
    request = parse_request(json.dumps(job["request"]).encode())
    try:
        text = apply(Path(job["root"]), request, job["module"], job["scope"], job["unit"])
        reply = {"ok": True, "text": text}
    except (StoreError, LineError, ValueError, OSError) as exc:
        reply = {"ok": False, "text": str(exc)}
    sys.stdout.write(json.dumps(reply, ensure_ascii=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
