"""Make the dashboard's screenshots for the README: ``.venv/bin/python docs/screenshots.py``.

Builds a throw-away project whose fake-agent units show the states a person
meets (in a turn, idle, checkpointing, backoff, failed, waiting for a
schedule, stopped, frozen above the hard limit, blocked on a login screen),
lets the demo-sized units run a few checkpoint cycles, then photographs the
overview and one unit's page with Debian's chromium (Playwright) into
docs/img/, and the overview on a phone's screen (390 x 844).  Takes about two
minutes; everything it started is stopped at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AGENTD = [sys.executable, "-m", "supervisor"]
CHROMIUM = os.environ.get("AGENTD_CHROMIUM", "/usr/bin/chromium")
FAKE = '["python", "-m", "supervisor.fakeagent"'
#: A TUI agent sitting on its login screen (drawn with cursor moves, as Codex's is).
LOGIN = ("import sys, time\nw = sys.stdout.write\nw('\\x1b[?1049h\\x1b[2J\\x1b[2;3H\\x1b[1mWelcome to Agent 1.0\\x1b[0m')\n"
         "w('\\x1b[4;2HSelect login method:\\x1b[6;3H\\x1b[7m> 1. Account with subscription\\x1b[0m\\x1b[7;5H2. API key')\n"
         "sys.stdout.flush()\ntime.sleep(100000)\n")

UNITS = {
    "api": f'''[unit]\ndescription = "REST API: pagination"\n[agent]\ncommand = {FAKE}, "--work-interval", "1.5", "--work-lines", "4", "--color"]
prompt = "fake> $"\n[scope]\nmodule = "api"\npaths = ["src/api/**"]\n[context]\nwindow = 24000\n[checkpoint]\ndeadline = 60\ngrace = 5\n''',
    "web": f'''[unit]\ndescription = "web front end: the settings page"\n[agent]\ncommand = {FAKE}, "--work-interval", "1", "--work-lines", "6", "--color"]
prompt = "fake> $"\n[scope]\nmodule = "web"\npaths = ["src/web/**"]\n[context]\nwindow = 6000\n[checkpoint]\ndeadline = 60\ngrace = 5\n''',
    "search": f'''[unit]\ndescription = "search index rebuild"\n[agent]\ncommand = {FAKE}, "--on-checkpoint", "slow:900"]
prompt = "fake> $"\n[scope]\nmodule = "search"\npaths = ["src/search/**"]\n[context]\nwindow = 200000\n''',
    "worker": f'''[unit]\ndescription = "queue worker"\nenabled = false\n[agent]\ncommand = {FAKE}, "--work-interval", "1", "--work-lines", "2"]
prompt = "fake> $"\n[scope]\nmodule = "worker"\npaths = ["src/worker/**"]\n[context]\nwindow = 2500\n[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n''',
    "billing": f'''[unit]\ndescription = "billing: invoice export"\n[agent]\ncommand = {FAKE}, "--crash-after", "4"]
[scope]\nmodule = "billing"\npaths = ["src/billing/**"]\n[restart]\npolicy = "always"\ninitial_delay = 120\n[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n''',
    "db": f'''[unit]\ndescription = "database migrations"\n[agent]\ncommand = {FAKE}, "--crash-after", "0.3"]
[scope]\nmodule = "db"\npaths = ["src/db/**"]\n[restart]\ninitial_delay = 0.2\nburst = 2\ninterval = 60\n[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n''',
    "nightly": f'''[unit]\ndescription = "nightly dependency upgrades"\nenabled = false\n[agent]\ncommand = {FAKE}]
[scope]\nmodule = "deps"\npaths = ["requirements*.txt"]\n[schedule]\nstart = "0 2 * * *"\nstop = "0 6 * * *"\n''',
    "docs": f'''[unit]\ndescription = "docs writer"\nenabled = false\n[agent]\ncommand = {FAKE}]\n[scope]\nmodule = "docs"\npaths = ["docs/**"]\n''',
    "payments": f'''[unit]\ndescription = "payments: refunds"\n[agent]\ncommand = ["python", "-c", {json.dumps(LOGIN)}]
prompt = "fake> $"\n[scope]\nmodule = "payments"\npaths = ["src/payments/**"]\n[freeze]\nafter = 1\n[wakeup]\non_start = false\n''',
}


def agentd(root: Path, *args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    return subprocess.run([*AGENTD, "--root", str(root), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=check).stdout


def state(root: Path, unit: str) -> dict:
    return next(r for r in json.loads(agentd(root, "status", "--json", check=False))["units"] if r["unit"] == unit)


ROOT: list[Path] = []  # the demo project, for what a timeout shows


def wait(what: str, predicate, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}\n{agentd(ROOT[0], 'status', check=False) if ROOT else ''}")
        time.sleep(0.5)


def main() -> None:
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="agentd-shots-"))
    root = work / "shop"
    ROOT.append(root)
    (root / "units").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "agentd.toml").write_text("[web]\nenabled = true\nport = 0\n")
    for name, text in UNITS.items():
        (root / "units" / f"{name}.toml").write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    agentd(root, "start")
    try:
        agentd(root, "decide", "paginate with opaque cursors, not offsets", "--why",
               "because offsets skip rows when items are inserted, so clients get stable pages", "--module", "web",
               "--tag", "arch")
        agentd(root, "decide", "keep the settings form server-rendered", "--why",
               "because it must work without JS for the admin console, so no SPA router", "--module", "web",
               "--tag", "arch", "--tag", "constraint")
        (root / "src" / "web").mkdir(parents=True)
        (root / "src" / "web" / "forms.py").write_text("def render():\n    return '<form>'\n")
        agentd(root, "fact", "add", "the settings form is rendered by src/web/forms.py", "--source",
               "src/web/forms.py:1-2", "--module", "web")
        wait("search running", lambda: state(root, "search")["state"] == "running")
        wait("the web unit's first cycle", lambda: (state(root, "web").get("restarts") or 0) >= 1, 240)
        agentd(root, "start", "worker")  # started late, so it is just past its hard limit when photographed
        agentd(root, "send", "web", "write src/api/routes.py a quick fix")  # outside web's scope: a violation
        subprocess.Popen([*AGENTD, "--root", str(root), "checkpoint", "search"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        agentd(root, "send", "api", "sleep 600")
        wait("db failed", lambda: state(root, "db")["state"] == "failed")
        wait("billing in backoff", lambda: state(root, "billing")["state"] == "backoff", 30)
        wait("search checkpointing", lambda: state(root, "search")["state"] == "checkpointing")
        wait("worker above its hard limit", lambda: (state(root, "worker").get("context") or {}).get("ratio", 0) > 0.92,
             180)
        wait("payments blocked on its login screen", lambda: (state(root, "payments").get("frozen") or {}).get("state")
             == "blocked_screen", 30)
        info = json.loads(agentd(root, "web", "--json"))
        out = HERE / "img"
        out.mkdir(exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1360, "height": 860}, device_scale_factor=1)
            page = context.new_page()
            page.goto(info["url"])
            page.wait_for_selector('.card[data-unit="api"][data-state="in-turn"]', timeout=30_000)
            time.sleep(2)
            page.screenshot(path=str(out / "dashboard-overview.png"), full_page=True)
            page.set_viewport_size({"width": 1360, "height": 1240})
            page.goto(info["base"] + "unit/web")
            page.wait_for_selector(".xterm-rows", timeout=30_000)
            time.sleep(4)
            page.screenshot(path=str(out / "dashboard-unit.png"), full_page=False)
            phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True,
                                        has_touch=True).new_page()
            phone.goto(info["url"])
            phone.wait_for_selector('.card[data-unit="payments"][data-state="blocked"]', timeout=30_000)
            time.sleep(2)
            phone.screenshot(path=str(out / "dashboard-phone.png"), full_page=False)
            browser.close()
        print(f"wrote {out / 'dashboard-overview.png'}, {out / 'dashboard-unit.png'} and {out / 'dashboard-phone.png'}")
    finally:
        agentd(root, "stop", "--now", check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
