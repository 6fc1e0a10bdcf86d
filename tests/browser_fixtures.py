"""The real-browser fixtures: Debian's chromium driven by Playwright (``browser``, one per test module; ``page``).

A pytest plugin (``pytest_plugins`` in tests/conftest.py), so a test names
``page`` and gets it; used by tests/test_web_browser.py and tests/test_fleet_view.py.
tests/install_browser.sh installs chromium (the README's test command runs it);
Playwright is pointed at that binary, never at a browser of its own.  We run
as root, hence ``--no-sandbox``.  Playwright is imported when a browser starts,
not by every test run that loads this plugin.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = os.environ.get("AGENTD_CHROMIUM", "/usr/bin/chromium")


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


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, errors
