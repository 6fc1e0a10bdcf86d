"""``agentd logs --all`` (every unit, name-prefixed, like honcho and pm2) and ``agentd logs --daemon``.

``--all`` prints the last lines of each unit's newest clean transcript, each
line prefixed with the unit's name in its own colour; with ``-f`` it then
follows every unit at once, interleaved as the lines come, and moves on to a
unit's next session (``--- new session ... ---``) and to units that start later.

``--daemon`` prints ``.agentd/agentd.log`` (one JSON object a line) as
``TIME LEVEL EVENT unit=... key=value ...``, levels in colour; ``--json``
keeps the lines as they are.  Both follow with ``-f``.
"""

from __future__ import annotations

import codecs
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from .style import LEVEL_COLOURS, PREFIX_COLOURS, colour_on, paint

POLL = 0.25  # seconds between looks at the files while following
#: Event keys shown first, in this order, and keys never shown (already in the head of the line).
FIRST_KEYS = ("unit", "old", "new", "reason", "session", "pid")
HIDDEN_KEYS = {"event", "level", "timestamp"}


# ---------------------------------------------------------------------- one unit's transcript
class UnitTail:
    """One unit's newest clean transcript, followed from an offset (whole lines only)."""

    def __init__(self, unit: str, directory: Path) -> None:
        self.unit, self.directory = unit, directory
        self.path: Path | None = None
        self.offset = 0
        self._partial = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def newest(self) -> Path | None:
        files = sorted(self.directory.glob("*.txt"))
        return files[-1] if files else None

    def start(self, lines: int) -> list[str]:
        """The last ``lines`` lines; following starts after them."""
        from ..session.transcript import read_clean_tail

        self.path = self.newest()
        if self.path is None:
            return []
        self.offset = self.path.stat().st_size
        return read_clean_tail(self.path, lines) if lines > 0 else []

    def _read(self) -> str:
        assert self.path is not None
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return ""
        self.offset += len(data)
        return self._decoder.decode(data)

    def poll(self) -> list[str]:
        """New whole lines (a new session: the rest of the old one, a marker, then the new one's)."""
        out: list[str] = []
        newest = self.newest()
        if self.path is not None:
            out += self._lines(self._read())
        if newest is not None and newest != self.path:
            if self._partial:
                out.append(self._partial)
            self.path, self.offset, self._partial = newest, 0, ""
            self._decoder.reset()
            out.append(f"--- new session {newest.stem} ---")
            out += self._lines(self._read())
        return out

    def _lines(self, text: str) -> list[str]:
        if not text:
            return []
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        return [p.rstrip("\r") for p in parts]


def unit_dirs(transcripts: Path) -> list[Path]:
    return sorted(p for p in transcripts.iterdir() if p.is_dir()) if transcripts.is_dir() else []


def prefixer(names: list[str], colour: bool) -> Callable[[str, str], str]:
    width = max((len(n) for n in names), default=4)
    order = {n: i for i, n in enumerate(sorted(names))}

    def prefix(unit: str, line: str) -> str:
        if unit not in order:
            order[unit] = len(order)
        tag = paint(f"{unit:<{width}} |", PREFIX_COLOURS[order[unit] % len(PREFIX_COLOURS)], colour)
        return f"{tag} {line}"

    return prefix


def show_all(transcripts: Path, lines: int, follow: bool, as_json: bool, only: str | None = None) -> None:
    """``agentd logs --all [-n N] [-f] [--json]`` (``only``: one unit, ``agentd logs UNIT --json``)."""
    tails = {d.name: UnitTail(d.name, d) for d in unit_dirs(transcripts) if only in (None, d.name)}
    if not tails and not follow:
        raise click.ClickException(f"no transcript under {transcripts} (no unit has run yet)")
    colour = colour_on() and not as_json
    prefix = prefixer(list(tails), colour)

    def emit(unit: str, line: str) -> None:
        click.echo(json.dumps({"unit": unit, "line": line}) if as_json else prefix(unit, line))

    for name, tail in tails.items():
        for line in tail.start(lines):
            emit(name, line)
    if not follow:
        return
    try:
        while True:
            for directory in unit_dirs(transcripts):
                if directory.name not in tails and only in (None, directory.name):
                    tails[directory.name] = UnitTail(directory.name, directory)
            for name, tail in tails.items():
                for line in tail.poll():
                    emit(name, line)
            time.sleep(POLL)
    except KeyboardInterrupt:
        pass


# ---------------------------------------------------------------------- the daemon's log
def human_event(record: dict[str, Any], colour: bool) -> str:
    """One agentd.log record as a line for people."""
    stamp = str(record.get("timestamp", ""))[:23].replace("T", " ")
    level = str(record.get("level", "info"))
    event = str(record.get("event", "?"))
    keys = [k for k in FIRST_KEYS if k in record] + sorted(k for k in record if k not in HIDDEN_KEYS and k not in FIRST_KEYS)
    fields = []
    for key in keys:
        value = record[key]
        if value is None or value == [] or value == {}:
            continue
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        if isinstance(value, str) and (" " in value or not value):
            text = json.dumps(value)
        fields.append(f"{paint(key, 'bright_black', colour)}={text}")
    head = f"{paint(stamp, 'bright_black', colour)} {paint(f'{level:<7}', LEVEL_COLOURS.get(level), colour)} " \
           f"{paint(event, None, colour, bold=True) if colour else event}"
    return " ".join([head, *fields])


def _daemon_lines(path: Path, lines: int, follow: bool) -> Iterator[str]:
    from ..session.transcript import _tail_lines

    if not path.exists():
        if not follow:
            raise click.ClickException(f"no daemon log at {path} (has the daemon run here?)")
        while not path.exists():
            time.sleep(POLL)
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        yield from _tail_lines(fh, end, lines)
        if not follow:
            return
        fh.seek(end)
        partial = b""
        while True:
            chunk = fh.read()
            if not chunk:
                time.sleep(POLL)
                continue
            parts = (partial + chunk).split(b"\n")
            partial = parts.pop()
            for part in parts:
                yield part.decode("utf-8", errors="replace")


def show_daemon(path: Path, lines: int, follow: bool, as_json: bool) -> None:
    """``agentd logs --daemon [-n N] [-f] [--json]``."""
    colour = colour_on() and not as_json
    try:
        for line in _daemon_lines(path, lines, follow):
            if as_json:
                click.echo(line)
                continue
            try:
                record = json.loads(line)
            except ValueError:
                click.echo(line)  # a torn or foreign line, as it is
                continue
            click.echo(human_event(record, colour) if isinstance(record, dict) else line)
    except KeyboardInterrupt:
        pass
