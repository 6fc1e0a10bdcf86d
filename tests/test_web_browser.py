"""The dashboard in a real browser: Debian's chromium driven by Playwright, against a real daemon.

The ``browser`` and ``page`` fixtures (chromium from tests/install_browser.sh,
``--no-sandbox`` as root) are tests/browser_fixtures.py's, a plugin of tests/conftest.py.
"""

from __future__ import annotations

import time

from playwright.sync_api import Page, expect

from tests.conftest import wait_until
from tests.web_fixtures import PLANTED, Dashboard, dashboard  # noqa: F401 - the fixture


def card(page: Page, unit: str):  # noqa: ANN201 - a Playwright Locator
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
