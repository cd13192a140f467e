"""The web chat's browser tests' parts: Debian's Chromium driven by Playwright, headless.

A browser test module sets ``pytestmark = [*BROWSER_TESTS, ...]`` (skipped, with the reason,
where Chromium or Playwright is missing) and takes the ``browser`` / ``open_page`` /
``browser_page`` fixtures of this folder's ``conftest``; a page is logged in with
:func:`log_in` and a message typed with :func:`send_text`."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from tests.gateway.process import GatewayProcess

try:
    from playwright import sync_api as playwright_api
except ImportError:  # a dev extra: pip install -e '.[dev]'
    playwright_api = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WAIT_MS = 30_000
"""How long a page waits for what a test expects (milliseconds)."""
DESKTOP = {"width": 1280, "height": 800}

BROWSER_TESTS = [
    pytest.mark.slow,
    pytest.mark.skipif(playwright_api is None, reason="playwright is not installed (pip install -e '.[dev]')"),
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"),
]
"""The marks of every browser test module."""


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, closed when the block ends."""
    assert playwright_api is not None
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def watched(page: Any) -> Any:
    """``page`` waiting ``WAIT_MS`` for what a test expects, its uncaught errors in ``page.errors``."""
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    return page


def log_in(page: Any, gateway: GatewayProcess) -> None:
    """Log in with the URL the gateway prints, landing on the chat."""
    page.goto(f"{gateway.url}/login?token={gateway.token}")
    page.wait_for_url(f"{gateway.url}/")


def logged_in_new_conversation(page: Any, gateway: GatewayProcess) -> str:
    """Log in and start a conversation from the page; its id."""
    log_in(page, gateway)
    page.click("#new-conversation")
    page.wait_for_function("() => location.hash.length > 1")
    return str(page.evaluate("() => location.hash.slice(1)"))


def send_text(page: Any, text: str) -> None:
    """Type ``text`` into the message box and press Enter."""
    page.fill("#input", text)
    page.press("#input", "Enter")
