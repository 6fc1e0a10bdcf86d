"""The real daemon in a throw-away project, for the long runs (``bench.soak``, ``bench.storm``).

:func:`agentd` runs one command of this interpreter's agentd in a project,
with an environment cleaned of the caller's ``AGENTD_*`` settings;
:func:`of_project` finds what of the project still runs (by ``AGENTD_ROOT``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

PY = sys.executable


def agentd(project: Path, *args: str, timeout: float = 300, **settings: str) -> subprocess.CompletedProcess[str]:
    """``agentd ARGS`` in ``project``; ``settings``: ``AGENTD_*`` variables for it (``EVENT_INDEX="false"``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_") and k != "NOTIFY_SOCKET"}
    env["PATH"] = str(Path(PY).parent) + os.pathsep + env.get("PATH", "")
    env.update({f"AGENTD_{k}": v for k, v in settings.items()})
    return subprocess.run([PY, "-m", "supervisor", "--root", str(project), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def of_project(project: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("AGENTD_ROOT") == str(project) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
    return found
