"""``git fetch`` and ``git push`` for ``agentd sync``, run so that nothing an agent wrote into ``.git/`` is in force.

Why the git CLI at all: libgit2 fetches and pushes too, but not the way the
person's git does: its SSH (libssh2) reads no ``~/.ssh/config`` (host aliases,
``IdentityFile``, ``ProxyJump``) and it runs no credential helper, so a sync
that works from the person's shell would fail from agentd.  Why never in the
project's git directory: its ``.git/config`` is agent-writable and names hooks
(``pre-push``, ``reference-transaction``), ``core.fsmonitor``, upload-pack and
receive-pack commands, ``core.sshCommand``, credential helpers, ``url.*.insteadOf``
rewrites to ``ext::`` and more, and git runs all of them.

So each sync makes a private git directory, outside the project (under
``$XDG_RUNTIME_DIR/agentd``, else ``~/.cache/agentd``; the system temp
directory only when neither can be written, as inside an agent's own fence),
removed when the sync ends:

* its config is **the person's own**, as libgit2 reads it for this project:
  ``/etc/gitconfig``, ``~/.gitconfig``, ``~/.config/git/config`` with their
  includes, ``includeIf "gitdir:..."`` evaluated for this project (levels the
  agent cannot write); git reads nothing else (``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_GLOBAL=/dev/null``), so the person's ssh command, credential
  helpers, url rewrites and proxies work and the project's own do not;
* its objects are the project's (``GIT_OBJECT_DIRECTORY``): what is fetched
  lands where the merge reads it, and the push finds the memory commit;
* every key that runs a command, or would write into the project's objects,
  is pinned on the command line (:data:`PINS`): no hooks (the person's global
  ones neither: a memory push needs none), no fsmonitor, no alternate-refs
  command, no gc or maintenance, no commit-graph, no submodule recursion, no
  signed push, ``ext::`` never, and a remote helper (``name::url``) only where
  the person's own config allows it (``GIT_PROTOCOL_FROM_USER=0``);
* the URL is ``remote.<name>.url`` (``pushurl`` for the push) from the
  project's config, refused when it looks like an option or holds control
  characters; a local remote (a path, ``file://``) runs its upload-pack and
  receive-pack with hooks and fsmonitor off (a repository on this machine may
  be one an agent can write).

What of the person's own configuration a sync does run (their ssh command,
credential helpers, askpass, git proxy, and the environment's ``GIT_SSH*``)
:func:`sync_runs` names, for ``agentd doctor --env``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gitrepo import Repo

GIT_TIMEOUT = 120.0
#: Keys pinned on every transport command line (the last value wins over any config file).
PINS = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.alternateRefsCommand", "true"),
    ("core.pager", "cat"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("fetch.writeCommitGraph", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("submodule.recurse", "false"),
    ("push.recurseSubmodules", "no"),
    ("push.gpgSign", "false"),
    ("protocol.ext.allow", "never"),
    ("protocol.file.allow", "always"),  # a local remote (git 2.38.1 made it "user": GIT_PROTOCOL_FROM_USER=0 refuses it)
)
#: The pack programs of a local remote: its hooks and fsmonitor off, no gc after the push.
LOCAL_UPLOAD_PACK = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false upload-pack"
LOCAL_RECEIVE_PACK = ("git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c receive.autogc=false "
                      "-c receive.denyCurrentBranch=refuse receive-pack")
#: Where the repository and its configuration come from in git's environment: never the daemon's own.
_REPO_ENV = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
                       "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
                       "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_PROTOCOL_FROM_USER", "GIT_ALLOW_PROTOCOL"})
#: The levels of configuration an agent cannot write (libgit2's numbers: program data, system, XDG, global).
_PERSON_LEVELS = (1, 2, 3, 4)
_REMOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")


class TransportError(RuntimeError):
    """The remote cannot be reached as configured; the message says why and what to do."""


def remote_urls(repo: Repo, remote: str) -> tuple[str, str]:
    """(fetch URL, push URL) of ``remote`` in the project's config, checked; TransportError when absent or unusable."""
    if not _REMOTE_NAME.fullmatch(remote) or remote.endswith("."):
        raise TransportError(f"{remote!r} is not a usable remote name")
    config = repo.git.config
    try:
        url = config[f"remote.{remote}.url"]
    except KeyError:
        raise TransportError(f"no git remote {remote!r}: add one (git remote add {remote} URL) "
                             "or name another with --remote") from None
    try:
        push = config[f"remote.{remote}.pushurl"]
    except KeyError:
        push = url
    return _checked(url, remote, "url"), _checked(push, remote, "pushurl")


def _checked(url: str, remote: str, key: str) -> str:
    url = url.strip()
    if not url or url.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise TransportError(f"remote.{remote}.{key} = {url!r} is not a URL agentd uses (empty, an option, or "
                             "control characters); fix it with git remote set-url")
    return url


def is_local(url: str) -> bool:
    """A path or ``file://`` URL (git's rule: no ``scheme://`` and no ``host:`` before the first ``/``)."""
    if url.startswith("file:"):
        return True
    if "://" in url or re.match(r"[A-Za-z0-9][A-Za-z0-9+.-]*::", url):
        return False
    return ":" not in url.split("/", 1)[0]


def _base_dirs() -> list[Path]:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    out = [Path(runtime) / "agentd"] if runtime else []
    return [*out, Path(cache) / "agentd", Path(tempfile.gettempdir())]


@dataclass(frozen=True)
class Remote:
    """What a transport needs of the project's repository, read with libgit2 (:func:`remote_of`): plain data, so
    the reading can run in a helper process that is killed when the repository blocks (a FIFO)."""

    top: Path  # the work tree (git's working directory)
    objects: Path  # the project's object database
    fetch_url: str
    push_url: str
    object_format: str | None
    person: tuple[tuple[str, str], ...]  # the person's own configuration entries (person_config)


def remote_of(repo: Repo, remote: str) -> Remote:
    """The transport's view of ``repo`` and its ``remote``; TransportError when the remote is absent or unusable."""
    fetch_url, push_url = remote_urls(repo, remote)
    try:
        fmt = repo.git.config["extensions.objectformat"]
    except KeyError:
        fmt = None
    return Remote(repo.top, repo.common_dir / "objects", fetch_url, push_url, fmt or None,
                  tuple(person_config(repo)))


class Transport:
    """A private git directory for one sync (see the module docstring); use it as a context manager."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.fetch_url, self.push_url = remote.fetch_url, remote.push_url
        self.dir: Path | None = None

    def __enter__(self) -> Transport:
        errors = []
        for base in _base_dirs():
            try:
                base.mkdir(mode=0o700, parents=True, exist_ok=True)
                self.dir = Path(tempfile.mkdtemp(prefix="agentd-sync-", suffix=".git", dir=base))
                break
            except OSError as exc:
                errors.append(f"{base}: {exc.strerror or exc}")
        if self.dir is None:
            raise TransportError(f"no private directory for git's transport: {'; '.join(errors)}")
        for sub in ("refs/heads", "refs/tags", "objects"):
            (self.dir / sub).mkdir(parents=True)
        (self.dir / "HEAD").write_text("ref: refs/heads/agentd-transport\n", encoding="utf-8")
        self._write_config()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _write_config(self) -> None:
        import pygit2

        assert self.dir is not None
        path = self.dir / "config"
        path.write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n", encoding="utf-8")
        config = pygit2.Config(str(path))
        if self.remote.object_format:
            config["core.repositoryformatversion"] = "1"
            config["extensions.objectformat"] = self.remote.object_format
        for entry in self.remote.person:
            config.set_multivar(entry[0], "^$-agentd-never-matches", entry[1])

    def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
        assert self.dir is not None
        env = {k: v for k, v in os.environ.items() if k not in _REPO_ENV}
        env.update({"GIT_DIR": str(self.dir), "GIT_OBJECT_DIRECTORY": str(self.remote.objects),
                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_PROTOCOL_FROM_USER": "0",
                    "GIT_TERMINAL_PROMPT": "0"})
        argv = ["git", *(a for key, value in PINS for a in ("-c", f"{key}={value}")), *args]
        try:
            proc = subprocess.run(argv, cwd=self.remote.top, capture_output=True, timeout=GIT_TIMEOUT, env=env,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise TransportError(f"git {args[0]} gave no answer within {GIT_TIMEOUT:g}s") from None
        except OSError as exc:
            raise TransportError(f"cannot run git: {exc}") from None
        if proc.returncode not in ok:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise TransportError(f"git {args[0]} failed: {err[-1] if err else f'exit {proc.returncode}'}")
        return proc

    def fetch(self, branch: str, haves: list[str]) -> str | None:
        """The remote ``branch``'s tip once its objects are in the project's object database; None when the
        remote has no such branch.  ``haves``: commits both may share (the fetch sends only what is new)."""
        assert self.dir is not None
        for n, commit in enumerate(haves):
            (self.dir / "refs" / "heads" / f"have-{n}").write_text(commit + "\n", encoding="ascii")
        pack = [f"--upload-pack={LOCAL_UPLOAD_PACK}"] if is_local(self.fetch_url) else []
        proc = self.run("fetch", "--no-tags", "--quiet", *pack, self.fetch_url,
                        f"+refs/heads/{branch}:refs/remotes/sync/{branch}", ok=(0, 1, 128))
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            if "couldn't find remote ref" in err:
                return None
            lines = err.strip().splitlines()
            raise TransportError(f"git fetch failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
        ref = self.dir / "refs" / "remotes" / "sync" / branch
        try:
            tip = ref.read_text(encoding="ascii").strip()
        except OSError:
            raise TransportError(f"git fetch left no {ref.name} ref in {self.dir}") from None
        return tip or None

    def push(self, branch: str, commit: str) -> str:
        """"" when pushed, else why not (a rejection or an error)."""
        pack = [f"--receive-pack={LOCAL_RECEIVE_PACK}"] if is_local(self.push_url) else []
        proc = self.run("push", "--porcelain", "--quiet", *pack, self.push_url, f"{commit}:refs/heads/{branch}",
                        ok=(0, 1, 128))
        if proc.returncode == 0:
            return ""
        text = (proc.stdout + proc.stderr).decode(errors="replace").strip().splitlines()
        return text[-1] if text else f"git push exited {proc.returncode}"


#: The person's keys that git runs as a command in a fetch or push, and that :data:`PINS` leaves in force.
_RUNS = re.compile(r"core\.sshcommand|core\.gitproxy|core\.askpass|credential\.(.+\.)?helper", re.I)
#: The person's keys that would run a command but are pinned off for a sync.
_PINNED_OFF = frozenset({"core.hookspath", "core.fsmonitor", "core.alternaterefscommand", "core.pager"})
#: Environment variables naming a program git runs (the daemon's environment passes to the transport).
ENV_RUNS = ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND")


def url_kind(url: str) -> str:
    """``ssh``, ``http`` (https too), ``git``, ``local``, or the remote helper's name (``name::url``)."""
    if is_local(url):
        return "local"
    helper = re.match(r"([A-Za-z0-9][A-Za-z0-9+.-]*)::", url)
    if helper:
        return helper.group(1)
    scheme = url.split("://", 1)[0].lower() if "://" in url else "ssh"  # host:path is ssh
    return {"https": "http", "git+ssh": "ssh", "ssh+git": "ssh"}.get(scheme, scheme)


def _rewritten(url: str, person: list[tuple[str, str]], push: bool) -> str:
    """``url`` after the person's ``url.<base>.insteadOf`` (``pushInsteadOf`` for a push): longest match wins."""
    best = ("", "")
    for name, value in person:
        low = name.lower()
        keys = (".insteadof", ".pushinsteadof") if push else (".insteadof",)
        if low.startswith("url.") and low.endswith(keys) and url.startswith(value) and len(value) > len(best[1]):
            best = (name[4:name.rindex(".")], value)
    return best[0] + url[len(best[1]):] if best[1] else url


def _credential_for(pattern: str, url: str) -> bool:
    """Whether ``credential.<pattern>.helper`` applies to ``url`` (scheme and host, ``*`` in the host; path prefix)."""
    from fnmatch import fnmatchcase
    from urllib.parse import urlsplit

    want, got = urlsplit(pattern), urlsplit(url)
    if want.scheme and want.scheme != got.scheme:
        return False
    if want.hostname and not fnmatchcase(got.hostname or "", want.hostname):
        return False
    return not want.path.strip("/") or got.path.strip("/").startswith(want.path.strip("/"))


def sync_runs(person: list[tuple[str, str]], environ: dict[str, str], urls: list[tuple[str, bool]]
              ) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """What a sync's git runs of the person's configuration (:func:`person_config`) and environment for the
    remote ``urls`` ((url, for a push)): each (key, the argv git runs: a shell where git uses one), and the
    person's keys it pins off.  An ssh command for ssh remotes, credential helpers and askpass for http ones
    whose URL they match, a git proxy for git:// ones."""
    targets = [_rewritten(url, person, push) for url, push in urls]
    kinds = {url_kind(u) for u in targets}
    runs: list[tuple[str, list[str]]] = []
    off: list[str] = []
    for name, value in person:
        low = name.lower()
        if low in _PINNED_OFF and value.strip() and name not in off:
            off.append(name)
        if not _RUNS.fullmatch(low) or not value.strip():
            continue  # an empty helper resets the list: nothing runs for it
        if low.startswith("credential."):
            pattern = name[len("credential."):-len(".helper")]
            if not any(url_kind(u) == "http" and (not pattern or _credential_for(pattern, u)) for u in targets):
                continue
            if not value.startswith("!") and not os.path.isabs(value.split()[0]):
                words = value.split()
                runs.append((name, [f"git-credential-{words[0]}", *words[1:]]))  # git credential-NAME
            else:
                runs.append((name, ["sh", "-c", value.removeprefix("!")]))
        elif low == "core.sshcommand" and "ssh" in kinds:
            runs.append((name, ["sh", "-c", value]))
        elif (low == "core.askpass" and "http" in kinds) or (low == "core.gitproxy" and "git" in kinds):
            runs.append((name, [value]))
    for key in ENV_RUNS:
        wanted = "http" if key.endswith("ASKPASS") else "git" if key == "GIT_PROXY_COMMAND" else "ssh"
        if environ.get(key) and wanted in kinds:
            runs.append((f"${key}", ["sh", "-c", environ[key]] if key == "GIT_SSH_COMMAND" else [environ[key]]))
    return runs, off


def sync_urls(repo: Repo) -> list[tuple[str, bool]]:
    """Every remote's fetch and push URL in the project's config ((url, for a push)): what a sync may reach."""
    out: list[tuple[str, bool]] = []
    for entry in repo.git.config:
        low = entry.name.lower()
        if low.startswith("remote.") and low.endswith((".url", ".pushurl")) and entry.value:
            out.append((entry.value.strip(), True))
            if low.endswith(".url"):
                out.append((entry.value.strip(), False))
    return out


def person_config(repo: Repo) -> list[tuple[str, str]]:
    """The person's own configuration entries (system, XDG, global; their includes resolved for this project),
    in the order git reads them; nothing of the project's ``.git/config`` nor what it includes."""
    out = []
    for entry in repo.git.config:
        name = entry.name
        if entry.level in _PERSON_LEVELS and not name.startswith(("include.", "includeif.")):
            out.append((entry.level, name, entry.value if entry.value is not None else "true"))  # a bare key is a true
    out.sort(key=lambda item: item[0])  # stable: each file's own order kept
    return [(name, value) for _level, name, value in out]
