"""The dashboard's cost: the daemon's CPU with the page open on 50 busy units, against no dashboard.

``python -m bench.web_bench [--units 50] [--seconds 30] [--rounds 2]``

A real daemon (``agentd start --foreground``) runs ``--units`` fake agents
that print three lines every half second each (about 300 bytes/s per unit:
transcripts, redaction, context estimates all work), with a window small
enough that every card's context gauge moves every few seconds.  Phases
alternate, ``--rounds`` times:

* ``off``: no dashboard (not serving);
* ``on``: ``agentd web`` serving, Debian's chromium (Playwright) showing the
  overview in one tab and one unit's page (with its live terminal) in another.

Only the daemon's own process is measured (user+system CPU from
``/proc/PID/stat``, children excluded), over ``--seconds`` per phase after a
settling pause.  The result is the growth of the ``on`` median over the
``off`` median; the issue's bound is 10 %.  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
CHROMIUM = os.environ.get("AGENTD_CHROMIUM", "/usr/bin/chromium")
AGENTD = [sys.executable, "-m", "supervisor"]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def unit_text(i: int) -> str:
    return f"""[unit]
description = "busy unit {i}"
[agent]
command = ["python", "-m", "supervisor.fakeagent", "--work-interval", "0.5", "--work-lines", "3"]
prompt = "fake> $"
[scope]
module = "m{i:02d}"
[context]
window = 40000
hard_limit = 0.99
[checkpoint]
enabled = false
[wakeup]
on_start = false
"""


def agentd(root: Path, *args: str, timeout: float = 120) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    out = subprocess.run([*AGENTD, "--root", str(root), *args], env=env, capture_output=True, text=True,
                         timeout=timeout, check=True)
    return out.stdout


def measure(pid: int, seconds: float) -> float:
    """Percent of one core the daemon used over ``seconds``."""
    start, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pid) - start) / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=5.0)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="agentd-web-bench-"))
    root = work / "proj"
    (root / "units").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "agentd.toml").write_text("[web]\nport = 0\n")
    for i in range(args.units):
        (root / "units" / f"u{i:02d}.toml").write_text(unit_text(i))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    daemon = subprocess.Popen([*AGENTD, "--root", str(root), "start", "--foreground"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    result: dict[str, object] = {"units": args.units, "seconds": args.seconds, "rounds": args.rounds}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                status = json.loads(agentd(root, "status", "--json"))
                if sum(u["state"] == "running" for u in status["units"]) == args.units:
                    break
            except (subprocess.CalledProcessError, ValueError):
                pass
            time.sleep(1)
        else:
            raise SystemExit("the units did not all start")
        time.sleep(args.settle)
        off: list[float] = []
        on: list[float] = []
        events = 0
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            for _ in range(args.rounds):
                off.append(measure(daemon.pid, args.seconds))
                info = json.loads(agentd(root, "web", "--json"))
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                overview, unit = context.new_page(), context.new_page()
                overview.goto(info["url"])
                overview.wait_for_selector(".card", timeout=20_000)
                unit.goto(info["base"] + "unit/u00")
                unit.wait_for_selector(".xterm", timeout=20_000)
                time.sleep(args.settle)
                on.append(measure(daemon.pid, args.seconds))
                events = overview.evaluate("document.querySelectorAll('.card').length")
                context.close()
                agentd(root, "web", "--stop")
                time.sleep(args.settle)
            browser.close()
        base, page = statistics.median(off), statistics.median(on)
        result.update({"off_percent_core": [round(x, 2) for x in off], "on_percent_core": [round(x, 2) for x in on],
                       "off_median": round(base, 2), "on_median": round(page, 2),
                       "growth_percent": round(100.0 * (page - base) / base, 1) if base else None,
                       "cards_on_page": events, "bound_percent": 10.0})
    finally:
        try:
            agentd(root, "stop", "--now", timeout=120)
        except Exception:  # noqa: BLE001 - end it the hard way below
            pass
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
