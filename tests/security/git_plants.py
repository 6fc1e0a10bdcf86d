"""What a hostile agent writes into a repository so that git runs its code: every config-defined command and hook.

:func:`plant` writes, as an agent inside agentd's fence can (``.git/`` is
writable there), one small script per mechanism that leaves a marker file
named after it, and wires each script in: every hook git has (in
``.git/hooks``, or with ``hooks_path`` in a directory ``core.hooksPath`` names,
set from a file ``include.path`` pulls in), ``core.fsmonitor``, filter drivers
(``clean``/``smudge`` named from ``src/.gitattributes``, a ``process`` filter from
``.git/info/attributes``), a merge driver, ``diff.external`` and a textconv,
``core.pager``, ``core.editor``, ``core.askPass``, ``core.sshCommand``,
``core.gitProxy``, ``core.alternateRefsCommand`` (with ``objects/info/alternates``),
credential helpers, ``gpg.program`` with ``commit.gpgsign``, the remotes'
``uploadpack``/``receivepack``, and ``url.<ext::...>.insteadOf`` rewriting the
sync remote's URL to run a command (``protocol.allow = always``).

:func:`fire` then runs the real git CLI the way a person would, to show each
plant is live: a test that finds no marker after agentd's own work is only
meaningful if git itself leaves them.

Run as a script (``python git_plants.py ROOT MARKS OTHER_REMOTE``) it plants
from inside an agent's sandbox and prints ``planted PATH`` or ``refused PATH: ERROR``
per file.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit", "prepare-commit-msg",
         "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push", "pre-receive", "update",
         "proc-receive", "post-receive", "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
         "post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist",
         "p4-post-changelist", "p4-pre-submit", "post-index-change")
#: Scripts wired in through config keys (the marker is the name).
COMMANDS = ("fsmonitor", "filter-clean", "filter-smudge", "filter-process", "merge", "diffext", "textconv", "pager",
            "editor", "askpass", "ssh", "gitproxy", "altrefs", "cred", "cred-url", "gpg", "uploadpack", "receivepack",
            "ext")
#: Markers the git CLI leaves in :func:`fire` (what shows the plants are live).
FIRED = frozenset({"fsmonitor", "filter-clean", "filter-smudge", "filter-process", "merge", "diffext", "textconv",
                   "pager", "editor", "askpass", "ssh", "gitproxy", "cred", "cred-url", "gpg", "uploadpack",
                   "receivepack", "ext", "hook-pre-commit", "hook-prepare-commit-msg", "hook-commit-msg",
                   "hook-post-commit", "hook-reference-transaction", "hook-post-checkout", "hook-pre-push",
                   "hook-post-index-change", "hook-post-merge", "hook-pre-merge-commit", "altrefs"})
PASS_THROUGH = ("filter-clean", "filter-smudge", "pager", "textconv")


def _script(marks: Path, name: str, *, through: bool = False) -> str:
    tail = "exec cat" if through else "exit 0"
    return f"#!/bin/sh\ntouch '{marks}/{name}'\n{tail}\n"


def files(root: Path, marks: Path, other: Path, *, hooks_path: bool = False) -> dict[Path, str]:
    """Every file the plant writes (path -> text); ``.git/config`` is appended to, the rest replaced."""
    git = root / ".git"
    out: dict[Path, str] = {}
    exe = {name: git / f"evil-{name}" for name in COMMANDS}
    for name, path in exe.items():
        out[path] = _script(marks, name, through=name in PASS_THROUGH)
    hooks = root / ".githooks" if hooks_path else git / "hooks"
    for hook in HOOKS:
        out[hooks / hook] = _script(marks, f"hook-{hook}")
    origin_url = subprocess_free_origin(root)
    included = (f"[core]\n\tfsmonitor = {exe['fsmonitor']}\n"
                + (f"\thooksPath = {hooks}\n" if hooks_path else ""))
    out[git / "evil.config"] = included
    out[git / "config"] = "".join([
        "[include]\n\tpath = evil.config\n",
        f"[core]\n\tpager = {exe['pager']}\n\teditor = {exe['editor']}\n\taskPass = {exe['askpass']}\n"
        f"\tsshCommand = {exe['ssh']}\n\tgitProxy = {exe['gitproxy']}\n\talternateRefsCommand = {exe['altrefs']}\n",
        f"[credential]\n\thelper = {exe['cred']}\n[credential \"https://example.invalid\"]\n\thelper = {exe['cred-url']}\n",
        f"[diff]\n\texternal = {exe['diffext']}\n[diff \"evil\"]\n\ttextconv = {exe['textconv']}\n",
        f"[filter \"evil\"]\n\tclean = {exe['filter-clean']}\n\tsmudge = {exe['filter-smudge']}\n",
        f"[filter \"evilproc\"]\n\tprocess = {exe['filter-process']}\n",
        f"[merge \"evil\"]\n\tdriver = {exe['merge']} %O %A %B\n",
        f"[gpg]\n\tprogram = {exe['gpg']}\n[commit]\n\tgpgsign = true\n",
        f"[remote \"origin\"]\n\tuploadpack = {exe['uploadpack']}\n\treceivepack = {exe['receivepack']}\n",
        f"[remote \"other\"]\n\turl = {other}\n\tfetch = +refs/heads/*:refs/remotes/other/*\n"
        f"\tuploadpack = {exe['uploadpack']}\n\treceivepack = {exe['receivepack']}\n",
        f"[url \"ext::{exe['ext']}\"]\n\tinsteadOf = {origin_url}\n" if origin_url else "",
        "[protocol]\n\tallow = always\n[protocol \"ext\"]\n\tallow = always\n",
    ])
    out[git / "info" / "attributes"] = "*.proc filter=evilproc\n*.log merge=evil\n"
    out[root / "src" / ".gitattributes"] = "*.py filter=evil diff=evil\n"  # in the scope: a fenced agent writes it
    out[git / "objects" / "info" / "alternates"] = f"{other / 'objects'}\n"
    return out


def subprocess_free_origin(root: Path) -> str | None:
    return subprocess_free_url(root, "origin")


def subprocess_free_url(root: Path, remote: str) -> str | None:
    """``remote.<remote>.url`` from ``.git/config`` (read as text: no git runs once the plant is in)."""
    section = None
    try:
        text = (root / ".git" / "config").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == f'[remote "{remote}"]' and line.replace(" ", "").startswith("url="):
            return line.split("=", 1)[1].strip()
    return None


def plant(root: Path, marks: Path, other: Path, *, hooks_path: bool = False) -> dict[Path, str]:
    """Write every file of :func:`files`; the ones refused (path -> why)."""
    refused: dict[Path, str] = {}
    for path, text in files(root, marks, other, hooks_path=hooks_path).items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.name == "config" and path.parent.name == ".git":
                if "evil.config" not in path.read_text():
                    with path.open("a") as fh:
                        fh.write(text)
            else:
                path.write_text(text)
                if path.name.startswith("evil-") or path.parent.name in ("hooks", ".githooks"):
                    path.chmod(0o755)
        except OSError as exc:
            refused[path] = f"{type(exc).__name__}: {exc.strerror or exc}"
    return refused


def _git(root: Path, *args: str, stdin: bytes = b"", tty: bool = False) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "AGENTD_")) and k != "PAGER"}
    env.update({"GIT_AUTHOR_NAME": "p", "GIT_AUTHOR_EMAIL": "p@example.com", "GIT_COMMITTER_NAME": "p",
                "GIT_COMMITTER_EMAIL": "p@example.com", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb"})
    if tty:
        master, slave = pty.openpty()
        try:
            subprocess.run(["git", *args], cwd=root, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                           timeout=60, check=False)
        finally:
            os.close(slave)
            os.close(master)
        return
    subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, env=env, timeout=60, check=False)


def fire(root: Path) -> None:
    """Run the git CLI as a person would in the planted repository (each command triggers some plants)."""
    _git(root, "add", "-A", "--", ".", ":(exclude)*.proc")  # whatever the test left, so branches switch cleanly
    _git(root, "commit", "--no-gpg-sign", "--no-verify", "-q", "-m", "before the fire")
    src = root / "src"
    (src / "fire.py").write_text("fired = 1\n")
    (src / "fire.proc").write_text("fired\n")
    (src / "fire.log").write_text("base\n")
    _git(root, "status")  # fsmonitor, clean filter of changed files
    _git(root, "add", "src/fire.proc")  # the process filter (it fails: nothing is added)
    _git(root, "add", "src/fire.py", "src/fire.log")  # clean filter, post-index-change
    _git(root, "commit", "--no-gpg-sign", "-q", "-m", "fire")  # commit hooks, reference-transaction
    _git(root, "commit", "-q", "--allow-empty", "-m", "signed")  # gpg.program
    _git(root, "commit", "-q", "--no-gpg-sign", "--allow-empty")  # core.editor
    _git(root, "checkout", "-q", "-b", "fire-side")  # post-checkout
    (src / "fire.log").write_text("side\n")
    (src / "fire.py").write_text("fired = 2\n")
    _git(root, "commit", "--no-gpg-sign", "-q", "-am", "side")
    _git(root, "checkout", "-q", "-")  # smudge filter (fire.py changes back)
    (src / "fire.log").write_text("main\n")
    _git(root, "commit", "--no-gpg-sign", "-q", "-am", "main")
    _git(root, "merge", "--no-gpg-sign", "-q", "--no-edit", "fire-side")  # merge driver, post-merge
    _git(root, "diff", "HEAD~1")  # diff.external
    _git(root, "diff", "--no-ext-diff", "HEAD~2", "--", "src/fire.py")  # textconv
    _git(root, "log", "-1", tty=True)  # core.pager
    _git(root, "fetch", "-q", "other")  # remote.other.uploadpack
    _git(root, "push", "-q", "other", "HEAD:refs/heads/fired")  # remote.other.receivepack
    other = str(Path(subprocess_free_url(root, "other") or "."))
    _git(root, "fetch", "-q", other, "refs/heads/*:refs/remotes/by-url/*")  # the alternates' refs command
    _git(root, "push", "-q", other, "HEAD:refs/heads/fired")  # pre-push
    _git(root, "fetch", "-q", "origin")  # url.insteadOf -> ext::
    _git(root, "ls-remote", "ssh://example.invalid/x")  # core.sshCommand
    _git(root, "ls-remote", "git://example.invalid/x")  # core.gitProxy
    _git(root, "credential", "fill", stdin=b"protocol=https\nhost=example.invalid\n\n")  # helpers, askPass


def marks_of(marks: Path) -> set[str]:
    return {p.name for p in marks.iterdir()} if marks.is_dir() else set()


if __name__ == "__main__":
    where, marks_dir, other_remote = (Path(a) for a in sys.argv[1:4])
    failed = plant(where, marks_dir, other_remote, hooks_path="--hooks-path" in sys.argv)
    for planted in files(where, marks_dir, other_remote, hooks_path="--hooks-path" in sys.argv):
        print(f"refused {planted}: {failed[planted]}" if planted in failed else f"planted {planted}")
