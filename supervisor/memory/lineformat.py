"""The decision line format: render, parse (English and Chinese labels), validate "why".

A decision is one line::

    [2026-11-30 14:32] [arch] decision: ... | why: because ..., so ... | files: src/a/*.py, src/b.py | snapshot: snapshot-014 | alternatives: ...

Fields are separated by `` | ``.  Inside a value, ``\\`` ``|`` and ``,`` (in
the file list) are escaped with a backslash and newlines are written ``\\n``,
so any text round-trips.  Hand-written logs with Chinese labels are read too::

    [2024-05-01 14:32] 决策：接口层采用适配器模式 | 理由：... | 影响文件：src/adapters/*.ts | 快照：snapshot-014 | 替代方案：...

A line needs a timestamp, a decision and a why; anything less (e.g. a line
torn by a crash) raises :class:`LineError`, and readers skip it and report it
with its line number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .ids import snapshot_sort_key

TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")

_HEAD_RE = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\]\s*")
_TAG_HEAD_RE = re.compile(r"\[([^\[\]\s]{1,32})\]\s*")

# label (lowercased) -> field
LABELS: dict[str, str] = {
    "decision": "decision",
    "why": "why",
    "files": "files",
    "snapshot": "snapshot",
    "alternatives": "alternatives",
    "决策": "decision",
    "决定": "decision",
    "理由": "why",
    "原因": "why",
    "影响文件": "files",
    "文件": "files",
    "快照": "snapshot",
    "替代方案": "alternatives",
    "备选方案": "alternatives",
    "标签": "tags",
}
_LABEL_RE = re.compile(r"\s*([^:：\s][^:：]{0,15}?)\s*[:：]\s*", re.S)
_FILE_SPLIT_RE = re.compile(r"[，、]")
#: What a hand-written ``files:`` says for "no file" (compared lowercased): never a file name.
NO_FILES = ("无", "-", "none")

# "why" must name a cause and then a conclusion.
_CAUSE_RE = re.compile(r"\b(?:because|since|due to|given that)\b|因为|由于", re.I)
_CONCLUSION_RE = re.compile(r"\b(?:so|therefore|thus|hence|which means)\b|所以|因此|因而", re.I)

WHY_RULE = (
    "the why must state a cause and a conclusion, in that order: "
    "'because <cause>, so <conclusion>' (also accepted: since/due to ... therefore/thus/hence, "
    "or 因为…所以…/由于…因此…)"
)


class LineError(ValueError):
    """A line is not a decision line; the message says which part is wrong."""


@dataclass(frozen=True)
class Decision:
    """One parsed decision line."""

    time: str  # "YYYY-MM-DD HH:MM"
    decision: str
    why: str = ""
    tags: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    snapshot: str = ""
    alternatives: str = ""
    extra: tuple[tuple[str, str], ...] = field(default=())

    @property
    def snapshot_seq(self) -> int:
        """Number of an old numbered snapshot id (``snapshot-014``), -1 for none or a ULID id."""
        m = re.fullmatch(r"snapshot-0*(\d+)", self.snapshot)
        return int(m.group(1)) if m else -1

    @property
    def snapshot_key(self) -> str:
        """Sort key of the snapshot id (numbered ids before ULIDs; ``""`` for none): the tie-breaker."""
        return snapshot_sort_key(self.snapshot) if self.snapshot else ""


def check_why(why: str) -> None:
    """Raise :class:`LineError` unless ``why`` has a cause followed by a conclusion."""
    cause = _CAUSE_RE.search(why)
    if not cause:
        raise LineError(f"{WHY_RULE}; no cause found in {why!r}")
    if not _CONCLUSION_RE.search(why, cause.end()):
        raise LineError(f"{WHY_RULE}; no conclusion after the cause in {why!r}")


def check_tag(tag: str) -> str:
    if not TAG_RE.fullmatch(tag):
        raise LineError(f"tag {tag!r} is not usable: letters, digits, '_', '.', '-' (at most 32 characters)")
    return tag


def escape(value: str, *, comma: bool = False) -> str:
    out = value.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "\\n")
    return out.replace(",", "\\,") if comma else out


def _unescape(value: str) -> str:
    if "\\" not in value:  # nothing escaped (most fields): the loop below would copy it as it is
        return value
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append("\n" if nxt == "n" else nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on ``sep`` characters that are not backslash-escaped (escapes kept)."""
    if "\\" not in text:  # nothing escaped (most lines): every sep splits
        return text.split(sep)
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def render(d: Decision) -> str:
    """The canonical English line for ``d`` (no trailing newline)."""
    head = f"[{d.time}]" + "".join(f" [{t}]" for t in d.tags)
    fields = [f"decision: {escape(d.decision)}", f"why: {escape(d.why)}"]
    if d.files:
        fields.append("files: " + ", ".join(escape(f, comma=True) for f in d.files))
    if d.snapshot:
        fields.append(f"snapshot: {escape(d.snapshot)}")
    if d.alternatives:
        fields.append(f"alternatives: {escape(d.alternatives)}")
    fields.extend(f"{label}: {escape(value)}" for label, value in d.extra)
    return head + " " + " | ".join(fields)


def parse(line: str) -> Decision:
    """Parse one decision line (English or Chinese labels); raise :class:`LineError`."""
    text = line.strip()
    m = _HEAD_RE.match(text)
    if not m:
        raise LineError("does not start with a [YYYY-MM-DD HH:MM] timestamp")
    if (len(text) - len(text.rstrip("\\"))) % 2:
        raise LineError("ends inside a backslash escape (a line cut short)")
    time = m.group(1)
    pos = m.end()
    tags: list[str] = []
    while (t := _TAG_HEAD_RE.match(text, pos)) is not None:
        tags.append(t.group(1))
        pos = t.end()
    values: dict[str, str] = {}
    extra: list[tuple[str, str]] = []
    for chunk in _split_unescaped(text[pos:], "|"):
        if not chunk.strip():
            continue
        lm = _LABEL_RE.match(chunk)
        if not lm:
            raise LineError(f"field {chunk.strip()[:40]!r} has no 'label:' prefix")
        label = lm.group(1).strip()
        value = chunk[lm.end() :].strip()
        key = LABELS.get(label.lower())
        if key is None:
            extra.append((label, _unescape(value)))
        elif key in values:
            raise LineError(f"field {label!r} appears twice")
        else:
            values[key] = value
    if not values.get("decision"):
        raise LineError("has no 'decision:' (决策：) field")
    if not values.get("why"):
        raise LineError("has no 'why:' (理由：) field; a decision without its reason is treated as torn")
    files: tuple[str, ...] = ()
    if values.get("files"):
        raw = _split_unescaped(values["files"], ",")
        files = tuple(
            f
            for part in raw
            for f in (_unescape(p).strip() for p in _FILE_SPLIT_RE.split(part))
            if f and f.lower() not in NO_FILES
        )
    if "tags" in values:
        tags.extend(t for t in re.split(r"[,，、\s]+", _unescape(values["tags"])) if t)
    return Decision(
        time=time,
        decision=_unescape(values["decision"]),
        why=_unescape(values["why"]),
        tags=tuple(tags),
        files=files,
        snapshot=_unescape(values.get("snapshot", "")),
        alternatives=_unescape(values.get("alternatives", "")),
        extra=tuple(extra),
    )
