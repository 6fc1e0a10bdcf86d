"""`agentd doctor --env`: each check, healthy and with a real failing case (PATH, files, namespaces, seccomp, tmpfs)."""

from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from supervisor.cli.doctor_env import VERIFIED, Status, check_inotify
from supervisor.config.paths import PlainPaths
from tests.agent_clis import claude_binary, find_codex
from tests.conftest import AGENTD, BIN_DIR, Project, clean_env

REPO = Path(__file__).resolve().parent.parent
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def doctor(project: Project, env: dict[str, str] | None = None, wrap: list[str] | None = None,
           preexec_fn: Callable[[], None] | None = None) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Run it; return the exit code, {check: (status, text after the check's name)} and the whole output."""
    argv = [*(wrap or []), *AGENTD, "--project", str(project.root), "doctor", "--env"]
    result = subprocess.run(argv, env=env or clean_env(), capture_output=True, text=True, timeout=120,
                            preexec_fn=preexec_fn, cwd=project.root, stdin=subprocess.DEVNULL)
    found: dict[str, tuple[str, str]] = {}
    last = ""
    for line in result.stdout.splitlines():
        match = re.match(r"(ok|warn|FAIL)\s+(.{16}) (.*)", line)
        if match:
            last = match.group(2).strip()
            found[last] = (match.group(1), match.group(3))
        elif line.strip().startswith("->") and last:
            status, text = found[last]
            found[last] = (status, f"{text} {line.strip()}")
    return result.returncode, found, result.stdout + result.stderr


@pytest.fixture
def healthy(project: Project) -> Project:
    """A git work tree with one generic unit: every check passes."""
    project.fake_unit("web")
    subprocess.run(["git", "init", "-q", str(project.root)], check=True, timeout=30)
    return project


def test_a_healthy_machine_and_project_pass(healthy: Project) -> None:
    code, found, out = doctor(healthy)
    assert code == 0, out
    assert set(found) == {"agent web", "git", "git sync", "inotify", "user namespaces", "landlock", "state dir",
                          "disk", "stop timeout", "package name"}, out
    assert all(status == "ok" for status, _ in found.values()), out
    assert "0 failure(s), 0 warning(s)" in out


# -- the agent CLIs -----------------------------------------------------------------------------

def test_a_missing_agent_cli_fails_and_says_how_to_install_it(project: Project) -> None:
    project.unit("cx", '[agent]\nkind = "codex"\ncommand = ["codex"]\n')
    code, found, out = doctor(project, clean_env(PATH=f"{BIN_DIR}:/usr/bin:/bin"))
    assert code == 1
    status, text = found["agent cx"]
    assert status == "FAIL" and "'codex' not found on PATH" in text and "npm install -g @openai/codex@0.169.0" in text


def test_versions_are_compared_with_the_verified_ones(project: Project, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, line in (("codex", "codex-cli 0.1.0"), ("claude", "9.9.9 (Claude Code)")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\necho '{line}'\n")
        script.chmod(0o755)
    project.unit("oldcodex", f'[agent]\nkind = "codex"\ncommand = ["{bin_dir}/codex"]\n')
    project.unit("oldclaude", f'[agent]\nkind = "claude"\ncommand = ["{bin_dir}/claude"]\n')
    codex, reason = find_codex()
    claude = claude_binary()
    assert codex is not None and claude is not None, f"the pinned CLIs are missing ({reason}): run tests/install_*.sh"
    project.unit("cx", f'[agent]\nkind = "codex"\ncommand = ["{codex}"]\n')
    project.unit("cl", f'[agent]\nkind = "claude"\ncommand = ["{claude}"]\n')
    _code, found, out = doctor(project)
    assert found["agent oldcodex"][0] == "warn" and "codex 0.1.0" in found["agent oldcodex"][1]
    assert "verified with 0.169.0" in found["agent oldcodex"][1]
    assert found["agent oldclaude"][0] == "warn" and "verified with 2.1.328" in found["agent oldclaude"][1]
    assert found["agent cx"] == ("ok", f"codex 0.169.0 at {codex} (verified)"), out
    assert found["agent cl"][0] == "ok" and "claude 2.1.328" in found["agent cl"][1], out


def test_the_verified_versions_are_the_pinned_ones() -> None:
    for kind, script in (("codex", "install_codex.sh"), ("claude", "install_claude.sh")):
        pinned = re.search(r'VERSION="\$\{\w+:-([0-9.]+)\}"', (REPO / "tests" / script).read_text())
        assert pinned and pinned.group(1) == VERIFIED[kind], kind


# -- git -----------------------------------------------------------------------------------------

def test_git_missing_fails_and_a_folder_outside_git_warns(project: Project) -> None:
    project.fake_unit("web")
    code, found, _ = doctor(project, clean_env(PATH=BIN_DIR))
    assert code == 1 and found["git"][0] == "FAIL" and "apt-get install git" in found["git"][1]
    code, found, _ = doctor(project)
    assert found["git"][0] == "warn" and "not a git work tree" in found["git"][1] and "git init" in found["git"][1]


def _home_with_gitconfig(tmp_path: Path, text: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(text)
    return clean_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))


def test_what_sync_runs_of_the_persons_git_config_is_named(healthy: Project, tmp_path: Path) -> None:
    """The person's credential helper and ssh command run in a sync: named (a warning), the fsmonitor and
    hooks pinned off are said; the project's own .git/config (agent-writable) is never what sync runs."""
    person = ('[credential]\n\thelper = store\n[credential "https://elsewhere.example"]\n\thelper = other\n'
              '[core]\n\tfsmonitor = true\n\thooksPath = ~/hooks\n\tsshCommand = ssh -i ~/.ssh/deploy\n')
    env = _home_with_gitconfig(tmp_path, person)
    code, found, out = doctor(healthy, env)  # no remote: a sync reaches nothing, so runs nothing
    assert code == 0 and found["git sync"][0] == "ok" and "runs no command" in found["git sync"][1], out
    assert "core.fsmonitor, core.hookspath pinned off" in found["git sync"][1], out
    with (healthy.root / ".git" / "config").open("a") as config:
        config.write('[credential]\n\thelper = "!touch project-helper-ran"\n'
                     '[remote "origin"]\n\turl = https://forge.example/team/repo.git\n')
    code, found, out = doctor(healthy, env)
    status, text = found["git sync"]
    assert code == 0 and status == "warn", out
    assert "credential.helper (git-credential-store)" in text and "other" not in text, text  # its URL only
    assert "sshcommand" not in text and "project-helper-ran" not in text, text  # no ssh remote; not the person's
    assert "core.fsmonitor, core.hookspath pinned off" in text, text
    with (healthy.root / ".git" / "config").open("a") as config:
        config.write('[remote "backup"]\n\turl = git@forge.example:team/repo.git\n')
    _code, found, out = doctor(healthy, env)
    assert "core.sshcommand (ssh -i ~/.ssh/deploy)" in found["git sync"][1], out


def test_a_sync_command_an_agent_may_write_fails(healthy: Project, tmp_path: Path) -> None:
    (healthy.root / "src").mkdir()
    (healthy.root / "src" / "ssh.sh").write_text("exec ssh \"$@\"\n")
    env = _home_with_gitconfig(tmp_path, f"[core]\n\tsshCommand = sh {healthy.root}/src/ssh.sh\n")
    with (healthy.root / ".git" / "config").open("a") as config:
        config.write('[remote "origin"]\n\turl = ssh://forge.example/team/repo.git\n')
    code, found, out = doctor(healthy, env)
    assert code == 1 and found["git sync"][0] == "FAIL", out
    assert "core.sshcommand runs src/ssh.sh, which the agent of unit 'web' may write" in found["git sync"][1], out
    assert "outside the project" in found["git sync"][1]


# -- inotify ---------------------------------------------------------------------------------------

def test_inotify_limit_below_the_project_folders_fails(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    for i in range(12):
        (root / f"pkg{i}" / "sub").mkdir(parents=True)
    (root / "node_modules" / "a" / "b").mkdir(parents=True)  # ignored by the scope guard: no watches
    limit = tmp_path / "max_user_watches"
    limit.write_text("1000000\n")
    ok = check_inotify(root, limit)
    assert ok.status is Status.OK and "needs 25 watches" in ok.detail
    limit.write_text("10\n")
    low = check_inotify(root, limit)
    assert low.status is Status.FAIL and "fs.inotify.max_user_watches=" in low.fix
    limit.write_text("not a number\n")
    assert check_inotify(root, limit).status is Status.FAIL


# -- user namespaces, Landlock -------------------------------------------------------------------------

def test_no_user_namespaces_fails(healthy: Project) -> None:
    """In a user namespace whose max_user_namespaces is 0, no further one can be made: the real failure."""
    wrap = ["unshare", "-U", "-r", "sh", "-c", 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "wrap"]
    code, found, out = doctor(healthy, wrap=wrap)
    assert code == 1, out
    status, text = found["user namespaces"]
    assert status == "FAIL" and "cannot create one" in text and "max_user_namespaces" in text


def _deny_landlock() -> None:
    """seccomp: landlock_create_ruleset fails with ENOSYS, as under a container's default profile."""
    libc = ctypes.CDLL(None, use_errno=True)
    program = [(0x20, 0, 0, 0),                    # A = seccomp_data.nr
               (0x15, 0, 1, 444),                  # if A == landlock_create_ruleset
               (0x06, 0, 0, 0x00050000 | 38),      #   return SECCOMP_RET_ERRNO | ENOSYS
               (0x06, 0, 0, 0x7FFF0000)]           # return SECCOMP_RET_ALLOW
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in program))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(program), ctypes.cast(code, ctypes.c_void_p))
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "seccomp")


def test_no_landlock_fails(healthy: Project) -> None:
    code, found, out = doctor(healthy, preexec_fn=_deny_landlock)
    assert code == 1, out
    assert found["landlock"][0] == "FAIL" and "Function not implemented" in found["landlock"][1]
    assert "seccomp" in found["landlock"][1]
    assert found["user namespaces"][0] == "ok"  # only Landlock was taken away


# -- the state directory, the disk ----------------------------------------------------------------------

def test_state_dir_open_to_others_or_owned_by_another_user_fails(healthy: Project) -> None:
    state = healthy.root / ".agentd"
    state.mkdir()
    state.chmod(0o755)
    code, found, _ = doctor(healthy)
    assert code == 1 and found["state dir"][0] == "FAIL" and f"chmod 700 {state}" in found["state dir"][1]
    state.chmod(0o700)
    os.chown(state, 65534, 65534)
    code, found, _ = doctor(healthy)
    assert code == 1 and "belongs to uid 65534" in found["state dir"][1]
    os.chown(state, os.getuid(), os.getgid())
    assert doctor(healthy)[0] == 0


def test_a_state_dir_too_deep_for_a_socket_names_where_the_socket_goes(tmp_path: Path) -> None:
    deep = Project(tmp_path / ("d" * 60) / ("e" * 60))
    deep.fake_unit("web")
    _code, found, _ = doctor(deep)
    socket = PlainPaths(deep.root, Path(".agentd")).socket_path
    assert found["state dir"][0] == "ok" and f"the control socket will be {socket}" in found["state dir"][1]
    assert str(socket).startswith(f"/tmp/agentd-{os.getuid()}/")


def test_a_nearly_full_disk_fails(healthy: Project) -> None:
    """A 1 MiB tmpfs as the state directory, in a mount namespace of its own (gone with the process)."""
    state = healthy.root / ".agentd"
    state.mkdir(mode=0o700)
    wrap = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size=1m,mode=700 tmpfs "{state}" && exec "$@"', "wrap"]
    code, found, out = doctor(healthy, wrap=wrap)
    assert code == 1, out
    status, text = found["disk"]
    assert status == "FAIL" and "0.00 GiB free" in text and str(state) in text and "state_dir" in text
    assert found["state dir"][0] == "ok"


# -- the stop timeout -------------------------------------------------------------------------------------

def test_a_stop_timeout_shorter_than_the_checkpoint_fails(healthy: Project) -> None:
    healthy.fake_unit("web", cycle=True)  # checkpoint 300 s + 2 s grace (fake_unit), stop_timeout 3 s, +15 s margin
    code, found, _ = doctor(healthy, clean_env(TIMEOUT_STOP_USEC="120000000"))
    assert code == 1
    status, text = found["stop timeout"]
    assert status == "FAIL" and "stopping may take 320 s" in text and "allows 120 s" in text
    assert "TimeoutStopSec=320" in text
    code, found, _ = doctor(healthy, clean_env(TIMEOUT_STOP_USEC="360000000"))
    assert code == 0 and found["stop timeout"] == ("ok", "stopping may take 320 s; $TIMEOUT_STOP_USEC "
                                                         "(environment) allows 360 s")
    code, found, _ = doctor(healthy, clean_env(TIMEOUT_STOP_USEC="6 minutes"))
    assert code == 1 and "is not a number of microseconds" in found["stop timeout"][1]
    (healthy.root / "etc").mkdir()
    (healthy.root / "etc" / "agentd.toml").write_text("service_stop_timeout = 90\n")
    code, found, _ = doctor(healthy)
    assert code == 1 and "the service_stop_timeout setting allows 90 s" in found["stop timeout"][1]


def test_output_is_one_line_per_check_with_the_fix_below(healthy: Project) -> None:
    (healthy.root / ".agentd").mkdir(mode=0o755)
    _code, _found, out = doctor(healthy)
    lines = out.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("FAIL  state dir"))
    assert lines[index + 1].strip().startswith("-> chmod 700")
    assert sum(line.startswith(("ok ", "warn ", "FAIL ")) for line in lines) == 10  # one per check


def test_the_short_socket_directory_rule_is_one_for_the_daemon_and_doctor(tmp_path: Path) -> None:
    """A real directory of this user's (any mode: the daemon makes it 700), else a problem naming it."""
    from supervisor.config.paths import socket_dir_problem

    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    assert socket_dir_problem(real) is None and socket_dir_problem(tmp_path / "missing") is None
    link = tmp_path / "link"
    link.symlink_to(real)
    file = tmp_path / "file"
    file.write_text("")
    for bad in (link, file):
        problem = socket_dir_problem(bad)
        assert problem is not None and str(bad) in problem and "not a directory of this user's" in problem


def test_what_a_sync_runs_follows_the_urls_it_reaches() -> None:
    from supervisor.memory.gittransport import sync_runs, url_kind

    assert [url_kind(u) for u in ("git@h:r.git", "ssh://h/r", "https://h/r", "git://h/r", "/srv/r.git",
                                  "file:///srv/r", "hg::https://h/r")] == ["ssh", "ssh", "http", "git", "local",
                                                                           "local", "hg"]
    person = [("core.sshcommand", "ssh -F ~/.ssh/work"), ("url.git@h:.pushinsteadof", "https://h/"),
              ("credential.https://*.h.example.helper", "!pass show git"), ("credential.helper", "")]
    assert sync_runs(person, {}, [("https://h/r", False)]) == ([], [])
    pushed, _ = sync_runs(person, {}, [("https://h/r", True)])  # the push goes over ssh (pushInsteadOf)
    assert pushed == [("core.sshcommand", ["sh", "-c", "ssh -F ~/.ssh/work"])]
    helpers, _ = sync_runs(person, {"GIT_ASKPASS": "/usr/bin/ask"}, [("https://git.h.example/r", False)])
    assert helpers == [("credential.https://*.h.example.helper", ["sh", "-c", "pass show git"]),
                       ("$GIT_ASKPASS", ["/usr/bin/ask"])]  # the empty helper resets: nothing runs for it


def test_supervisord_installed_beside_agentd_is_named(healthy: Project, tmp_path: Path) -> None:
    """Issue 27 §5: supervisord's distribution is called `supervisor`, agentd's import package too."""
    site = tmp_path / "site"
    info = site / "supervisor-4.2.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: supervisor\nVersion: 4.2.5\n")
    code, found, out = doctor(healthy, env=clean_env(PYTHONPATH=str(site)))
    status, text = found["package name"]
    assert status == "warn" and "supervisord (supervisor 4.2.5)" in text and "pipx install ." in text, out
    assert code == 0  # a warning, not a failure
    code, found, out = doctor(healthy)
    assert found["package name"][0] == "ok", out
