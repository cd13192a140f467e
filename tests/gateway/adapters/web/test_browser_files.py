"""A file the agent sends shows in the web chat as a link that downloads it (Playwright driving
Debian's Chromium against the real gateway and the fake model; skipped where either is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.browsing import BROWSER_TESTS, logged_in_new_conversation
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

pytestmark = BROWSER_TESTS


def test_a_sent_file_is_a_download_link(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any, tmp_path: Path,
) -> None:
    page = browser_page
    logged_in_new_conversation(page, gateway)
    document = tmp_path / "numbers.csv"
    document.write_text("q1,q2\n10,20\n")
    page.set_input_files("#upload-input", str(document))
    fake_model_env.queue(
        Reply.tool_calls(ToolCallSpec("send_file", {"path": "numbers.csv", "name": "totals.csv", "caption": "the totals"})),
        "Sent you the totals.",
    )
    page.fill("#input", "send the totals back")
    page.press("#input", "Enter")
    link = page.wait_for_selector(".message.notice.file a.file-link")
    assert "totals.csv" in link.inner_text() and "the totals" in page.inner_text(".message.notice.file")
    with page.expect_download() as waiting:
        link.click()
    download = waiting.value
    assert download.suggested_filename == "totals.csv"
    assert Path(download.path()).read_text() == "q1,q2\n10,20\n"
    assert page.errors == []
