"""Secret redaction for agent output: streaming (a PTY's chunks) and whole strings.

What is matched is the stream's *matching text* (:func:`~.cleantext.project`:
escape sequences, cursor movements included, and control bytes removed), so a
key printed with colour codes or cursor moves inside it is still one key.  The
secret's text bytes are cut out of the raw bytes and replaced by
``[REDACTED]``; escape sequences among them are kept, so the terminal's state
(colours, cursor) stays what the agent made it.  What is a secret is
:mod:`.matcher`'s business: agentd's shapes (:data:`~.shapes.SHAPES`),
gitleaks' rules (:mod:`.gitleaks`) and the exact values of the unit's secret
environment variables, all found in one automaton pass; a secret a TUI
wrapped or drew in a box is found in a view without that decoration
(:mod:`.unwrap`) and cut out of each row it was drawn on.

Holding back
------------
A secret may arrive in pieces, any time apart.  :meth:`Redactor.feed` holds
back the possible start of a secret until its token ends: the next byte that
cannot be part of it, or the shape's size cap (past the cap the secret is cut
out anyway, and what follows of it too).  Nothing is ever released because
time passed.  The parts of a pattern that are kept (``password=``,
``Bearer ``, ``https://user:``) are not held: the redactor remembers the last
:data:`CONTEXT` bytes of text it released, so a value arriving later is still
recognised.  So for any split of a stream, ``feed(a) + feed(b) + flush()``
equals ``redact(a + b)`` (unless a cap was reached); :meth:`~Redactor.flush`
is for the end of the stream.  A gitleaks rule's token is held while it is
the open token at the end (see :mod:`.matcher`), a secret that reaches the end
up to ``max_hold``: past that it is cut out, and the rest of its token too.

Speed: a chunk is projected once (a regex substitution and a
``bytes.translate``), lowercased and searched once by the automaton; the full
patterns run only where a keyword was found, and the raw bytes are mapped to
the text (:func:`~.cleantext.text_runs`) only where a secret was.
"""

from __future__ import annotations

import copy
import re
from bisect import bisect_right
from collections.abc import Mapping
from functools import lru_cache

from .cleantext import sequence_end, split_text, text_runs, unfinished_escape, with_newlines
from .matcher import Matcher
from .shapes import TOKEN_CAP

#: Replacement written in place of every secret.
REDACTED = b"[REDACTED]"
#: Default upper bound of a held-back token (a PEM block may be held up to :data:`~.shapes.PEM_CAP`).
MAX_HOLD = TOKEN_CAP
#: Bytes of released text remembered, so a value after a kept name is still recognised.
CONTEXT = 256
#: Environment values shorter than this are not treated as secrets.
MIN_ENV_SECRET_LEN = 8
#: Suffixes (and exact names) of environment variables whose values are secrets.
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_KEY", "_CREDENTIALS")
SECRET_ENV_NAMES = frozenset({"API_KEY"})


def is_secret_env_name(name: str) -> bool:
    """Whether the value of environment variable ``name`` is treated as a secret."""
    upper = name.upper()
    return upper in SECRET_ENV_NAMES or upper.endswith(SECRET_ENV_SUFFIXES)


def secret_env_values(env: Mapping[str, str] | None) -> tuple[bytes, ...]:
    """The values of ``env`` that are redacted exactly: secret names, :data:`MIN_ENV_SECRET_LEN` characters or more."""
    return tuple(sorted({v.encode("utf-8", "surrogateescape") for k, v in (env or {}).items()
                         if is_secret_env_name(k) and len(v) >= MIN_ENV_SECRET_LEN}))


@lru_cache(maxsize=64)
def _matcher_for(values: tuple[bytes, ...], max_hold: int) -> Matcher:
    """One automaton per set of secret values (every session of a unit shares its unit's)."""
    return Matcher(values, max_hold=max_hold)


class Redactor:
    """Streaming secret redactor for a terminal byte stream.

    ``env`` is the unit's environment: the exact values (8 characters or more)
    of variables for which :func:`is_secret_env_name` holds are redacted too.
    ``max_hold`` is the cap of a held token (PEM blocks have their own).

    :meth:`feed` a stream chunk by chunk and :meth:`flush` at its end;
    :meth:`redact` / :meth:`redact_text` complete, self-contained data.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, max_hold: int = MAX_HOLD,
                 cols: int | None = None) -> None:
        self.max_hold = max_hold
        self.cols = cols  # the terminal's width, when known: a full line is one a TUI wrapped
        self._matcher = _matcher_for(secret_env_values(env), max_hold)
        self._held = b""  # raw bytes not released yet (they start with a text byte)
        self._esc = b""  # an unfinished escape sequence already released (needed to parse what follows)
        self._ctx = b""  # the last CONTEXT bytes of released text
        self._rest: re.Pattern[bytes] | None = None  # a secret cut at its cap goes on

    # -- complete data ---------------------------------------------------
    def redact(self, data: bytes) -> bytes:
        """Redact every secret in ``data`` (complete: nothing is held; the stream state is untouched)."""
        fresh = copy.copy(self)
        fresh._held = fresh._esc = fresh._ctx = b""
        fresh._rest = None
        return fresh._run(bytes(data), final=True)[0]

    def redact_text(self, text: str) -> str:
        """Redact a complete string (log lines, briefings, records)."""
        data = text.encode("utf-8", "surrogateescape")
        out = self.redact(data)
        return text if out == data else out.decode("utf-8", "surrogateescape")

    # -- streams ---------------------------------------------------------
    @property
    def pending(self) -> int:
        """Number of raw bytes currently held back."""
        return len(self._held)

    def feed(self, data: bytes) -> bytes:
        """Redact the next chunk of a stream; returns what can be released now."""
        return self.feed_text(data)[0]

    def flush(self) -> bytes:
        """End of the stream: release (redacted) whatever is held back, and start afresh."""
        return self.flush_text()[0]

    def feed_text(self, data: bytes) -> tuple[bytes, bytes]:
        """Like :meth:`feed`, and the released bytes' text too (for the clean view).

        The text has escape sequences and controls removed, a newline for each
        line move (:func:`~.cleantext.with_newlines`) and ``[REDACTED]`` where
        the raw bytes have it; carriage returns are left to
        :class:`~.cleantext.LineFolder`.
        """
        return self._run(bytes(data), final=False) if data or self._held else (b"", b"")

    def flush_text(self) -> tuple[bytes, bytes]:
        """Like :meth:`flush`, with the text (see :meth:`feed_text`)."""
        out = self._run(b"", final=True)
        self._held = self._esc = self._ctx = b""
        self._rest = None
        return out

    # -- internals -------------------------------------------------------
    def _run(self, data: bytes, final: bool) -> tuple[bytes, bytes]:
        buf = self._held + data if self._held else data
        prefix = self._esc
        body = prefix + buf if prefix else buf
        u = unfinished_escape(body)
        # a string not ended yet (or an ESC that may begin one) is held whole: it may hold a key
        string_open = not final and u < len(body) and body[u + 1:u + 2] in _STRING_INTRODUCERS
        if b"\x1b" in body and _has_string(body):  # a window title or a DCS payload is shown or kept: redact it too
            end = len(body) if final else u
            body = prefix + _STRING_SEQ.sub(self._redact_payload, body[len(prefix):end]) + body[end:]
            u = unfinished_escape(body)
        text, moves = split_text(body[:u]) if u else (b"", [])
        ctx = self._ctx
        q = ctx + text if ctx else text
        b, n = len(ctx), len(q)
        spans, cut, rest = self._matcher.scan(q, b, final, self._rest, self.cols)
        if cut == n:
            raw_cut = u if string_open else len(body)  # a string not ended yet is held whole (it may hold a key)
        else:  # never inside the released escape prefix (its bytes are out already)
            raw_cut = max(len(prefix), self._tail_raw(body, u, text, cut - b))
        if not spans:
            out = body[len(prefix):raw_cut]
            shown = q[b:cut]
            if moves:
                shown = with_newlines(shown, [m for m in moves if m <= cut - b])
        else:
            merged = _merge(spans, cut)
            out = self._cut_out(body, u, b, merged, len(prefix), raw_cut)
            shown = _cut_text(q, b, cut, merged, moves)
        self._held = body[raw_cut:]
        self._esc = body[u:] if cut == n and not string_open else b""
        self._ctx = q[max(0, cut - CONTEXT):cut]
        self._rest = rest
        return out, shown

    def _redact_payload(self, m: re.Match[bytes]) -> bytes:
        payload = m.group(2)
        redacted = self.redact(payload)
        return m.group(0) if redacted == payload else m.group(1) + redacted

    @staticmethod
    def _tail_raw(body: bytes, u: int, text: bytes, t: int) -> int:
        """Raw index of text index ``t`` (a held tail): cheap when no escape sits in the tail."""
        h = len(text) - t
        if h <= u and body[u - h:u] == text[t:]:
            esc = body.rfind(b"\x1b", 0, u)
            if esc == -1:
                return u - h
            if sequence_end(body, esc) <= u - h:
                return u - h
        runs = text_runs(body[:u])
        starts = [r[0] for r in runs]
        i = bisect_right(starts, t) - 1
        return runs[i][1] + (t - runs[i][0])

    @staticmethod
    def _cut_out(body: bytes, u: int, b: int, merged: list[tuple[int, int, bool]], first: int, raw_cut: int) -> bytes:
        """``body[first:raw_cut]`` with the spans' text bytes replaced (escape sequences among them kept)."""
        runs = text_runs(body[:u])
        starts = [r[0] for r in runs]
        out = bytearray()
        pos = first
        for s, e, mark in merged:
            ps, pe = s - b, e - b
            i = bisect_right(starts, ps) - 1
            j = bisect_right(starts, pe - 1) - 1
            rs = runs[i][1] + (ps - runs[i][0])
            re_ = runs[j][1] + (pe - 1 - runs[j][0]) + 1
            out += body[pos:rs]
            if mark:
                out += REDACTED
            for k in range(i, j):  # escape sequences and controls between the secret's pieces
                out += body[runs[k][1] + runs[k][2]:runs[k + 1][1]]
            pos = re_
        out += body[pos:raw_cut]
        return bytes(out)


#: Terminal strings (OSC, DCS, SOS, PM, APC): their payload is no text of the screen, but a window title is
#: shown and every one is kept in the ``.log`` and relayed to viewers.  OSC ends at BEL or ESC, the others at ESC.
_STRING_SEQ = re.compile(rb"(\x1b(?:\]|[PX^_]))((?<=\])[^\x07\x1b]*|(?<!\])[^\x1b]*)")
_STRING_INTRODUCERS = (b"", b"]", b"P", b"X", b"^", b"_")  # b"": a lone ESC at the end may begin one


def _has_string(data: bytes) -> bool:
    return any(b"\x1b" + c in data for c in _STRING_INTRODUCERS[1:])


def _merge(spans: list[tuple[int, int, bool]], cut: int) -> list[tuple[int, int, bool]]:
    """Overlapping spans as one (marked as its first piece), those before ``cut`` only."""
    merged: list[tuple[int, int, bool]] = []
    for s, e, mark in sorted(spans):
        if s >= cut:
            break
        if merged and s <= merged[-1][1]:
            ms, me, mmark = merged[-1]
            merged[-1] = (ms, max(me, e), mmark)
        else:
            merged.append((s, e, mark))
    return merged


def _cut_text(q: bytes, b: int, cut: int, merged: list[tuple[int, int, bool]], moves: list[int]) -> bytes:
    """The released text ``q[b:cut]`` with spans replaced and a newline per line move.

    A line move inside a secret becomes a newline after its marker, as the clean
    view of the redacted raw bytes would show it.
    """
    out = bytearray()
    pos = b
    it = iter(m + b for m in moves if m <= cut - b)
    nxt = next(it, None)
    for s, e, mark in merged:
        while nxt is not None and nxt <= s:
            out += q[pos:nxt] + b"\n"
            pos, nxt = nxt, next(it, None)
        out += q[pos:s]
        if mark:
            out += REDACTED
        while nxt is not None and nxt < e:
            out += b"\n"
            nxt = next(it, None)
        pos = e
    while nxt is not None:
        out += q[pos:nxt] + b"\n"
        pos, nxt = nxt, next(it, None)
    out += q[pos:cut]
    return bytes(out)


_default_redactor: Redactor | None = None


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """Redact every secret shape (and the secret values of ``env``) in ``text``.

    The one function for everything agentd writes from agent output outside
    the transcripts: the event log, the recent summary and ``[auto]`` lines,
    the wakeup briefing, history records.
    """
    global _default_redactor
    if env and secret_env_values(env):
        return Redactor(env).redact_text(text)
    if _default_redactor is None:
        _default_redactor = Redactor()
    return _default_redactor.redact_text(text)


def redact_value(value: object, env: Mapping[str, str] | None = None) -> object:
    """``value`` with :func:`redact_text` applied to every string in it (dicts and lists walked; keys kept)."""
    if isinstance(value, str):
        return redact_text(value, env)
    if isinstance(value, dict):
        return {k: redact_value(v, env) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, env) for v in value]
    return value


__all__ = ["MAX_HOLD", "REDACTED", "Redactor", "is_secret_env_name", "redact_text", "redact_value",
           "secret_env_values"]
