"""Secret redaction for agent output: streaming (chunks of a PTY) and whole strings.

A secret may be split across two chunks, so :meth:`Redactor.feed` holds back
a bounded tail (at most :data:`MAX_HOLD` bytes) *only* when that tail could be
the start of a secret; :meth:`Redactor.flush` releases it.  Everything on the
hot path works on whole chunks with compiled bytes regexes; cheap literal
pre-checks skip chunks that cannot hold a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Replacement written in place of every secret.
REDACTED = b"[REDACTED]"
#: Upper bound of bytes the redactor holds back between two writes.
MAX_HOLD = 256
#: Environment values shorter than this are not treated as secrets.
MIN_ENV_SECRET_LEN = 8
#: Suffixes (and exact names) of environment variables whose values are secrets.
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
SECRET_ENV_NAMES = frozenset({"API_KEY"})

# --------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------

# Each pattern is written so that the regex engine can skip quickly to a
# literal first byte; word boundaries are expressed as look-behinds placed
# *after* the first literal so that the literal-prefix scan still applies.
_KEY_CHARS = rb"[A-Za-z0-9_\-]"
_SK = rb"sk-(?<![A-Za-z0-9_\-]sk-)" + _KEY_CHARS + rb"{20,}"
_GH = rb"(?:gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{20,}|github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{20,})"
_AWS = rb"(?:AKIA|ASIA)(?<![A-Za-z0-9](?:AKIA|ASIA))[0-9A-Z]{16}(?![0-9A-Z])"
_BEARER = rb"(?P<bearer>[Bb]earer|BEARER)(?<![A-Za-z0-9_][Bb]earer)(?<![A-Za-z0-9_]BEARER)(?P<sp>[ \t]+)[A-Za-z0-9._~+/=\-]{8,}"

# "Could this tail be the start of a secret?" patterns, anchored at the end of
# a short tail.  Each matches every proper prefix of its secret pattern and any
# complete match that could still grow with the next chunk.
_SK_PARTIAL = rb"(?<![A-Za-z0-9_\-])(?:s|sk|sk-[A-Za-z0-9_\-]*)\Z"
_GH_PARTIAL = (
    rb"(?<![A-Za-z0-9_])(?:g|gh|gh[pousr]|gh[pousr]_[A-Za-z0-9]*"
    rb"|gi|git|gith|githu|github|github_|github_p|github_pa|github_pat|github_pat_[A-Za-z0-9_]*)\Z"
)
_AWS_PARTIAL = rb"(?<![A-Za-z0-9])(?:A|AK|AKI|AS|ASI|(?:AKIA|ASIA)[0-9A-Z]{0,16})\Z"
_BEARER_PARTIAL = (
    rb"(?<![A-Za-z0-9_])(?:[Bb]|[Bb]e|[Bb]ea|[Bb]ear|[Bb]eare|BE|BEA|BEAR|BEARE"
    rb"|(?:[Bb]earer|BEARER)(?:[ \t]+[A-Za-z0-9._~+/=\-]*)?)\Z"
)

# The bytes a partial match can consist of: the key characters of every
# pattern, and for a "Bearer" token also the blanks and token punctuation.
_PARTIAL_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_PARTIAL_CHARS_BEARER = _PARTIAL_CHARS + b" \t._~+/="


def _is_secret_env_name(name: str) -> bool:
    upper = name.upper()
    return upper in SECRET_ENV_NAMES or upper.endswith(SECRET_ENV_SUFFIXES)


class Redactor:
    """Streaming secret redactor for a PTY byte stream.

    ``env`` is the unit's environment; the exact values of variables named
    ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD`` or ``API_KEY``
    (values of at least 8 characters) are redacted in addition to the built-in
    patterns (``sk-…``, ``Bearer …``, GitHub ``ghp_``/``gho_``/``github_pat_``
    tokens, AWS ``AKIA…`` key ids).

    Use :meth:`feed` for stream chunks, :meth:`flush` to release the held tail,
    :meth:`redact` / :meth:`redact_text` for complete, self-contained data.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, max_hold: int = MAX_HOLD) -> None:
        self.max_hold = max_hold
        values = sorted(
            {
                v.encode("utf-8", "surrogateescape")
                for k, v in (env or {}).items()
                if _is_secret_env_name(k) and len(v) >= MIN_ENV_SECRET_LEN
            },
            key=len,
            reverse=True,
        )
        self._env_values: tuple[bytes, ...] = tuple(values)
        alternatives = [_SK, _GH, _AWS, _BEARER]
        if values:
            alternatives.insert(0, b"(?:" + b"|".join(re.escape(v) for v in values) + b")")
        self._full = re.compile(b"|".join(alternatives))
        self._partial = re.compile(b"|".join([_SK_PARTIAL, _GH_PARTIAL, _AWS_PARTIAL, _BEARER_PARTIAL]))
        # Cheap pre-checks (literal-prefix searches run at ~1 GB/s): if none
        # hits, no pattern can match and the chunk is passed through as is.
        builtin = tuple(re.compile(t).search for t in
                        (rb"sk-", rb"gh[pousr]_", rb"github_pat_", rb"A[KS]IA", rb"earer", rb"EARER"))
        # A value containing a built-in trigger (an sk-... key) needs no trigger of its own.
        own = [re.compile(re.escape(v)).search for v in values if not any(b(v) for b in builtin)]
        self._triggers = builtin + tuple(own)
        self._carry = b""

    # -- complete data ---------------------------------------------------
    def redact(self, data: bytes) -> bytes:
        """Redact every secret in ``data`` (treated as complete, nothing held)."""
        if not self._may_contain_secret(data):
            return data
        return self._full.sub(self._replace, data)

    def redact_text(self, text: str) -> str:
        """Redact a complete string (log lines, structlog event values)."""
        data = text.encode("utf-8", "surrogateescape")
        out = self.redact(data)
        return text if out is data else out.decode("utf-8", "surrogateescape")

    def structlog_processor(self, logger: object, method_name: str, event_dict: dict) -> dict:
        """A structlog processor redacting every string value of the event."""
        for key, value in event_dict.items():
            if isinstance(value, str):
                event_dict[key] = self.redact_text(value)
        return event_dict

    # -- streams ---------------------------------------------------------
    @property
    def pending(self) -> int:
        """Number of bytes currently held back."""
        return len(self._carry)

    def feed(self, data: bytes) -> bytes:
        """Redact the next chunk of a stream; may hold back up to ``max_hold`` bytes."""
        buf = self._carry + data if self._carry else bytes(data)
        n = len(buf)
        cut = self._hold_point(buf)
        self._carry = buf[cut:]
        return self.redact(buf[:cut]) if cut < n else self.redact(buf)

    def flush(self) -> bytes:
        """Release (redacted) whatever is held back."""
        buf, self._carry = self._carry, b""
        return self.redact(buf)

    # -- internals -------------------------------------------------------
    def _may_contain_secret(self, data: bytes) -> bool:
        for search in self._triggers:
            if search(data) is not None:
                return True
        return False

    @staticmethod
    def _replace(match: re.Match[bytes]) -> bytes:
        if match.group("bearer") is not None:
            return match.group("bearer") + match.group("sp") + REDACTED
        return REDACTED

    def _hold_point(self, buf: bytes) -> int:
        """Index from which ``buf`` must be held back (``len(buf)`` if none)."""
        n = len(buf)
        lo = max(0, n - self.max_hold)
        cut = n
        # Every partial match ends at the end of ``buf`` and consists only of
        # token bytes (plus blanks after a "Bearer"), so it starts inside the
        # trailing run of such bytes: search only there (usually nothing, as
        # output lines end with a newline).  Same leftmost match as searching
        # from ``lo``; the look-behinds still see the byte before the run.
        tail = buf[lo:]
        chars = _PARTIAL_CHARS_BEARER if (b"earer" in tail or b"EARER" in tail) else _PARTIAL_CHARS
        start = lo + len(tail.rstrip(chars))
        if start < n:
            m = self._partial.search(buf, start)
            if m is not None:
                cut = m.start()
        for value in self._env_values:
            cut = min(cut, _prefix_suffix_start(buf, value, lo))
        if cut < n:
            # A complete secret straddling the cut would be split in two: hold it whole.
            window = max(0, cut - self.max_hold)
            if self._may_contain_secret(buf[window:]):
                for full in self._full.finditer(buf, window, n):
                    if full.start() < cut < full.end():
                        cut = max(full.start(), lo)
                        break
        return cut


def _prefix_suffix_start(buf: bytes, value: bytes, lo: int) -> int:
    """Start of the longest suffix of ``buf[lo:]`` that is a proper prefix of ``value``."""
    n = len(buf)
    longest = min(len(value) - 1, n - lo)
    first = value[:1]
    # Only positions holding the first byte of the value can start a prefix.
    pos = buf.find(first, n - longest) if longest > 0 else -1
    while pos != -1:
        if value.startswith(buf[pos:]):
            return pos
        pos = buf.find(first, pos + 1)
    return n


_default_redactor: Redactor | None = None


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """Redact the built-in secret patterns (and ``env`` secret values) in ``text``."""
    global _default_redactor
    if env:
        return Redactor(env).redact_text(text)
    if _default_redactor is None:
        _default_redactor = Redactor()
    return _default_redactor.redact_text(text)
