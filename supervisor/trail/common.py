"""Small pure helpers the trail parsers share: paths, reads in a shell command, files in a patch,
agentd's own commands, and what an edit wrote (its digest)."""

from __future__ import annotations

import hashlib
import json
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
#: Splits a command line into its simple commands (``a && b; c || d | e``).
_SEQUENCE = re.compile(r"\s*(?:&&|\|\||[;|\n])\s*")
#: Parts of a compound command that do no work of their own (``agentd note ... && echo written``).
_NO_WORK = frozenset({"echo", "true", ":", "printf"})


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


def is_agentd_command(command: str | None) -> bool:
    """Whether ``command`` is agentd's own and nothing else: ``agentd note|decide|task-state ...`` (the notes
    each checkpoint asks for), ``python -m supervisor ...``, or a line of them joined with ``&&``/``;``/``|``
    to ``echo``.  Such a command is bookkeeping, never the agent's last piece of work (its wakeup's "last
    command", the report's repeated commands, a recall probe).  A screen's ``$ agentd note: ok`` counts too."""
    parts = [p for p in _SEQUENCE.split(str(command or "").strip()) if p.strip()]
    own = False
    for part in parts:
        words = part.split()
        while words and "=" in words[0] and not words[0].startswith("="):  # VAR=value agentd ...
            words = words[1:]
        if not words:
            continue
        name = PurePosixPath(words[0].rstrip(":")).name
        if name == "agentd" or (name.startswith("python") and words[1:3] == ["-m", "supervisor"]):
            own = True
        elif name not in _NO_WORK:
            return False
    return own


def change_digest(path: str, change: object) -> str:
    """A short digest of one edit: the file and what was written to it (a patch's text, an edit's old and new
    strings, a whole file's content).  The same change made again, in a later session, has the same digest."""
    body = json.dumps(change, sort_keys=True, ensure_ascii=False, default=str) if not isinstance(change, str) else change
    text = path + "\0" + " ".join(body.split())
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16]


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


