"""Ids that two hosts can mint at once without ever colliding, and the old numbered ids.

* Snapshots: ``snapshot-<ULID>`` (26 Crockford base32 characters: 48 bits of
  milliseconds, then 80 random bits).  Sorting the ids sorts them by time,
  so "newest" still means something across hosts; within one store the ids
  are made strictly increasing under the store lock (:func:`next_ulid`).
  Old ids (``snapshot-014``) still parse and sort before every ULID.
* Facts: ``F-<8 base32 characters>`` (40 random bits, short enough to type);
  old ``F-7`` ids still parse.

No counter is needed for uniqueness, so nothing numbered has to be shared
between clones, and a crash can never make an id be handed out twice.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime

from .clock import system_clock

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(CROCKFORD)}
ULID_LEN = 26
_ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_SNAPSHOT_RE = re.compile(r"(?:snapshot-)?(?:0*(?P<seq>\d{1,12})|(?P<ulid>[0-9A-Za-z]{26}))(?:\.json)?")
FACT_ID_RE = re.compile(r"F-(?:\d+|[0-9a-hjkmnp-tv-z]{8})", re.I)


class IdError(ValueError):
    """Text that is not an id of the expected kind."""


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(out))


def _decode(text: str) -> int:
    value = 0
    for ch in text.upper():
        value = value * 32 + _DECODE[ch]
    return value


def ulid(when: datetime | None = None, *, after: str | None = None) -> str:
    """A new ULID for ``when`` (default: now), strictly greater than ``after`` when given."""
    ms = int((when or system_clock()).timestamp() * 1000)
    value = (ms << 80) | secrets.randbits(80)
    if after is not None and re.fullmatch(_ULID_RE, after.upper()):
        floor = _decode(after)
        if value <= floor:
            value = floor + 1
    return _encode(value & ((1 << 128) - 1), ULID_LEN)


def snapshot_id_for(token: str) -> str:
    return f"snapshot-{token}"


def numbered_snapshot_id(seq: int) -> str:
    """The old ``snapshot-014`` form (still read; no longer minted)."""
    return f"snapshot-{seq:03d}"


def parse_snapshot_id(text: str) -> str:
    """The canonical id of ``snapshot-014`` / ``014`` / ``14`` / ``snapshot-<ULID>`` / ``<ULID>``."""
    m = _SNAPSHOT_RE.fullmatch(text.strip())
    if not m:
        raise IdError(f"{text!r} is not a snapshot id (expected e.g. snapshot-01JDZ8Q3W5M6X7Y8Z9ABCDEFGH or snapshot-014)")
    if m.group("seq") is not None:
        return numbered_snapshot_id(int(m.group("seq")))
    token = m.group("ulid").upper()
    if not _ULID_RE.fullmatch(token):
        raise IdError(f"{text!r} is not a snapshot id: {token} is not a ULID (Crockford base32, no I, L, O, U)")
    return snapshot_id_for(token)


def snapshot_sort_key(ident: str) -> str:
    """Orders every snapshot id: old numbered ids first (by number), then ULIDs (by time).

    A string, so it can be stored in JSON and compared: ``"0:000000000014"``,
    ``"1:01JDZ..."``; ``""`` for text that is no snapshot id.
    """
    try:
        canonical = parse_snapshot_id(ident)
    except IdError:
        return ""
    token = canonical[len("snapshot-"):]
    return f"0:{int(token):012d}" if token.isdigit() else f"1:{token}"


def new_fact_id(taken: set[str]) -> str:
    """A fresh ``F-xxxxxxxx`` not in ``taken`` (40 random bits; collisions across hosts are negligible)."""
    while True:
        ident = "F-" + _encode(secrets.randbits(40), 8).lower()
        if ident not in taken:
            return ident


def parse_fact_id(text: str) -> str:
    """Canonical form of a fact id typed by a person: ``f-7`` -> ``F-7``, ``F-AB12CD34`` -> ``F-ab12cd34``."""
    text = text.strip()
    if not text.upper().startswith("F-"):
        text = f"F-{text}"
    if not FACT_ID_RE.fullmatch(text):
        raise IdError(f"{text!r} is not a fact id (expected F-7 or F-ab12cd34; see `agentd fact list`)")
    return "F-" + text[2:].lower()
