"""Blocking screens, recognised on the rendered screen: trust, login, update, onboarding, approval, unreachable.

An agent that shows one of these waits for a person (or for a network that
is not there) and does nothing else: it is ``running`` at 0 % context forever
unless someone notices.  A :class:`ScreenProbe` keeps the session's latest
output (a :class:`~supervisor.session.screen.Screen`, fed by the turn
watcher) and renders it to look for the texts of :data:`PATTERNS`:

* once output has been quiet for :data:`QUIET` seconds (a screen drawn and
  waiting), at most once per new output;
* while output keeps flowing, every :data:`ANIMATED_EVERY` seconds, but only
  once the output held a word of :data:`ANIMATED` (a screen that animates
  while it blocks: Claude Code's "retrying in 5s · attempt 3/10" countdown,
  Codex's "Reconnecting... (12s)"), and from then on on a screen kept up to
  date chunk by chunk (such a screen redraws only the cells that change, so
  the line that says why would soon be older than the raw tail a render
  starts from).  A look that finds no blocking screen drops it: a working
  agent streams too, and following its output costs pyte ~3 µs per byte.

Every pattern was seen on the real CLIs (Codex 0.169.0, Claude Code
2.1.328), offline, by running them; tests/data/screens/ holds those raw
captures and tests/test_screens_real.py reads them back.  A screen that
ends a failed turn (Claude's "Not logged in · Please run /login", "API Error:
Connection refused ...") counts only while the composer still shows the
placeholder that follows such an error ("Once fixed, resend your message",
"Resend your message to try again"): the error line stays in the scrollback
after the next turn succeeds, the placeholder does not.

The adapter turns a match into a :class:`~supervisor.adapters.base.Blocked`
with what to do (:attr:`ScreenProbe.line`: the line that matched, for its
detail), and the keys that answer it when the unit allows agentd to.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pyte

from ..session.screen import Screen
from .base import BlockKind

#: Output must have been quiet this long before the screen is read.
QUIET = 1.0
#: While output flows and an :data:`ANIMATED` word is in it, the screen is read at most this often.
ANIMATED_EVERY = 2.0

#: Claude Code's connection errors (its binary's messages for ECONNREFUSED, ENOTFOUND/EAI_AGAIN, ENETUNREACH,
#: a proxy, TLS): while it retries and once it gave up.
_CLAUDE_NET = (r"(?:Can't reach the API server|Connection refused|No internet route|Couldn't connect through your proxy|"
               r"Unable to connect to API|SSL certificate error|Connection error)")
#: The composer's placeholder right after a turn that ended in an error (gone once a turn succeeds).
_CLAUDE_AFTER_ERROR = r"(?:Once fixed, resend your message|Resend your message to try again)"

#: (kind, pattern) in the order they are tried; the first match wins.
PATTERNS: dict[str, list[tuple[BlockKind, re.Pattern[str]]]] = {
    "codex": [
        (BlockKind.TRUST, re.compile(r"Trust this folder\?|Do you trust the contents of this directory")),
        (BlockKind.LOGIN, re.compile(r"Sign in with ChatGPT|Sign in with Device Code|Provide your own API key|"
                                     r"Finish signing in")),
        (BlockKind.UPDATE, re.compile(r"Update available\b.*\n(?:.*\n){0,8}.*\b(?:Update now|Skip until next version)")),
        (BlockKind.APPROVAL, re.compile(r"Would you like to (?:run the following command|make the following edits|"
                                        r"grant these permissions)\?")),
        (BlockKind.UNREACHABLE, re.compile(r"Reconnecting\.\.\. (?:waiting for network|\d+/\d+)")),
    ],
    "claude": [
        (BlockKind.TRUST, re.compile(r"Quick safety check|Yes, I trust this folder|Do you trust the files in this folder|"
                                     r"Is this a directory you created or one you trust\?")),
        (BlockKind.ONBOARDING, re.compile(r"Choose the text style that looks best|Bypass Permissions mode.*\n(?:.*\n)*.*No, exit")),
        (BlockKind.LOGIN, re.compile(r"Select login method:|Do you want to use this API key\?|"
                                     r"Please run /login\b(?:.*\n){1,40}?.*" + _CLAUDE_AFTER_ERROR)),
        # the question alone could be the model's own prose: the dialog's first option must follow
        (BlockKind.APPROVAL, re.compile(r"Do you want to (?:proceed|make this edit|create|allow|continue)\b[^\n]*\?"
                                        r"(?:.*\n){0,8}.*\b1\. Yes")),
        # retrying (a live countdown line), or given up (the error, then the placeholder)
        (BlockKind.UNREACHABLE, re.compile(_CLAUDE_NET + r"[^\n]*(?:\n[^\n]*)?· retrying\b|API Error: " + _CLAUDE_NET
                                           + r"(?:.*\n){1,40}?.*" + _CLAUDE_AFTER_ERROR)),
    ],
    "generic": [
        (BlockKind.TRUST, re.compile(r"Trust this folder\?|Do you trust the (?:files|contents)")),
        (BlockKind.LOGIN, re.compile(r"Sign in with ChatGPT|Select login method:")),
        (BlockKind.APPROVAL, re.compile(r"(?:Would you like to run the following command|Do you want to proceed)\?"
                                        r"(?:.*\n){0,8}.*\b1\. Yes")),
    ],
}

#: Words in the raw output of a screen that blocks while it animates (see the module docstring).
ANIMATED: dict[str, tuple[bytes, ...]] = {"claude": (b"retrying in", b"retrying\xe2\x80\xa6"), "codex": (b"Reconnecting",)}

#: Words each screen of a kind's :data:`PATTERNS` shows: plain output holding none of them shows none
#: of those screens, and need not be rendered (pyte costs about 3 µs per byte).
HINTS: dict[str, tuple[bytes, ...]] = {"generic": (b"rust", b"Sign in", b"login", b"1. Yes")}
_SGR = re.compile(rb"\x1b\[[0-9;]*m")


def screen_block(kind: str, screen: Screen) -> BlockKind | None:
    """:func:`find_block` on ``screen`` rendered, unless it is plain text without any of the kind's :data:`HINTS`."""
    hints = HINTS.get(kind)
    plain = screen.plain_tail() if hints else None
    if plain is not None and hints is not None:
        text = _SGR.sub(b"", plain)
        if not any(h in text for h in hints):
            return None
    return find_block(kind, screen.text())


def find_block(kind: str, text: str) -> BlockKind | None:
    """The first blocking screen of agent ``kind`` that ``text`` (a rendered screen) shows, or None."""
    found = match_block(kind, text)
    return found[0] if found is not None else None


def match_block(kind: str, text: str) -> tuple[BlockKind, str] | None:
    """The first blocking screen ``text`` shows, with the screen line where its match begins (stripped), or None."""
    for block, pattern in PATTERNS.get(kind, PATTERNS["generic"]):
        match = pattern.search(text)
        if match is not None:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.start())
            return block, " ".join(text[start:end if end >= 0 else len(text)].split())[:200]
    return None


class ScreenProbe:
    """A session's screen, read for blocking screens only when output went quiet (or animates one)."""

    def __init__(self, kind: str, rows: int, cols: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.kind = kind
        self.screen = Screen(rows, cols)
        self.clock = clock
        self.last_output_at = clock()
        self._fed_at_check = -1
        self._looked_at = float("-inf")
        self._found: BlockKind | None = None
        self._words = ANIMATED.get(kind, ())
        self._armed = False  # an ANIMATED word went by: look while output flows
        self._live: tuple[pyte.Screen, pyte.ByteStream] | None = None  # the screen followed chunk by chunk
        #: The screen line of the last match (what Claude says it cannot reach, say), "" when none.
        self.line = ""

    def feed(self, data: bytes) -> None:
        self.screen.feed(data)
        self.last_output_at = self.clock()
        if self._live is not None:
            self._live[1].feed(data)
        elif self._words and any(word in data for word in self._words):
            self._armed = True

    def check(self) -> BlockKind | None:
        """The blocking screen shown now (see the module docstring for when the screen is rendered)."""
        fed = self.screen.fed_bytes
        if fed == self._fed_at_check:
            return self._found
        now = self.clock()
        if now - self.last_output_at < QUIET:
            if not self._armed:
                return None  # it prints: what was on screen may be gone; look once it pauses
            if now - self._looked_at < ANIMATED_EVERY:
                return self._found  # the last look, at most ANIMATED_EVERY old
        self._fed_at_check, self._looked_at = fed, now
        found = match_block(self.kind, self._text())
        self._found, self.line = (found[0], found[1]) if found is not None else (None, "")
        if found is None:
            self._armed, self._live = False, None  # nothing blocks: stop following the output
        return self._found

    def _text(self) -> str:
        """The screen now: followed chunk by chunk once armed (from a render of the tail), else rendered."""
        if not self._armed:
            return self.screen.text()
        if self._live is None:
            live = pyte.Screen(self.screen.cols, self.screen.rows)
            stream = pyte.ByteStream(live)
            stream.feed(self.screen.raw_tail())
            self._live = (live, stream)
        return "\n".join(line.rstrip() for line in self._live[0].display).rstrip("\n")
