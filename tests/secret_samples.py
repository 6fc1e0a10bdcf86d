"""Random strings that a regular expression matches: a sample secret for each gitleaks rule.

:func:`sample` walks the parsed pattern (``re._parser``) and draws each
piece at random: a branch, a repeat count (unbounded repeats get a few more
than their minimum), a character of a class.  Assertions (``\\b``, lookarounds)
are not drawn; :func:`secret_of` checks the result with the rule itself and
draws again until the rule matches, with its entropy and allowlists passed.
Seeded, so a failure names a sample that can be drawn again.
"""

from __future__ import annotations

import random
import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]

from supervisor.session.gitleaks import Rule

_PRINTABLE = [bytes([c]) for c in range(0x21, 0x7F)]
_CATEGORY = {
    C.CATEGORY_DIGIT: b"0123456789",
    C.CATEGORY_WORD: b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    C.CATEGORY_SPACE: b" ",
    C.CATEGORY_NOT_DIGIT: b"abcXYZ_-",
    C.CATEGORY_NOT_WORD: b" -.:",
    C.CATEGORY_NOT_SPACE: b"abcXYZ019",
}


def _in(items: list, rnd: random.Random) -> bytes:
    """A byte a class (``IN``) holds."""
    negate = any(op is C.NEGATE for op, _ in items)
    pool: list[int] = []
    for op, av in items:
        if op is C.LITERAL:
            pool.append(av)
        elif op is C.RANGE:
            pool.extend(range(av[0], av[1] + 1))
        elif op is C.CATEGORY:
            pool.extend(_CATEGORY[av])
    if negate:
        pool = [c for c in range(0x21, 0x7F) if c not in pool and c not in b"'\"`;\\"]
    return bytes([rnd.choice(pool)])


def _draw(parsed, rnd: random.Random, out: bytearray) -> None:
    for op, av in parsed:
        if op is C.LITERAL:
            out.append(av)
        elif op is C.NOT_LITERAL:
            out += rnd.choice([c for c in _PRINTABLE if c[0] != av])
        elif op is C.IN:
            out += _in(av, rnd)
        elif op is C.ANY:
            out += b"."  # an unescaped dot in a rule almost always means a dot (hooks.slack.com)
        elif op is C.BRANCH:
            _draw(rnd.choice(av[1]), rnd, out)
        elif op is C.SUBPATTERN:
            _draw(av[3], rnd, out)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, item = av
            high = low + 6 if high is C.MAXREPEAT else high
            for _ in range(rnd.randint(low, max(low, min(high, low + 40)))):
                _draw(item, rnd, out)
        elif op is C.CATEGORY:
            out += bytes([rnd.choice(_CATEGORY[av])])
        # AT, ASSERT, ASSERT_NOT, GROUPREF: nothing drawn


def sample(pattern: re.Pattern[bytes], rnd: random.Random) -> bytes:
    """One random string built from ``pattern``'s pieces (not always a match: see :func:`secret_of`)."""
    out = bytearray()
    _draw(_parser.parse(pattern.pattern.decode("latin-1"), pattern.flags), rnd, out)
    return bytes(out)


def secret_of(rule: Rule, seed: int, tries: int = 400) -> tuple[bytes, bytes] | None:
    """(a line that holds a secret of ``rule``, the secret), drawn with ``seed``; None if none was found."""
    rnd = random.Random(seed)
    for _ in range(tries):
        drawn = sample(rule.regex, rnd)
        line = b"out: " + drawn + b"\n"
        m = rule.regex.search(line)
        if m is None:
            continue
        s, e = rule.secret_span(m)
        if e - s < 8 or rule.allowed(line, m, (s, e)):
            continue
        if not any(k in m.group().lower() for k in rule.keywords):
            continue  # gitleaks needs a keyword; a sample without one is no sample of the rule
        return line, line[s:e]
    return None
