"""The LSB init script and the systemd notify protocol, against the real daemon."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import AGENTD, Project, alive, clean_env

INITD = Path(__file__).resolve().parent.parent / "initd" / "agentd"


def initd(project: Project, action: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(AGENTD=str(Path(sys.executable).parent / "agentd"), AGENTD_PROJECT=str(project.root))
    return subprocess.run(["sh", str(INITD), action], env=env, capture_output=True, text=True, timeout=120)


def test_init_script_start_status_stop_with_lsb_codes(project: Project) -> None:
    project.fake_unit("svc")
    assert initd(project, "status").returncode == 3
    started = initd(project, "start")
    assert started.returncode == 0, started.stderr
    project.wait_state("svc", "running")
    status = initd(project, "status")
    assert status.returncode == 0 and "svc" in status.stdout
    project.fake_unit("added")  # reload must read the units again: the new one starts, svc is kept
    svc = project.unit_status("svc")
    assert initd(project, "reload").returncode == 0
    project.wait_state("added", "running")
    assert project.unit_status("svc")["pid"] == svc["pid"]
    assert [e for e in project.events("reloaded") if e["started"] == ["added"]]
    pid = project.daemon_pid()
    restarted = initd(project, "restart")
    assert restarted.returncode == 0, restarted.stderr
    assert project.daemon_pid() != pid
    project.wait_state("svc", "running")
    assert initd(project, "stop").returncode == 0
    assert initd(project, "status").returncode == 3
    assert initd(project, "stop").returncode == 0  # stopping a stopped service is success
    assert initd(project, "frobnicate").returncode == 2


def test_foreground_mode_speaks_sd_notify(project: Project, tmp_path: Path) -> None:
    project.fake_unit("svc")
    notify_path = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify_path))
    listener.settimeout(60)
    env = clean_env(NOTIFY_SOCKET=str(notify_path), WATCHDOG_USEC="2000000")
    proc = subprocess.Popen([*AGENTD, "--root", str(project.root), "start", "--foreground"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=project.root)
    try:
        messages: list[str] = []

        def received(text: str) -> bool:
            while not any(text in m for m in messages):
                messages.append(listener.recv(4096).decode())
            return True

        assert received("READY=1")
        ready = next(m for m in messages if "READY=1" in m)
        assert f"MAINPID={proc.pid}" in ready and "STATUS=" in ready
        assert received("WATCHDOG=1")
        project.wait_state("svc", "running")
        agent = project.unit_status("svc")["pid"]
        proc.send_signal(signal.SIGTERM)
        assert received("STOPPING=1")
        assert proc.wait(60) == 0
        assert not alive(agent)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "daemon_stopped" in err  # console-pretty events in the foreground
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        listener.close()
