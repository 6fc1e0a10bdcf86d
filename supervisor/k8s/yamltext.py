"""Kubernetes manifests as YAML text, from plain dicts, lists, strings, integers and booleans.

A small emitter of its own, so that ``agentd export k8s`` needs no YAML
library: block mappings and sequences (kubectl's layout), strings
double-quoted unless they are plain words that YAML reads back as the same
string, multi-line strings (the pods' shell scripts) as literal blocks.  What
it writes reads back, with any YAML 1.1 or 1.2 loader, as exactly the data it
was given (``tests/test_export_k8s.py`` checks this with PyYAML, also on
generated strings).  Floats and other types are refused: manifests hold none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

INDENT = 2
# A plain (unquoted) scalar: starts with a letter or '/', then word characters, '.', '/', '-'.
_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9_./-]*")
# Words YAML 1.1 or 1.2 would read as a boolean or null, not as a string.
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"})
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def dump_all(documents: Sequence[Mapping[str, object]], header: Sequence[str] = ()) -> str:
    """A YAML stream: ``header`` as comment lines, then each document after a ``---`` line."""
    lines = [f"# {line}".rstrip() for line in header]
    for doc in documents:
        lines.append("---")
        lines.extend(_block(doc, 0) or ["{}"])
    return "\n".join(lines) + "\n"


def quote(text: str) -> str:
    """``text`` as a double-quoted YAML scalar: printable characters as they are, the rest escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable() and ch not in "\u2028\u2029\ufeff":
            out.append(ch)
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _string(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return quote(text)


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    raise TypeError(f"a manifest value must be a string, an integer, a boolean or None, not {type(value).__name__}")


def _literal(text: str, indent: int) -> list[str] | None:
    """A multi-line string as a literal block (``|`` or ``|-``), or None when a block could not hold it exactly."""
    body = text[:-1] if text.endswith("\n") else text
    lines = body.split("\n")
    if "\n" not in body or body.endswith("\n") or lines[0][:1] in (" ", "\t"):
        return None
    if any(line != line.rstrip(" \t") or not (line.isprintable() or line == "") for line in lines):
        return None
    if any(ch in body for ch in "\r\u2028\u2029\ufeff"):
        return None
    pad = " " * indent
    return ["|" if text.endswith("\n") else "|-", *(pad + line if line else "" for line in lines)]


def _value_after_key(value: object, indent: int) -> tuple[str, list[str]]:
    """What follows ``key:`` on its line, and the lines below it."""
    if isinstance(value, Mapping):
        return ("", _block(value, indent + INDENT)) if value else (" {}", [])
    if isinstance(value, (list, tuple)):
        return ("", _block(value, indent)) if value else (" []", [])
    if isinstance(value, str) and "\n" in value:
        block = _literal(value, indent + INDENT)
        if block is not None:
            return " " + block[0], block[1:]
    return " " + _scalar(value), []


def _block(value: object, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a manifest key must be a string, not {type(key).__name__}")
            head, below = _value_after_key(item, indent)
            lines.append(f"{pad}{_string(key)}:{head}")
            lines.extend(below)
        return lines
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, Mapping) and item:
                inner = _block(item, indent + INDENT)
                lines.append(pad + "- " + inner[0][indent + INDENT:])
                lines.extend(inner[1:])
            elif isinstance(item, (list, tuple)) and item:
                lines.append(pad + "-")
                lines.extend(_block(item, indent + INDENT))
            else:
                head, below = _value_after_key(item, indent)
                lines.append(pad + "-" + head)
                lines.extend(below)
        return lines
    return [pad + _scalar(value)]
