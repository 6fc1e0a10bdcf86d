"""Transcript retention: each unit keeps the transcripts of its newest sessions only.

A unit's sessions leave their files in ``<state>/transcripts/UNIT/``:
``SESSION.log`` (raw, redacted), ``SESSION.txt`` (clean), and for the event
index ``SESSION.marks.jsonl`` and ``SESSION.record``.  A unit that crash-loops
starts a session a second; kept for ever, 6,000 a day fill the directory, the
disk and every pass of the event index (issue 31 §3).

:func:`prune` removes every file of the sessions older than the unit's newest
``keep`` (the daemon's setting ``transcript_keep``: 100 by default, at least
2, 0 keeps every one).  The daemon calls it, off its loop,
each time a session starts (:meth:`supervisor.session.pty.Session.attach`), so
a unit holds at most ``keep`` transcripts; a ``keep`` lowered takes effect at
the unit's next start.  What needs older sessions keeps its own copy: a
session's trail and "where you stopped" are kept at its end (history,
``stopped/``), the report reads history, and ``recall --events`` finds what
the agent did and said in the transcripts that remain (their events leave the
index with the files).

Sessions are ordered as ``agentd logs`` orders them: by their id's start time
(:func:`~supervisor.session.pty.new_session_id`), then by when their
transcript was last written.  The newest is never removed, nor is the session
that asked for the prune (however ``keep`` is set), nor a file that belongs to
no session (no ``.log`` or ``.txt`` of its name).
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

log = structlog.get_logger("agentd")

_SESSION_FILES = (".log", ".txt")


def prune(directory: Path, keep: int, current: str) -> list[str]:
    """Remove the files of every session of ``directory`` but the newest ``keep`` (and ``current``); the
    sessions removed, oldest first.  Never raises: a file that cannot be removed is logged and left."""
    if keep <= 0:
        return []
    try:
        with os.scandir(directory) as it:
            entries = [(e.name, e) for e in it]
    except OSError:
        return []
    written: dict[str, int] = {}
    for name, entry in entries:
        for suffix in _SESSION_FILES:
            if name.endswith(suffix):
                try:
                    mtime = entry.stat(follow_symlinks=False).st_mtime_ns
                except OSError:
                    mtime = 0
                session = name[:-len(suffix)]
                written[session] = max(written.get(session, 0), mtime)
    order = sorted(written, key=lambda s: (s.rsplit("-", 1)[0], written[s]))
    old = [s for s in order[:-keep] if s != current]
    if not old:
        return []
    doomed = set(old)
    removed: set[str] = set()
    for name, _entry in entries:
        session = _owner(name, doomed)
        if session is None:
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed.add(session)
        except FileNotFoundError:
            removed.add(session)
        except OSError as exc:
            log.warning("transcript_not_pruned", path=os.path.join(directory, name), error=str(exc))
    gone = [s for s in old if s in removed]
    if gone:
        log.info("transcripts_pruned", unit=Path(directory).name, sessions=len(gone), kept=keep)
    return gone


def _owner(name: str, sessions: set[str]) -> str | None:
    """The session of ``sessions`` a file of that name belongs to (``SESSION.<anything>``), or None."""
    stem = name
    while "." in stem:
        stem = stem.rsplit(".", 1)[0]
        if stem in sessions:
            return stem
    return None
