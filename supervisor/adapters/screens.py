"""Blocking screens, recognised on the rendered screen: trust, login, update, onboarding, approval prompts.

An agent that shows one of these waits for a person and does nothing else:
it is ``running`` at 0 % context forever unless someone notices.  A
:class:`ScreenProbe` keeps the session's latest output (a
:class:`~supervisor.session.screen.Screen`, fed by the turn watcher) and,
once output has been quiet for :data:`QUIET` seconds, renders it and looks
for the texts of :data:`PATTERNS` (seen in Codex 0.169.0 and Claude Code
2.1.328, by running them and from their binaries' strings).  The adapter
turns a match into a :class:`~supervisor.adapters.base.Blocked` with what to
do, and the keys that answer it when the unit allows agentd to.

Rendering happens at most once per new output, never while the agent prints.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from ..session.screen import Screen
from .base import BlockKind

#: Output must have been quiet this long before the screen is read.
QUIET = 1.0

#: (kind, pattern) in the order they are tried; the first match wins.
PATTERNS: dict[str, list[tuple[BlockKind, re.Pattern[str]]]] = {
    "codex": [
        (BlockKind.TRUST, re.compile(r"Trust this folder\?|Do you trust the contents of this directory")),
        (BlockKind.LOGIN, re.compile(r"Sign in with ChatGPT|Provide your own API key|Finish signing in")),
        (BlockKind.UPDATE, re.compile(r"Update available!.*\n(?:.*\n)*.*(?:Update now|Skip)", re.M)),
        (BlockKind.APPROVAL, re.compile(r"Would you like to (?:run the following command|make the following edits|"
                                        r"grant these permissions)\?")),
    ],
    "claude": [
        (BlockKind.TRUST, re.compile(r"Quick safety check|Yes, I trust this folder|Do you trust the files in this folder|"
                                     r"Is this a directory you created or one you trust\?")),
        (BlockKind.ONBOARDING, re.compile(r"Choose the text style that looks best|Bypass Permissions mode.*\n(?:.*\n)*.*No, exit",
                                          re.M)),
        (BlockKind.LOGIN, re.compile(r"Select login method:|Do you want to use this API key\?")),
        # the question alone could be the model's own prose: the dialog's first option must follow
        (BlockKind.APPROVAL, re.compile(r"Do you want to (?:proceed|make this edit|create|allow|continue)\b[^\n]*\?"
                                        r"(?:.*\n){0,8}.*\b1\. Yes", re.M)),
    ],
    "generic": [
        (BlockKind.TRUST, re.compile(r"Trust this folder\?|Do you trust the (?:files|contents)")),
        (BlockKind.LOGIN, re.compile(r"Sign in with ChatGPT|Select login method:")),
        (BlockKind.APPROVAL, re.compile(r"(?:Would you like to run the following command|Do you want to proceed)\?"
                                        r"(?:.*\n){0,8}.*\b1\. Yes", re.M)),
    ],
}


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
    for block, pattern in PATTERNS.get(kind, PATTERNS["generic"]):
        if pattern.search(text):
            return block
    return None


class ScreenProbe:
    """A session's screen, read for blocking screens only when output went quiet."""

    def __init__(self, kind: str, rows: int, cols: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.kind = kind
        self.screen = Screen(rows, cols)
        self.clock = clock
        self.last_output_at = clock()
        self._fed_at_check = -1
        self._found: BlockKind | None = None

    def feed(self, data: bytes) -> None:
        self.screen.feed(data)
        self.last_output_at = self.clock()

    def check(self) -> BlockKind | None:
        """The blocking screen shown now (rendered once per new output, after :data:`QUIET` s of quiet)."""
        if self.clock() - self.last_output_at < QUIET:
            return self._found if self._fed_at_check == self.screen.fed_bytes else None
        if self._fed_at_check != self.screen.fed_bytes:
            self._fed_at_check = self.screen.fed_bytes
            self._found = find_block(self.kind, self.screen.text())
        return self._found
