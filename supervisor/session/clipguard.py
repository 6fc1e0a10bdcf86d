"""What of an agent's output never reaches a person's terminal: OSC 52, the terminal's clipboard.

``agentd attach`` relays the agent's terminal output to the person's own
terminal, escape sequences and all (a TUI needs them).  One of them acts
outside the view: ``ESC ] 52 ; c ; <base64> BEL`` sets the person's clipboard
(kitty, WezTerm, iTerm2, foot, xterm with ``allowWindowOps``, tmux with
``set-clipboard``), so a hostile agent could put a command there for the
person to paste into a shell; and ``ESC ] 52 ; c ; ? BEL`` asks the terminal
to *type the clipboard back*, into the agent's input when the person is
attached to type.  :class:`ClipboardGuard` drops every OSC 52 sequence from
the stream, whatever chunks it arrives in; everything else passes unchanged.
Pure: no I/O.
"""

from __future__ import annotations

import re

#: The start of an OSC 52 sequence (xterm reads the number as a decimal, so leading zeros count).
_START = re.compile(rb"\x1b\]0*52;")
#: A chunk's end that may be the start of one, cut by the chunk boundary: kept until the next chunk.
_PARTIAL = re.compile(rb"\x1b(?:\](?:0*(?:5(?:2)?)?)?)?\Z")
#: What ends an OSC string: BEL, or ESC (ST is ESC \\; any other ESC aborts the string and starts a sequence).
_END = re.compile(rb"[\x07\x1b]")


class ClipboardGuard:
    """Feed it the output stream chunk by chunk; it returns each chunk less any OSC 52 sequence."""

    def __init__(self) -> None:
        self._inside = False  # in an OSC 52 sequence: drop until it ends
        self._carry = b""  # a possible start of one at the end of the last chunk

    def feed(self, data: bytes) -> bytes:
        data = self._carry + data if self._carry else data
        self._carry = b""
        out = bytearray()
        pos = 0
        while True:
            if self._inside:
                end = _END.search(data, pos)
                if end is None:
                    return bytes(out)  # all of it is the clipboard's payload
                if end.start() == len(data) - 1 and data[-1] == 0x1b:
                    self._carry = b"\x1b"  # ESC \\ (the terminator) or another sequence: the next chunk says
                    return bytes(out)
                self._inside = False
                pos = end.end() if data[end.start()] == 0x07 else end.start()
                if data[pos:pos + 2] == b"\x1b\\":
                    pos += 2  # the string terminator belongs to the dropped sequence
                continue
            start = _START.search(data, pos)
            if start is None:
                partial = _PARTIAL.search(data, pos)
                cut = partial.start() if partial else len(data)
                out += data[pos:cut]
                self._carry = data[cut:]
                return bytes(out)
            out += data[pos:start.start()]
            pos = start.end()
            self._inside = True

    def flush(self) -> bytes:
        """The end of the stream: a partial start held back is no sequence after all (nor is an ESC that
        would have ended one)."""
        carry, self._carry, self._inside = self._carry, b"", False
        return carry
