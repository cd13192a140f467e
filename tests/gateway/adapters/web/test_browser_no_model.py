"""With no model configured, a message in the web chat gets a visible explanation of how to set
one up (Debian's Chromium against the real gateway; skipped where it is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.browsing import BROWSER_TESTS, logged_in_new_conversation, send_text
from vigil.testing.fake_model import FakeModelServer

pytestmark = BROWSER_TESTS


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
        running.close()


def test_a_message_with_no_model_configured_is_told_how_to_set_one_up(modelless: WebGateway, browser_page: Any) -> None:
    page = browser_page
    logged_in_new_conversation(page, modelless)
    send_text(page, "hello, is anyone there?")
    page.wait_for_function("() => document.getElementById('messages').innerText.includes('No model is configured')")
    text = page.inner_text("#messages")
    assert "vigil config set model" in text  # how to set one up
    assert text.count("No model is configured") == 1  # said once, not as an error and a notice
    assert page.errors == []
