"""A real daemon serving the dashboard on a free loopback port, with fake-agent units."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

#: A secret in a shape the redactor knows, planted in a unit's environment; the agent prints it on demand.
PLANTED = "sk-proj-" + "Zq8" * 12

#: A generic agent drawing a login-like screen as a TUI does, then waiting: the alternate screen, a splash
#: whose spinner moves the cursor (more than 4 KiB, not one newline), a clear, the screen placed word by word.
LOGIN_TUI = r"""
import os, sys, time
w = sys.stdout.write
w("\x1b[?1049h\x1b[?25l")
for i in range(300):
    w("\x1b[10;10H\x1b[36m%s\x1b[0m loading %3d" % ("|/-\\"[i % 4], i))
sys.stdout.flush()
while DRAW_AFTER and not os.path.exists(DRAW_AFTER):
    time.sleep(0.05)
w("\x1b[2J\x1b[H\x1b[2;3H\x1b[1mWelcome to Agent 1.0\x1b[0m")
for col, word in ((2, "Select"), (9, "login"), (15, "method:")):
    w("\x1b[4;%dH%s" % (col, word))
w("\x1b[6;3H\x1b[7m> 1. Account with subscription\x1b[0m\x1b[7;5H2. API key")
sys.stdout.flush()
time.sleep(100000)
"""
#: The rows of :data:`LOGIN_TUI`'s screen, as a terminal shows them.
LOGIN_ROWS = ("  Welcome to Agent 1.0", " Select login method:", "  > 1. Account with subscription", "    2. API key")


def tui_unit(project: Project, name: str, draw_after: str | None = None) -> None:
    """A generic unit running :data:`LOGIN_TUI` (a screen that blocks: named once the screen is read, [freeze]
    after 1 s); ``draw_after``: it shows its splash until this file exists in the project, then the screen."""
    script = f"DRAW_AFTER = {draw_after!r}\n{LOGIN_TUI}"
    project.unit(name, f"""[agent]\ncommand = ["python", "-c", {json.dumps(script)}]\nprompt = "fake> $"
[restart]\nstop_timeout = 3\n[freeze]\nafter = 1\n[wakeup]\non_start = false\n""")


@dataclass
class Dashboard:
    project: Project
    url: str  # the URL `agentd web` prints (with the token)
    base: str  # http://127.0.0.1:PORT/
    token: str

    def request(self, method: str, path: str, *, token: bool = True, headers: dict[str, str] | None = None,
                body: Any = None) -> tuple[int, dict[str, str], bytes]:
        """``(status, headers, body)``; ``token``: send it as a Bearer header."""
        all_headers = dict(headers or {})
        if token:
            all_headers.setdefault("Authorization", f"Bearer {self.token}")
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            all_headers.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.base.rstrip("/") + path, data=data, method=method, headers=all_headers)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=10) as res:
                return res.status, dict(res.headers), res.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def json(self, path: str) -> Any:
        status, _h, body = self.request("GET", path)
        assert status == 200, (status, body[:300])
        return json.loads(body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def start_dashboard(project: Project, units: tuple[str, ...] = ("alpha", "beta"), web: str = "") -> Dashboard:
    for name in units:
        env = f'env = {{ OPENAI_API_KEY = "{PLANTED}" }}\n' if name == units[0] else ""
        project.unit(name, f"""[agent]\ncommand = ["python", "-m", "supervisor.fakeagent"]\n{env}
[restart]\nstop_timeout = 3\n[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n""")
    etc = project.root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "agentd.toml").write_text(f"[web]\nenabled = true\nport = 0\n{web}")
    project.agentd("start")
    for name in units:
        project.wait_state(name, "running")
    info = json.loads(project.agentd("web", "--json").stdout)
    token = (Path(info["token_file"])).read_text().strip()
    base = f"http://127.0.0.1:{info['port']}/"  # also when listen is 0.0.0.0 (the URL names the host then)
    return Dashboard(project, info["url"].replace(info["base"], base), base, token)


@pytest.fixture
def dashboard(project: Project) -> Iterator[Dashboard]:
    """A dashboard of the test's own (for tests that stop or restart units)."""
    yield start_dashboard(project)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """One dashboard for a module's tests that leave the units as they found them."""
    proj = Project(tmp_path_factory.mktemp("web") / "proj")
    try:
        yield start_dashboard(proj)
    finally:
        proj.cleanup()
