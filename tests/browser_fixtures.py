"""The real-browser fixtures: Debian's chromium driven by Playwright (``browser``, one per test module; ``page``;
``screen``: a page at each of :data:`SCREENS`, a desk's and a phone's), and :func:`no_sideways_scroll`.

A pytest plugin (``pytest_plugins`` in tests/conftest.py), so a test names
``page`` and gets it; used by tests/test_web_browser.py and tests/test_fleet_view.py.
tests/install_browser.sh installs chromium (the README's test command runs it);
Playwright is pointed at that binary, never at a browser of its own.  We run
as root, hence ``--no-sandbox``.  Playwright is imported when a browser starts,
not by every test run that loads this plugin.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = os.environ.get("AGENTD_CHROMIUM", "/usr/bin/chromium")
#: The screens every dashboard page must work on: a desk's, and a phone's (390 px wide, touch).
SCREENS: dict[str, dict[str, Any]] = {
    "desk": {"viewport": {"width": 1440, "height": 900}},
    "phone": {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "is_mobile": True, "has_touch": True},
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run tests/install_browser.sh (the README's test command does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


@contextlib.contextmanager
def open_page(browser: Browser, **options: Any) -> Iterator[Page]:
    """A page in a context of its own (``options``: Playwright's context options); no script error on it."""
    context = browser.new_context(**options)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, errors


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, viewport={"width": 1400, "height": 900}) as pg:
        yield pg


@pytest.fixture(params=list(SCREENS))
def screen(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page on a desk's screen, then on a phone's (the test runs once for each)."""
    with open_page(browser, **SCREENS[request.param]) as pg:
        yield pg


#: Elements whose right or left edge is off the screen, once clipped by every ancestor that clips (a box that
#: scrolls by itself, such as the terminal's, may hold wider content; the box itself must fit).
_OFF_SCREEN = """() => {
  const width = document.documentElement.clientWidth;
  const off = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || getComputedStyle(el).position === "fixed") continue;
    let left = box.left, right = box.right;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX === "visible") continue;
      const clip = up.getBoundingClientRect();
      left = Math.max(left, clip.left); right = Math.min(right, clip.right);
    }
    if (right > left && (right > width + 1 || left < -1))
      off.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(box.left)}..${Math.round(box.right)}`);
  }
  return {scroll: document.documentElement.scrollWidth, width, off: off.slice(0, 6)};
}"""


def no_sideways_scroll(page: Page) -> None:
    """The page does not scroll sideways, and nothing shows beyond the screen's edges."""
    found = page.evaluate(_OFF_SCREEN)
    assert found["scroll"] <= found["width"], f"{page.url} scrolls sideways: {found['scroll']} px in {found['width']}"
    assert not found["off"], f"{page.url}: off the screen at {found['width']} px: {found['off']}"
