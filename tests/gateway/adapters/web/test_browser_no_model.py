"""With no model configured, a message in the web chat gets a visible explanation of how to set
one up (Debian's Chromium against the real gateway; skipped where it is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.test_browser import CHROMIUM, WAIT_MS, _logged_in_new_conversation, _send, playwright_api
from vigil.testing.fake_model import FakeModelServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"),
]


@pytest.fixture
def modelless(fake_model: FakeModelServer, vigil_home: Path) -> Iterator[WebGateway]:
    """A gateway with no model endpoint, key or name anywhere."""
    running = WebGateway(vigil_home, fake_model, env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "VIGIL_MODEL": ""})
    environment = running.environment

    def without_model() -> dict[str, str]:
        return {k: v for k, v in environment().items()
                if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VIGIL_MODEL", "ANTHROPIC_API_KEY")}

    running.environment = without_model  # type: ignore[method-assign]
    running.start()
    try:
        yield running
    finally:
        running.close_clients()
        if running.process is not None and running.process.poll() is None:
            running.stop()


def test_a_message_with_no_model_configured_is_told_how_to_set_one_up(modelless: WebGateway) -> None:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page: Any = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(WAIT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            _logged_in_new_conversation(page, modelless)
            _send(page, "hello, is anyone there?")
            page.wait_for_function("() => document.getElementById('messages').innerText.includes('No model is configured')")
            text = page.inner_text("#messages")
            assert "vigil config set model" in text  # how to set one up
            assert text.count("No model is configured") == 1  # said once, not as an error and a notice
            assert errors == []
        finally:
            browser.close()
