"""``agentd logs``: one unit's clean transcript (``-f`` follows it across restarts), ``--all`` (every
unit, name-prefixed, like honcho and pm2) and ``--daemon``.

``--all`` prints the last lines of each unit's newest clean transcript, each
line prefixed with the unit's name in its own colour; with ``-f`` it then
follows every unit at once, interleaved as the lines come, and moves on to a
unit's next session (``--- new session ... ---``) and to units that start later.

A full-screen agent (Codex's or Claude Code's TUI) draws with cursor moves:
its clean text puts every word it placed on a line of its own.  For such a
session the last lines are its current screen instead, rendered from the
redacted ``.log`` as a terminal shows it (:func:`screen_lines`); ``-f`` then
follows the clean text (``agentd attach UNIT --read-only`` watches the screen
live).

``--daemon`` prints ``.agentd/agentd.log`` (one JSON object a line) as
``TIME LEVEL EVENT unit=... key=value ...``, levels in colour; ``--json``
keeps the lines as they are.  Both follow with ``-f``.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from .context import AppContext, pass_app
from .style import LEVEL_COLOURS, PREFIX_COLOURS, colour_on, paint

POLL = 0.25  # seconds between looks at the files while following
#: Event keys shown first, in this order, and keys never shown (already in the head of the line).
FIRST_KEYS = ("unit", "old", "new", "reason", "session", "pid")
HIDDEN_KEYS = {"event", "level", "timestamp"}


# ---------------------------------------------------------------------- one unit's transcript
def screen_lines(log: Path, size: tuple[int, int]) -> list[str] | None:
    """The current screen of a full-screen agent's session (``log``: its ``.log``; ``size``: rows, cols),
    or None when its latest output is plain lines."""
    from ..control.repaint import screen_text

    return screen_text(log, *size)


def screen_size(app: AppContext, unit: str) -> tuple[int, int]:
    """The unit's terminal size (``[agent] rows, cols``), or the default when its file does not load."""
    from ..config.units import AgentSection, load_unit

    try:
        agent = load_unit(app.paths.units_path, unit).agent
    except Exception:  # noqa: BLE001 - a removed or broken unit file: its transcript is still worth showing
        return AgentSection.model_fields["rows"].default, AgentSection.model_fields["cols"].default
    return agent.rows, agent.cols


class UnitTail:
    """One unit's newest clean transcript, followed from an offset (whole lines only).

    ``size`` (rows, cols): the unit's terminal, to render a full-screen agent's screen at the start."""

    def __init__(self, unit: str, directory: Path, size: tuple[int, int] | None = None) -> None:
        self.unit, self.directory, self.size = unit, directory, size
        self.path: Path | None = None
        self.offset = 0
        self._partial = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def newest(self) -> Path | None:
        return newest_transcript(self.directory, ".txt")

    def start(self, lines: int) -> list[str]:
        """The last ``lines`` lines; following starts after them."""
        from ..session.transcript import read_clean_tail

        self.path = self.newest()
        if self.path is None:
            return []
        self.offset = self.path.stat().st_size
        if lines <= 0:
            return []
        screen = screen_lines(self.path.with_suffix(".log"), self.size) if self.size else None
        return screen[-lines:] if screen is not None else read_clean_tail(self.path, lines)

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


def show_all(transcripts: Path, lines: int, follow: bool, as_json: bool, only: str | None = None,
             size_of: Callable[[str], tuple[int, int]] | None = None) -> None:
    """``agentd logs --all [-n N] [-f] [--json]`` (``only``: one unit, ``agentd logs UNIT --json``;
    ``size_of``: a unit's terminal size, to show a full-screen agent's screen)."""
    tails = {d.name: UnitTail(d.name, d, size_of(d.name) if size_of else None)
             for d in unit_dirs(transcripts) if only in (None, d.name)}
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


def newest_transcript(directory: Path, suffix: str) -> Path | None:
    """The transcript of the session that started last, or None.

    A session id begins with its UTC start to the microsecond, fixed width
    (:func:`supervisor.session.pty.new_session_id`), so the greatest start
    is the newest session, however close two restarts were.  Ids written by
    older versions carry whole seconds only; among those, the file written
    last wins (the dead session stopped writing before the live one began).
    """
    best: tuple[str, int] | None = None
    newest = None
    for path in directory.glob(f"*{suffix}") if directory.is_dir() else ():
        try:
            written = path.stat().st_mtime_ns
        except OSError:
            continue
        key = (path.stem.rsplit("-", 1)[0], written)
        if best is None or key > best:
            best, newest = key, path
    return newest


@click.command(epilog="""\b
Examples:
  agentd logs web -f            # one unit's clean transcript, following it
  agentd logs --all -f          # every unit, interleaved, with coloured name prefixes
  agentd logs --daemon -n 100   # agentd's own log, for people (--json: as written)""")
@click.argument("unit", required=False)
@click.option("-n", "lines", default=40, show_default=True, help="lines to show")
@click.option("-f", "follow", is_flag=True, help="keep printing new output (and the next sessions')")
@click.option("--raw", is_flag=True, help="the raw transcript (with terminal escapes)")
@click.option("--all", "all_units", is_flag=True, help="every unit's transcript, name-prefixed")
@click.option("--daemon", is_flag=True, help="agentd's own log (.agentd/agentd.log) in human form")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per line of the log")
@click.option("--session", help="this session's transcript (default: the newest)")
@click.option("--at", type=click.IntRange(min=0), help="show -n lines from this byte offset of the clean text "
              "(what `agentd recall --events` prints)")
@pass_app
def logs(app: AppContext, unit: str | None, lines: int, follow: bool, raw: bool, all_units: bool, daemon: bool,
         as_json: bool, session: str | None, at: int | None) -> None:
    """Show UNIT's transcript (clean text of the newest session, or of --session at --at), every unit's (--all),
    or agentd's (--daemon).

    With -f, a restart moves on to the new session's transcript (from its
    beginning; a line on stderr names the session).
    """
    from ..session.transcript import follow_clean, read_clean_at, read_clean_tail, valid_session_id
    from .names import check_unit

    if sum((unit is not None, all_units, daemon)) != 1:
        raise click.UsageError("give one of: UNIT, --all, --daemon")
    if daemon:
        return show_daemon(app.paths.log_path, lines, follow, as_json)
    if all_units:
        if raw:
            raise click.UsageError("--raw goes with one UNIT")
        return show_all(app.paths.transcripts_path, lines, follow, as_json, size_of=lambda u: screen_size(app, u))
    assert unit is not None
    check_unit(app.paths, unit)
    if session is not None and not valid_session_id(session):
        raise click.ClickException(f"session id {session!r} is not valid")
    if as_json:
        return show_all(app.paths.transcripts_path, lines, follow, True, only=unit, size_of=lambda u: screen_size(app, u))
    directory = app.paths.transcripts_path / unit
    suffix = ".log" if raw else ".txt"
    if session is not None:
        path = directory / f"{session}{suffix}"
        if not path.is_file():
            raise click.ClickException(f"no transcript {path.name} for unit {unit!r} under {directory}")
    else:
        path = newest_transcript(directory, suffix)
        if path is None:
            raise click.ClickException(f"no transcript for unit {unit!r} under {directory}")
    if at is not None:
        if raw or follow:
            raise click.UsageError("--at shows the clean text: without --raw and -f")
        for line in read_clean_at(path, at, lines):
            click.echo(line)
        return
    if raw:
        if follow:
            raise click.UsageError("--raw and -f do not go together (follow the clean view, or tail -f the .log)")
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 256 * 1024))
            data = fh.read()
        sys.stdout.buffer.write(b"\n".join(data.split(b"\n")[-lines:]))
        sys.stdout.buffer.flush()
        return
    screen = screen_lines(path.with_suffix(".log"), screen_size(app, unit)) if lines > 0 else None
    if screen is not None:
        click.echo(f"[agentd] {unit} draws a full-screen interface: its screen now"
                   + ("; then its clean text, live (agentd attach --read-only shows the screen live)" if follow else ""),
                   err=True)
        for line in screen[-lines:]:
            click.echo(line)
    if not follow:
        if screen is None:
            for line in read_clean_tail(path, lines):
                click.echo(line)
        return
    if screen is not None:
        lines = 0  # the screen was the last lines
    try:
        while True:
            current = path

            def superseded(current: Path = current) -> bool:
                return newest_transcript(directory, ".txt") not in (current, None)

            for chunk in follow_clean(current, should_stop=superseded, lines=lines):
                click.echo(chunk, nl=False)
            path = newest_transcript(directory, ".txt") or current
            lines = sys.maxsize  # a new session is shown from its beginning
            click.echo(f"\n[agentd] session {path.stem} of {unit}", err=True)
    except KeyboardInterrupt:
        pass
