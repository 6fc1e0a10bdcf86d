"""The shipped systemd units, `agentd export systemd`, `agentd run-unit` and the LSB script's search for agentd.

``systemd-analyze verify`` checks unit files without systemd as PID 1 (Debian's
``systemd`` package; .ci/run installs it when missing).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.config.paths import PlainPaths
from supervisor.config.stopbudget import stop_budget
from supervisor.config.units import parse_unit
from tests.conftest import AGENTD, Project, clean_env

REPO = Path(__file__).resolve().parent.parent
INITD = REPO / "initd"
SYSTEM_UNITS = ("agentd.service", "agentd@.service")
USER_UNIT = "agentd-user.service"
INSTALLED = "/usr/local/bin/agentd"
VENV_AGENTD = Path(sys.executable).parent / "agentd"


@pytest.fixture
def verify_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """systemd-analyze's environment as a pip user has it: no agentd(1) in its MANPATH (an empty one)."""
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing: apt-get install systemd (.ci/run does)"
    (tmp_path / "man" / "man1").mkdir(parents=True)
    # a short runtime directory: socket paths below it (gpg-agent's, in the user units systemd reads) must
    # stay under 108 bytes, which a deep pytest temp path (a worker's) does not
    runtime = Path(tempfile.mkdtemp(prefix="xdg-"))
    try:
        yield clean_env(MANPATH=str(tmp_path / "man"), XDG_RUNTIME_DIR=str(runtime), SYSTEMD_LOG_COLOR="0")
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def verify(env: dict[str, str], *files: Path, user: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ["systemd-analyze", *(["--user"] if user else []), "verify", *map(str, files)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=files[0].parent)


def settings_of(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def installed_copy(tmp_path: Path, name: str) -> Path:
    """The unit as the README installs it, with agentd where this test's venv has it."""
    target = tmp_path / "units" / name
    target.parent.mkdir(exist_ok=True)
    target.write_text((INITD / name).read_text().replace(INSTALLED, str(VENV_AGENTD)))
    return target


# -- the shipped units -------------------------------------------------------------------------

@pytest.mark.parametrize("name", SYSTEM_UNITS)
def test_system_units_verify(tmp_path: Path, verify_env: dict[str, str], name: str) -> None:
    result = verify(verify_env, installed_copy(tmp_path, name))
    assert result.returncode == 0 and result.stderr == "" and result.stdout == "", result.stderr


@pytest.mark.parametrize("name", SYSTEM_UNITS)
def test_shipped_system_units_only_miss_the_installed_binary(tmp_path: Path, verify_env: dict[str, str],
                                                              name: str) -> None:
    """As shipped (agentd not linked into /usr/local/bin here), the only complaint is that binary."""
    shutil.copy(INITD / name, tmp_path / name)
    result = verify(verify_env, tmp_path / name)
    complaints = {line.split(": ", 1)[1] for line in result.stderr.splitlines() if ": " in line}
    if Path(INSTALLED).exists():
        assert result.returncode == 0 and not complaints, result.stderr
    else:
        assert complaints == {f"Command {INSTALLED} is not executable: No such file or directory"}, result.stderr


def test_user_unit_verifies_when_installed_as_the_readme_says(tmp_path: Path, verify_env: dict[str, str]) -> None:
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".config" / "systemd" / "user").mkdir(parents=True)
    (home / ".local" / "bin" / "agentd").symlink_to(VENV_AGENTD)   # ln -s "$PWD/.venv/bin/agentd" ~/.local/bin/agentd
    unit = home / ".config" / "systemd" / "user" / "agentd.service"
    shutil.copy(INITD / USER_UNIT, unit)
    result = verify({**verify_env, "HOME": str(home)}, unit, user=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    missing = verify({**verify_env, "HOME": str(tmp_path / "nobody")}, unit, user=True)
    assert missing.returncode != 0 and ".local/bin/agentd is not executable" in missing.stderr


@pytest.mark.parametrize("name", [*SYSTEM_UNITS, USER_UNIT])
def test_stop_timeout_covers_the_default_checkpoint_and_agentd_is_told(tmp_path: Path, name: str) -> None:
    text = (INITD / name).read_text()
    values = settings_of(text)
    timeout = int(values["TimeoutStopSec"][0])
    env = dict(v.split("=", 1) for v in values["Environment"])
    assert int(env["TIMEOUT_STOP_USEC"]) == timeout * 1_000_000, "TimeoutStopSec and TIMEOUT_STOP_USEC differ"
    default_unit = tmp_path / "plain.toml"
    default_unit.write_text('[agent]\ncommand = ["x"]\n')
    needed = stop_budget({"plain": parse_unit(default_unit)}, default_stop_timeout=10.0).seconds
    assert needed == 300 + 15 + 10 + 15 and timeout >= needed
    assert values["KillMode"] == ["mixed"] and values["Delegate"] == ["yes"] and values["Type"] == ["notify"]
    # issue 27 §5: pip installs no man page, and a Documentation=man: it cannot find fails systemd-analyze verify
    assert "Documentation" not in values and (REPO / "docs" / "agentd.1").is_file()
    assert "AGENTD_PROJECT" in env and values["ExecReload"][0].endswith("agentd reload")


def test_the_template_names_the_project_by_its_escaped_path() -> None:
    values = settings_of((INITD / "agentd@.service").read_text())
    assert values["WorkingDirectory"] == ["%f"] and "AGENTD_PROJECT=%f" in values["Environment"]
    escaped = subprocess.run(["systemd-escape", "--path", "/srv/my app"], capture_output=True, text=True, timeout=30)
    back = subprocess.run(["systemd-escape", "--unescape", "--path", escaped.stdout.strip()], capture_output=True,
                          text=True, timeout=30)
    assert back.stdout.strip() == "/srv/my app"


def test_user_unit_says_how_to_run_overnight() -> None:
    text = (INITD / USER_UNIT).read_text()
    assert "loginctl enable-linger" in text and "WantedBy=default.target" in text


# -- agentd export systemd / run-unit ------------------------------------------------------------

def test_export_systemd_takes_restart_and_stop_timeout_from_the_unit(project: Project, tmp_path: Path,
                                                                   verify_env: dict[str, str]) -> None:
    project.fake_unit("db", restart='policy = "always"\ninitial_delay = 2\nburst = 3\ninterval = 60', cycle=True)
    project.fake_unit("web", stop_timeout=4, cycle=True, unit='requires = ["db"]\ndescription = "the web front"',
                      checkpoint="deadline = 100")
    out = tmp_path / "export"
    out.mkdir()
    for name in ("db", "web"):
        text = project.agentd("export", "systemd", name).stdout
        (out / f"agentd-{name}.service").write_text(text)
    web = settings_of((out / "agentd-web.service").read_text())
    assert web["TimeoutStopSec"] == ["121"]  # deadline 100 + grace 2 (fake_unit) + stop_timeout 4 + 15
    assert web["Environment"] == ["TIMEOUT_STOP_USEC=121000000"]
    assert web["ExecStart"] == [f"{VENV_AGENTD} --project {project.root} run-unit web --foreground"]
    assert web["Requires"] == ["agentd-db.service"] and "agentd-db.service" in web["After"]
    assert web["Restart"] == ["on-failure"] and web["Description"] == ["agentd unit web: the web front"]
    db = settings_of((out / "agentd-db.service").read_text())
    assert db["Restart"] == ["always"] and db["RestartSec"] == ["2"]
    assert db["StartLimitBurst"] == ["3"] and db["StartLimitIntervalSec"] == ["60"]
    assert db["KillMode"] == ["mixed"] and db["Delegate"] == ["yes"]
    result = verify(verify_env, out / "agentd-web.service", out / "agentd-db.service")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    user = tmp_path / "user" / "agentd-db.service"
    user.parent.mkdir()
    user.write_text(project.agentd("export", "systemd", "--user", "db").stdout)
    assert "WantedBy=default.target" in user.read_text() and "network-online" not in user.read_text()
    result = verify(verify_env, user, user=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_export_quotes_what_systemd_would_expand(tmp_path: Path, verify_env: dict[str, str]) -> None:
    odd = Project(tmp_path / "my 100% $project")
    odd.fake_unit("web")
    text = odd.agentd("export", "systemd", "web").stdout
    assert f'--project "{tmp_path}/my 100%% $$project"' in text
    unit = tmp_path / "agentd-web.service"
    unit.write_text(text)
    result = verify(verify_env, unit)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_export_of_a_missing_or_broken_unit_is_an_error(project: Project) -> None:
    missing = project.agentd("export", "systemd", "nope", check=False)
    assert missing.returncode == 1 and "no such unit file" in missing.stderr
    project.unit("bad", '[agent]\ncommand = "a shell string"\n')
    bad = project.agentd("export", "systemd", "bad", check=False)
    assert bad.returncode == 1 and "argv list" in bad.stderr


def test_run_unit_is_a_foreground_daemon_with_its_own_state(project: Project, tmp_path: Path) -> None:
    project.fake_unit("web")
    assert project.agentd("run-unit", "web", check=False).returncode == 2  # --foreground is required
    short = Path(tempfile.mkdtemp(prefix="notify-"))  # a socket path must stay under 108 bytes
    notify_path = short / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify_path))
    listener.settimeout(60)
    own = project.root / ".agentd" / "run-unit" / "web"
    proc = subprocess.Popen([*AGENTD, "--project", str(project.root), "run-unit", "web", "--foreground"],
                            env=clean_env(NOTIFY_SOCKET=str(notify_path)), cwd=project.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        messages: list[str] = []
        while not any("READY=1" in m for m in messages):
            messages.append(listener.recv(4096).decode())
        assert (own / "agentd.pid").is_file() and PlainPaths(project.root, own).socket_path.exists()
        assert not (project.root / ".agentd" / "agentd.pid").exists()
        env = clean_env(AGENTD_STATE_DIR=str(own))
        status = project.agentd("status", "--json", check=False, env=env)
        assert status.returncode in (0, 3) and '"unit": "web"' in status.stdout
        assert project.agentd("status", check=False).returncode == 3  # the project's own daemon is not running
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        listener.close()
        shutil.rmtree(short, ignore_errors=True)


# -- the LSB script finds agentd ---------------------------------------------------------------------

def lsb(project: Path, action: str, defaults: Path, hide_usr_local: bool = False,
        **env: str) -> subprocess.CompletedProcess[str]:
    """initd/agentd with PATH that does not hold agentd; optionally /usr/local/bin hidden (a mount namespace)."""
    base = {k: v for k, v in clean_env().items() if k != "AGENTD"}
    base.update(PATH="/usr/sbin:/usr/bin:/sbin:/bin", AGENTD_PROJECT=str(project), AGENTD_DEFAULTS=str(defaults), **env)
    argv = ["sh", str(INITD / "agentd"), action]
    if hide_usr_local:
        argv = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs none /usr/local/bin && exec "$@"', "lsb", *argv]
    return subprocess.run(argv, env=base, capture_output=True, text=True, timeout=120)


def test_init_script_says_how_to_point_it_at_agentd(tmp_path: Path) -> None:
    (tmp_path / "proj" / "units").mkdir(parents=True)
    defaults = tmp_path / "default-agentd"
    for action, code in (("status", 4), ("start", 5), ("stop", 5)):
        result = lsb(tmp_path / "proj", action, defaults, hide_usr_local=True)
        assert result.returncode == code, (action, result.stderr)
        assert "executable not found" in result.stderr and f"AGENTD=/path/to/.venv/bin/agentd in {defaults}" \
            in result.stderr and "ln -s" in result.stderr
    wrong = lsb(tmp_path / "proj", "status", defaults, AGENTD=str(tmp_path / "nope"))
    assert wrong.returncode == 4 and "is not an executable file" in wrong.stderr


def test_init_script_finds_the_readme_venv_and_the_defaults_file(project: Project, tmp_path: Path) -> None:
    project.fake_unit("svc")
    defaults = tmp_path / "default-agentd"
    # The README installs into a venv: $AGENTD_PROJECT/.venv/bin/agentd is found without configuration.
    (project.root / ".venv" / "bin").mkdir(parents=True)
    (project.root / ".venv" / "bin" / "agentd").symlink_to(VENV_AGENTD)
    assert lsb(project.root, "status", defaults, hide_usr_local=True).returncode == 3
    started = lsb(project.root, "start", defaults, hide_usr_local=True)
    assert started.returncode == 0, started.stderr
    project.wait_state("svc", "running")
    assert lsb(project.root, "stop", defaults, hide_usr_local=True).returncode == 0
    # ... or named in the defaults file (/etc/default/agentd)
    (project.root / ".venv" / "bin" / "agentd").unlink()
    defaults.write_text(f"AGENTD={VENV_AGENTD}\n")
    status = lsb(project.root, "status", defaults, hide_usr_local=True)
    assert status.returncode == 3 and "agentd is not running" in status.stdout, status.stderr


def test_export_names_the_man_page_only_where_it_is_installed(project: Project, tmp_path: Path,
                                                               verify_env: dict[str, str]) -> None:
    """Issue 27 §5: pip does not install agentd(1), and `Documentation=man:agentd(1)` made
    `systemd-analyze verify` fail where it is missing."""
    project.fake_unit("db")
    empty = tmp_path / "no-man"
    (empty / "man1").mkdir(parents=True)
    bare = project.agentd("export", "systemd", "db", env=clean_env(MANPATH=str(empty))).stdout
    assert "Documentation=" not in bare and "[Unit]\nDescription=agentd unit db" in bare
    unit = tmp_path / "bare" / "agentd-db.service"
    unit.parent.mkdir()
    unit.write_text(bare)
    result = verify({**verify_env, "MANPATH": str(empty)}, unit)  # no agentd(1) anywhere systemd looks
    assert result.returncode == 0 and result.stderr == "", result.stderr
    # where it is installed, the unit names it (and still verifies)
    man = tmp_path / "man-installed"
    (man / "man1").mkdir(parents=True)
    shutil.copy(REPO / "docs" / "agentd.1", man / "man1" / "agentd.1")
    verify_env = {**verify_env, "MANPATH": str(man)}
    documented = project.agentd("export", "systemd", "db", env=verify_env).stdout
    assert settings_of(documented)["Documentation"] == ["man:agentd(1)"]
    unit.write_text(documented)
    result = verify(verify_env, unit)
    assert result.returncode == 0 and result.stderr == "", result.stderr
