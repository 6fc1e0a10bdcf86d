"""Text from the outside (file names, agent output) shown with its escapes made visible, never raw.

A file name may hold any byte but ``/`` and NUL: ``$'note\\rexit\\r.txt'`` or
one with ``ESC [2J`` in it would, printed raw, rewrite a person's terminal
or, typed into an agent, become a second command.  :func:`visible` turns
every character that is not plainly printable into the escape a person would
type for it (``\\r``, ``\\x1b``, ``\\u202e``), and a backslash into ``\\\\``
so the escapes cannot be forged, keeping the rest (accented letters, CJK)
as it is.  Every listing agentd prints of names it did not choose goes
through it: ``agentd violations``, ``status``, ``history``; so do the
scope warnings agentd types.

Stdlib only: the CLI's fast path imports it.
"""

from __future__ import annotations

#: Escaped by name; every other character Python does not call printable
#: (controls, format characters such as bidi overrides and zero-width joiners,
#: separators other than the space, unassigned and private-use code points,
#: and unpaired surrogates: a non-UTF-8 byte decoded with ``surrogateescape``)
#: by its code.
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the raw byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: object) -> str:
    """``text`` with every control, format or otherwise invisible character (and ``\\``) escaped."""
    s = str(text)
    if s.isprintable() and "\\" not in s:
        return s  # the common case, one C-level scan
    out = []
    for ch in s:
        if ch in _NAMED or not ch.isprintable():
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)
