"""One token estimate for the whole project, used where no agent reports real counts.

``estimate_tokens`` counts ASCII characters at 4 per token and every other
character as one token.  Measured against OpenAI's o200k/cl100k tokenizers on
English prose and Python source, 4 ASCII characters per token is within about
±20% (prose is closer to 4.2, dense code closer to 3.5, so code is slightly
under-estimated); CJK text is roughly one token per character.  The wakeup
budget and the transcript-based context figure both use this function, so they
err the same way; adapters that read the agent's own counts replace it.
"""

from __future__ import annotations

ASCII_CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (see the module docstring for the error)."""
    if not text:
        return 0
    ascii_len = len(text.encode("ascii", "ignore"))
    other = len(text) - ascii_len
    return -(-ascii_len // ASCII_CHARS_PER_TOKEN) + other


def estimate_tokens_bytes(size_ascii: int, size_other: int = 0) -> int:
    """Same estimate from character counts already split into ASCII and other."""
    return -(-size_ascii // ASCII_CHARS_PER_TOKEN) + size_other
