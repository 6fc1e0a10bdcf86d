"""Small pure helpers the trail parsers share: paths, reads in a shell command, files in a patch."""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import PurePosixPath

#: Programs whose file arguments are reads when they run alone (``cat a b``, ``sed -n 1,9p f``).
READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "sed", "wc", "file", "stat"})
#: Of those, the options that take a value (so the value is not a file).
_VALUE_OPTS = {"head": {"-n", "-c"}, "tail": {"-n", "-c"}, "sed": {"-e", "-f"}, "nl": {"-b", "-w", "-s"}}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)
_SHELL_META = re.compile(r"[|;&<>`$(){}]")
OUTPUT_CHARS = 240


def norm_path(path: str, cwd: str | None, root: str | None) -> str:
    """``path`` (absolute, or relative to ``cwd``) relative to ``root`` when inside it, else absolute.

    Pure string work (no file system): ``..`` is folded, symlinks are not followed.
    """
    text = str(path).strip()
    if text.startswith("file://"):
        text = text[len("file://"):]
    base = cwd or root or "/"
    full = posixpath.normpath(text if text.startswith("/") else posixpath.join(base, text))
    for anchor in (root, cwd):
        if anchor:
            anchor = posixpath.normpath(anchor)
            if full == anchor:
                return "."
            if full.startswith(anchor.rstrip("/") + "/"):
                return full[len(anchor.rstrip("/")) + 1:]
    return full


def reads_of_command(command: str) -> tuple[str, ...] | None:
    """The files a simple read command reads (``cat a b``, ``sed -n '1,20p' f``), or None if it is
    not one (pipes, redirections, other programs, ``sed`` without ``-n``)."""
    if _SHELL_META.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or PurePosixPath(words[0]).name not in READERS:
        return None
    prog = PurePosixPath(words[0]).name
    if prog == "sed" and not any(w == "-n" or (w.startswith("-") and "n" in w[1:] and not w.startswith("--")) for w in words[1:]):
        return None  # sed without -n may edit (-i) or print everything: not counted
    files: list[str] = []
    skip = False
    script_seen = prog != "sed"
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if word.startswith("-") and word != "-":
            if word in _VALUE_OPTS.get(prog, set()):
                skip = True
                if prog == "sed" and word == "-e":
                    script_seen = True
            if word == "-i" or word.startswith("--in-place") or (prog == "sed" and word.startswith("-i")):
                return None
            continue
        if not script_seen:
            script_seen = True  # sed's first plain word is its script
            continue
        files.append(word)
    return tuple(files) if files else None


def patch_files(patch: str) -> tuple[str, ...]:
    """The files an ``apply_patch`` patch adds, updates, deletes or moves to, in order."""
    return tuple(dict.fromkeys(a or b for a, b in _PATCH_FILE.findall(patch)))


def output_tail(text: str, limit: int = OUTPUT_CHARS) -> str:
    """The end of a command's output, its last non-empty lines, at most ``limit`` characters."""
    lines = [ln.rstrip() for ln in str(text or "").replace("\r\n", "\n").splitlines() if ln.strip()]
    out = ""
    for line in reversed(lines):
        candidate = line if not out else f"{line}\n{out}"
        if len(candidate) > limit:
            if not out:
                out = "…" + line[-(limit - 1):]
            break
        out = candidate
    return out


def one_line(text: str) -> str:
    return " ".join(str(text).split())
