"""The dashboard in a real browser: Debian's chromium driven by Playwright, against a real daemon.

Issue 27's tests run on a desk's screen (1440 x 900) and a phone's (390 x 844; the ``screen`` fixture):
no page scrolls sideways, recall and WIP read as ``agentd history`` says them, the overview's filter
filters, every action asks or explains, and a blocked screen is on the page within 5 s.

The ``browser``, ``page`` and ``screen`` fixtures (chromium from tests/install_browser.sh,
``--no-sandbox`` as root) are tests/browser_fixtures.py's, a plugin of tests/conftest.py.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect
from prometheus_client.parser import text_string_to_metric_families

from tests.browser_fixtures import no_sideways_scroll
from tests.conftest import Project, clean_env, git, wait_until
from tests.web_fixtures import PLANTED, Dashboard, dashboard, shared, start_dashboard, tui_unit  # noqa: F401 - fixtures


def card(page: Page, unit: str):
    return page.locator(f'.card[data-unit="{unit}"]')


def test_overview_shows_every_unit_and_a_cli_stop_changes_its_glyph_live(dashboard: Dashboard, page: Page) -> None:
    page.goto(dashboard.url)
    assert "token=" not in page.url  # the token moved into a cookie
    for unit in ("alpha", "beta"):
        expect(card(page, unit)).to_have_attribute("data-state", "idle", timeout=10_000)
        expect(card(page, unit).locator(".state-glyph")).to_have_text("●")
    page.evaluate("window.__same_page = true")
    dashboard.project.agentd("stop", "beta", "--now")
    stopped = time.monotonic()
    expect(card(page, "beta")).to_have_attribute("data-state", "stopped", timeout=2_000)
    assert time.monotonic() - stopped < 2.0
    expect(card(page, "beta").locator(".state-glyph")).to_have_text("■")
    expect(card(page, "alpha")).to_have_attribute("data-state", "idle")
    assert page.evaluate("window.__same_page") is True  # no reload


def test_the_restart_button_restarts_the_unit(dashboard: Dashboard, page: Page) -> None:
    before = dashboard.project.unit_status("alpha")
    page.goto(dashboard.base + "unit/alpha?token=" + dashboard.token)
    expect(page.locator("#state-label")).to_have_text("idle at its prompt", timeout=10_000)
    page.locator('button[data-action="restart"]').click()
    expect(page.locator("#confirm")).to_contain_text("Restart alpha?")  # it asks first
    page.locator('#confirm button[data-confirm="restart"]').first.click()

    def restarted() -> dict | None:
        row = dashboard.project.unit_status("alpha")
        return row if row and row["state"] == "running" and row["pid"] != before["pid"] and row["restarts"] > before["restarts"] else None

    row = wait_until(restarted, 30, what="alpha restarted by the button")
    expect(page.locator("#term-note")).to_contain_text(row["session"], timeout=5_000)
    assert dashboard.project.events("web_action")[-1]["action"] == "restart"


def terminal_text(page: Page) -> str:
    return page.evaluate("""() => { const b = term.buffer.active; const out = [];
        for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true));
        return out.join("\\n"); }""")


def test_the_terminal_shows_what_send_typed_and_never_the_planted_secret(dashboard: Dashboard, page: Page) -> None:
    page.goto(dashboard.base + "unit/alpha?token=" + dashboard.token)
    expect(page.locator("#term-note")).to_contain_text("session", timeout=10_000)
    dashboard.project.agentd("send", "alpha", "echo typed-by-agentd-send")
    wait_until(lambda: "typed-by-agentd-send" in terminal_text(page).replace("echo typed", ""), 10,
               what="the agent's answer in the browser's terminal")
    dashboard.project.agentd("send", "alpha", "env OPENAI_API_KEY")
    wait_until(lambda: "[REDACTED]" in terminal_text(page), 10, what="the redacted secret in the terminal")
    # the page's own send box types too
    page.fill("#send-text", "echo from-the-send-box")
    page.click("#send-form button")
    wait_until(lambda: "from-the-send-box" in terminal_text(page).replace("echo from", ""), 10, what="the send box's text")
    assert PLANTED not in terminal_text(page)
    assert PLANTED not in page.content()
    assert PLANTED[:12] not in terminal_text(page)


# ---------------------------------------------------------------------- issue 27 §3: every page on a desk and a phone
#: A unit that fails at once (its start limit is one start) until the file ``ok`` exists in the project.
CRASH = "import os, sys, time\nif not os.path.exists('ok'):\n    sys.exit(3)\nprint('up'); sys.stdout.flush(); time.sleep(100000)\n"


def crash_unit(project: Project) -> None:
    project.unit("crash", f"""[agent]\ncommand = ["python", "-c", {json.dumps(CRASH)}]\nprompt = "fake> $"
[restart]\ninitial_delay = 0\nburst = 1\ninterval = 600\nstop_timeout = 3\n[checkpoint]\nenabled = false
[wakeup]\non_start = false\n""")


def result(page: Page):
    return page.locator("#action-result .text")


def test_every_action_asks_or_explains_and_a_failed_unit_offers_reset(project: Project, screen: Page) -> None:
    crash_unit(project)
    board = start_dashboard(project)
    project.wait_state("crash", "failed")
    screen.goto(board.base + "unit/crash?token=" + board.token)
    expect(screen.locator("#state-label")).to_have_text("failed", timeout=10_000)
    # a crash loop reads as crashes, never as continuity cycles (issue 27 §2, on the page too)
    crashed = board.json("/api/units/crash")["card"]
    assert crashed["crashes"] >= 1 and crashed["cycles"] == 0, crashed
    expect(screen.locator('#now .k:text-is("crashes") + div')).to_have_text(str(crashed["crashes"]))
    # Start on a failed unit: it fails again at once, and the page says so and what to do. The answer to
    # Start is held back until the daemon has failed the unit again, so the failed card reaches the page
    # before the answer (as on a loaded machine): the page must still tell the failure, not "started".
    def failures() -> int:
        return sum(e["new"] == "failed" for e in project.events("unit_state", unit="crash"))

    before = failures()

    def held(route) -> None:
        answer = route.fetch()
        wait_until(lambda: failures() > before, 15, what="crash to fail again")
        route.fulfill(response=answer)

    screen.route("**/api/units/crash/start", held)
    screen.locator('.actions button[data-action="start"]').click()
    expect(result(screen)).to_contain_text("crash is failed", timeout=15_000)
    expect(result(screen)).to_contain_text("agentd reset-failed crash")
    expect(screen.locator('#action-result button[data-action="reset-failed"]')).to_be_visible()
    (project.root / "ok").touch()
    screen.locator('#action-result button[data-action="reset-failed"]').click()
    expect(result(screen)).to_contain_text("reset crash", timeout=10_000)
    project.wait_state("crash", "running")
    no_sideways_scroll(screen)

    screen.goto(board.base + "unit/alpha")
    expect(screen.locator("#state-label")).to_have_text("idle at its prompt", timeout=10_000)
    pid = project.unit_status("alpha")["pid"]
    # stop asks first; cancel does nothing and says so
    screen.locator('.actions button[data-action="stop"]').click()
    expect(screen.locator("#confirm")).to_contain_text("Stop alpha?")
    no_sideways_scroll(screen)
    screen.locator('#confirm button[data-confirm="cancel"]').click()
    expect(result(screen)).to_contain_text("cancelled, nothing was done")
    assert project.unit_status("alpha")["pid"] == pid
    screen.locator('.actions button[data-action="stop"]').click()
    screen.locator('#confirm button[data-confirm="stop"]').first.click()
    expect(result(screen)).to_contain_text("stopped alpha", timeout=15_000)
    project.wait_state("alpha", "inactive")
    # start says what it did
    screen.locator('.actions button[data-action="start"]').click()
    expect(result(screen)).to_contain_text("started alpha", timeout=15_000)
    started = project.wait_state("alpha", "running")
    # restart asks, then a new session
    screen.locator('.actions button[data-action="restart"]').click()
    expect(screen.locator("#confirm")).to_contain_text("Restart alpha?")
    screen.locator('#confirm button[data-confirm="restart"]').first.click()
    expect(result(screen)).to_contain_text("restart", timeout=15_000)
    wait_until(lambda: (r := project.unit_status("alpha"))["state"] == "running" and r["pid"] != started["pid"], 30,
               what="alpha restarted")
    # checkpoints are off for alpha: the button says why it does nothing
    box = screen.locator('.actions button[data-action="checkpoint"]')
    expect(box).to_be_disabled()
    assert "checkpoints are off" in (box.get_attribute("title") or "")
    # the send box says whether the text was typed now or queued
    screen.fill("#send-text", "echo from-the-phone-or-desk")
    screen.click("#send-form button")
    expect(result(screen)).to_contain_text("alpha", timeout=10_000)
    assert any(w in result(screen).inner_text() for w in ("typed into alpha now", "queued for alpha"))
    assert [e["action"] for e in project.events("web_action")][-5:] == ["reset-failed", "stop", "start", "restart",
                                                                         "send"]


def test_the_overview_filter_filters_and_keeps_its_focus(shared: Dashboard, screen: Page) -> None:
    screen.goto(shared.url)
    expect(card(screen, "alpha")).to_be_visible(timeout=10_000)
    box = screen.locator("#filter")
    for text, shown in (("bet", {"beta"}), ("ALPHA", {"alpha"}), ("idle", {"alpha", "beta"}), ("alpha beta", set()),
                        ("", {"alpha", "beta"})):
        box.fill(text)
        for unit in ("alpha", "beta"):
            if unit in shown:
                expect(card(screen, unit)).to_be_visible()
            else:
                expect(card(screen, unit)).to_be_hidden()
        expect(screen.locator("#no-match")).to_have_count(0 if shown else 1)
    box.fill("alp")
    expect(screen.locator("#count")).to_contain_text("1 of 2")
    # a live update redraws the cards; the box keeps its text and its focus
    since = card(screen, "alpha").locator("[data-since]").get_attribute("data-since")
    shared.project.agentd("send", "alpha", "echo while-filtering")
    expect(card(screen, "alpha").locator("[data-since]")).not_to_have_attribute("data-since", since or "", timeout=10_000)
    assert screen.evaluate("document.activeElement.id") == "filter" and box.input_value() == "alp"
    expect(card(screen, "beta")).to_be_hidden()
    no_sideways_scroll(screen)


def test_a_blocked_screen_is_on_the_dashboard_status_and_metrics_within_5_s(project: Project, screen: Page) -> None:
    """A generic agent draws a login screen; once it is drawn, the card, the alarm, ``status --json`` and
    ``/metrics`` name it within 5 s (status names it after [freeze] after = 1 s here)."""
    tui_unit(project, "tui", draw_after="draw")
    board = start_dashboard(project)
    screen.goto(board.url)
    expect(card(screen, "tui")).to_have_attribute("data-state", "running", timeout=10_000)  # its splash: no blocked yet
    (project.root / "draw").touch()
    wait_until(lambda: "method:" in project.transcript("tui", suffix=".log"), 30, what="the login screen drawn")
    deadline = time.monotonic() + 5.0

    def left() -> float:
        return max(0.2, deadline - time.monotonic())

    expect(card(screen, "tui")).to_have_attribute("data-state", "blocked", timeout=left() * 1000)
    expect(card(screen, "tui").locator(".state-label")).to_contain_text("blocked: login")
    expect(screen.locator('#alarms .alarm[data-unit="tui"][data-kind="blocked"]')).to_contain_text("login")
    row = wait_until(lambda: (r := project.unit_status("tui")) and r.get("frozen") and r, left(), what="status")
    assert row["frozen"]["state"] == "blocked_screen" and "login" in row["frozen"]["detail"]

    def blocked() -> dict | None:
        families = {f.name: f for f in text_string_to_metric_families(board.request("GET", "/metrics")[2].decode())}
        samples = {(s.labels["unit"], s.labels["screen"]): s.value for s in families["agentd_unit_blocked"].samples}
        frozen = {(s.labels["unit"], s.labels["freeze"]): s.value for s in families["agentd_unit_frozen"].samples}
        return {"blocked": samples, "frozen": frozen} if samples[("tui", "login")] == 1.0 else None

    found = wait_until(blocked, left(), what="the blocked series")
    assert found["blocked"][("alpha", "login")] == 0.0 and found["frozen"][("tui", "blocked_screen")] == 1.0
    assert sum(v for (u, _), v in found["blocked"].items() if u == "tui") == 1.0
    no_sideways_scroll(screen)
    # the unit's page: its live terminal shows the screen (repainted: the TUI drew it before the page came)
    screen.goto(board.base + "unit/tui")
    wait_until(lambda: "Select login method:" in terminal_text(screen), 10, what="the login screen in the terminal")
    assert "> 1. Account with subscription" in terminal_text(screen)
    expect(screen.locator("#state-label")).to_have_text("blocked: login")
    no_sideways_scroll(screen)


# ---------------------------------------------------------------------- recall and WIP, as `agentd history` shows them
DECISION = "keep the wire format at v2"


@pytest.fixture(scope="module")
def cycled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, dict]]:
    """A git project whose unit ran one checkpoint with uncommitted work (a WIP commit) and a wakeup that left
    the global decision out (recall below 1): the dashboard and the cycle record."""
    proj = Project(tmp_path_factory.mktemp("cycled") / "proj")
    try:
        root = proj.root
        proj.init_git()
        proj.init_memory()
        proj.agentd("decide", DECISION, "--why", "because clients pin it, so changes go behind a flag", "--global")
        command = [sys.executable, "-I", "-m", "supervisor", "--root", str(root), "wakeup", "--module", "coder",
                   "--decisions", "0"]
        proj.fake_unit("coder", "--on-checkpoint", "ignore", cycle=True, scope='paths = ["src/**"]',
                       wakeup=f"command = {json.dumps(command)}")
        (root / "src").mkdir()
        (root / "src" / "app.py").write_text("x = 1\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "the project")
        board = start_dashboard(proj, units=("alpha",))
        wait_until(lambda: len(proj.inputs("coder")) == 1, 60, what="the first wakeup")
        (root / "src" / "app.py").write_text("x = 2  # in flight\n")
        proj.agentd("checkpoint", "coder")
        record = wait_until(lambda: [r for r in proj.history("coder") if r.get("recall") and r.get("wip")], 60,
                            what="a cycle with a recall and a WIP commit")[-1]
        yield board, record
    finally:
        proj.cleanup()


def test_recall_and_wip_read_as_history_says_them_on_every_page(cycled: tuple[Dashboard, dict], screen: Page) -> None:
    board, record = cycled
    history = board.project.agentd("history", "coder", "--cycles", env=clean_env(COLUMNS="400")).stdout
    wip, recall = record["wip"][:12], record["recall"]
    assert recall["recall"] < 1 and recall["missing"] == ["decision (global)"]
    assert wip in history and f"! recall {recall['recall']:g}, missing: decision (global)" in history
    screen.goto(board.base + "unit/coder?token=" + board.token)
    row = screen.locator(f'#cycles tr[data-started="{record["started"]}"]')
    expect(row.locator("td.wip")).to_have_text(wip, timeout=10_000)
    expect(row.locator("td.recall")).to_have_text(
        f"{recall['recall']:g} ({recall['found']}/{recall['probes']}), missing: decision (global)")
    assert "[object Object]" not in screen.content()
    no_sideways_scroll(screen)
    screen.goto(board.base)
    last = card(screen, "coder").locator(".stat", has_text="last cycle")
    expect(last).to_contain_text(f"recall {recall['recall']:g}", timeout=10_000)
    assert "[object Object]" not in card(screen, "coder").inner_text()
    no_sideways_scroll(screen)
    screen.goto(board.base + "timeline")
    expect(screen.locator(".tl-row.cycle").first).to_contain_text(f"WIP {wip}", timeout=10_000)
    expect(screen.locator(".tl-row.cycle").first).to_contain_text("missing: decision (global)")
    expect(screen.locator(".tl-row.decision").first).to_contain_text(DECISION)
    no_sideways_scroll(screen)
    screen.goto(board.base + "fleet")
    expect(screen.locator('#rows tr[data-unit="coder"]')).to_be_visible(timeout=10_000)
    no_sideways_scroll(screen)
    screen.goto(board.base + "plans")
    expect(screen.locator("#summary")).to_contain_text("No plan has run here yet", timeout=10_000)
    no_sideways_scroll(screen)


# ---------------------------------------------------------------------- a hostile agent's output in the page
HOSTILE = r"""
import sys, time
w = sys.stdout.write
w('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>\r\n')
w('\x1b]0;<b>title</b>\x07\x1b]52;c;cHduZWQ=\x07')  # a window title, a clipboard write
w('\x1b]8;;http://127.0.0.1:9/steal-the-cookie\x07click-me\x1b]8;;\x07 and more\r\n')
w('fake> ')
sys.stdout.flush()
time.sleep(100000)
"""


def test_a_hostile_agents_output_is_text_and_its_link_is_never_followed(project: Project, page: Page) -> None:
    project.unit("hostile", f"""[agent]\ncommand = ["python", "-c", {json.dumps(HOSTILE)}]\nprompt = "fake> $"
[restart]\nstop_timeout = 3\n[checkpoint]\nenabled = false\n[wakeup]\non_start = false\n""")
    project.agentd("init")
    html = '<img src=y onerror="window.__pwned=3">'
    board = start_dashboard(project)
    project.agentd("decide", html, "--why", f"because {html}, so {html}", "--global")  # memory an agent can write
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(board.base + "unit/hostile?token=" + board.token)
    wait_until(lambda: "click-me" in terminal_text(page), 15, what="the hostile output in the terminal")
    assert '<img src=x onerror="window.__pwned=1">' in terminal_text(page)
    expect(page.locator("#decisions")).to_contain_text(html, timeout=10_000)
    where = page.evaluate("""() => { const b = term.buffer.active;
        for (let i = 0; i < b.length; i++) { const x = b.getLine(i).translateToString(true).indexOf("click-me");
          if (x >= 0) { const r = document.querySelector(".xterm-screen").getBoundingClientRect();
            return [r.left + (x + 2.5) * r.width / term.cols, r.top + (i - b.viewportY + 0.5) * r.height / term.rows]; } }
        return null; }""")
    assert where is not None
    page.mouse.move(*where)
    page.mouse.click(*where)
    expect(page.locator(".toast")).to_contain_text("not opened: http://127.0.0.1:9/steal-the-cookie", timeout=5_000)
    assert dialogs == [] and len(page.context.pages) == 1  # no "open this link?" question, no new window
    page.goto(board.base + "timeline")
    expect(page.locator(".tl-row.decision").first).to_contain_text(html, timeout=10_000)
    assert page.evaluate("window.__pwned") is None and page.locator("img").count() == 0
    assert page.title() == "agentd timeline"
