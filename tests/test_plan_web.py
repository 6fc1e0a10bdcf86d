"""The dashboard's Plan page in a real browser on a phone's screen, and the plans in /metrics.

The morning look at 7:00 is on a phone: a 390 x 844 viewport, touch, and
nothing may scroll sideways.  The page follows a real run (the fake-agent
night of tests/plan_fixtures.py) live, then shows its end: the states, what
the person must decide, the events the ``[notify]`` command also got.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import Project
from tests.plan_fixtures import ended, setup


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=3, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, errors


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width[0]} px of content in {width[1]} px"
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .map(e => e.tagName + '.' + e.className).slice(0, 5)""")
    assert not wide, f"elements wider than the screen: {wide}"


def test_the_plan_page_follows_the_night_on_a_phone(project: Project, tmp_path: Path, phone: Page) -> None:
    setup(project, tmp_path, web=True)
    project.agentd("start")
    info = json.loads(project.agentd("web", "--json").stdout)
    token = Path(info["token_file"]).read_text().strip()
    base = f"http://127.0.0.1:{info['port']}"
    project.agentd("plan", "start", "night")
    phone.goto(f"{base}/plans?name=night&token={token}")
    cards = phone.locator("article.task")
    expect(cards).to_have_count(6, timeout=20_000)
    # live: a task's card turns done while the page stays open (the stream, no reload)
    expect(phone.locator('article.task[data-task="a1"]')).to_have_attribute("data-state", "done", timeout=60_000)
    ended(project)
    expect(phone.locator('article.task[data-task="b3"]')).to_have_attribute("data-state", "blocked", timeout=30_000)
    states = {cards.nth(i).get_attribute("data-task"): cards.nth(i).get_attribute("data-state") for i in range(6)}
    assert states == {"a1": "done", "a2": "done", "a3": "parked", "b1": "done", "b2": "done", "b3": "blocked"}
    expect(phone.locator("#summary .badge")).to_have_text("ended", timeout=10_000)
    expect(phone.locator("#decide")).to_be_visible()
    expect(phone.locator("#decide-list .item")).to_have_count(2)
    expect(phone.locator('article.task[data-task="a3"] .reason')).to_contain_text("token budget")
    expect(phone.locator("#events")).to_contain_text("task_parked")
    # the failed check's tail is on a2's card only while it was its last check; the commit line is there now
    expect(phone.locator('article.task[data-task="a2"] .line.mono')).to_contain_text("commit ")
    no_sideways_scroll(phone)
    # and /metrics has the plan's series
    req = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as res:
        text = res.read().decode()
    assert 'agentd_plan_tasks{host=' in text and 'plan="night",state="done"} 4.0' in text
    assert 'agentd_plan_events_total{event="task_parked"' in text and 'agentd_plan_running{' in text
