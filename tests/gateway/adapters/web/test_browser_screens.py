"""The web chat's main screens pass axe-core (no serious or critical violation), light and dark,
desktop and phone: the empty page, a conversation with code and tool calls, an approval waiting,
search results. With ``VIGIL_SCREENSHOTS=DIR`` each screen is also saved there as a PNG (the
README's screenshots: ``VIGIL_SCREENSHOTS=docs/screenshots pytest -k screens -n 0``).

axe-core comes from ``frontend/node_modules`` (``npm ci`` in frontend/; .ci/run does it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.test_browser import CHROMIUM, WAIT_MS, _send, playwright_api
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

AXE = Path(__file__).resolve().parents[4] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"),
    pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (npm ci in frontend/)"),
]

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
CODE_ANSWER = """The script prints each file with its size:

```python
from pathlib import Path

for path in sorted(Path(".").glob("*.txt")):
    print(f"{path.name}: {path.stat().st_size} bytes")  # one line each
```

Run it in the folder you want listed; see https://docs.python.org/3/library/pathlib.html for more."""


@pytest.fixture
def page(gateway: WebGateway) -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            # axe is injected as an inline script, which the page's policy would refuse
            context = browser.new_context(viewport=SIZES["desktop"], bypass_csp=True)
            opened = context.new_page()
            opened.set_default_timeout(WAIT_MS)
            errors: list[str] = []
            opened.on("pageerror", lambda exc: errors.append(str(exc)))
            opened.errors = errors
            yield opened
        finally:
            browser.close()


def _violations(page: Any) -> list[str]:
    if not page.evaluate("() => Boolean(window.axe)"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => {
        const result = await axe.run(document, { resultTypes: ['violations'] });
        return result.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ')}`);
    }""")
    return list(found)


def _check(page: Any, screen: str, problems: list[str], prepare: Any = None) -> None:
    """axe on ``screen`` at each size, light and dark (and a screenshot of each, if asked);
    ``prepare()`` after each change of size (a menu closes when the window is resized)."""
    folder = os.environ.get("VIGIL_SCREENSHOTS")
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        if prepare is not None:
            prepare()
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.wait_for_timeout(50)  # one frame for the layout and colours to settle
            problems += [f"{screen} {size} {scheme}: {v}" for v in _violations(page)]
            if folder:
                Path(folder).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(folder) / f"{screen}-{size}-{scheme}.png"))
    page.set_viewport_size(SIZES["desktop"])
    page.emulate_media(color_scheme="light")


def test_the_main_screens_have_no_serious_accessibility_problems(
    gateway: WebGateway, fake_model_env: FakeModelServer, page: Any,
) -> None:
    problems: list[str] = []
    page.goto(f"{gateway.url}/login?token={gateway.token}")
    page.wait_for_url(f"{gateway.url}/")
    page.wait_for_selector("#empty .suggestions")
    _check(page, "empty", problems)

    fake_model_env.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": "ls -l *.txt | head -n 3"})),
        Reply.tool_calls(ToolCallSpec("terminal", {"command": "wc -l notes.txt"})),
        CODE_ANSWER,
    )
    page.click("#new-conversation")
    page.wait_for_function("() => location.hash.length > 1")
    _send(page, "/heartbeat every 2h look at the inbox and tell me what is urgent")
    page.wait_for_selector("#heartbeat:not([hidden])")
    _send(page, "Write me a script that lists my text files with their sizes")
    page.wait_for_selector(".message.assistant:not(.streaming) .code-block")
    page.wait_for_function("() => document.querySelectorAll('details.tool[data-done]').length === 2")
    page.click("details.tool summary")  # one card opened, to show its output
    _check(page, "conversation", problems)

    fake_model_env.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": "mkfs.ext4 /dev/sdz1"})), "Not done.")
    _send(page, "format the spare disk")
    page.wait_for_selector(".approval .approval-countdown")
    page.wait_for_function("() => document.querySelector('details.tool[data-state=waiting]')")
    _check(page, "approval", problems)
    page.get_by_role("button", name="Deny").click()
    page.wait_for_selector(".message.assistant:not(.streaming) >> text=Not done.")

    def open_actions() -> None:
        page.click("#conversation-menu")
        page.wait_for_selector(".menu [role=menuitem]")

    _check(page, "actions", problems, open_actions)
    page.keyboard.press("Escape")
    open_actions()
    page.get_by_role("menuitem", name="Change heartbeat…").click()
    page.wait_for_selector("dialog[open] textarea")
    _check(page, "heartbeat-dialog", problems)
    page.keyboard.press("Escape")
    open_actions()
    page.get_by_role("menuitem", name="Delete…").click()
    page.wait_for_selector("dialog[open] .danger")
    _check(page, "delete", problems)
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    page.wait_for_selector("dialog", state="detached")

    page.fill("#search", "script")
    page.wait_for_selector("#conversation-list .conv-snippet mark")
    page.set_viewport_size(SIZES["phone"])
    _check_search = page.evaluate("() => document.getElementById('search').value")
    assert _check_search == "script"
    page.set_viewport_size(SIZES["desktop"])
    _check_searching(page, problems)
    assert problems == [], "\n".join(problems)
    assert page.errors == []


def _check_searching(page: Any, problems: list[str]) -> None:
    """The search results: on a phone they are in the list that slides in."""
    folder = os.environ.get("VIGIL_SCREENSHOTS")
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        if size == "phone":
            page.click("#toggle-sidebar")
            page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.wait_for_timeout(50)
            problems += [f"search {size} {scheme}: {v}" for v in _violations(page)]
            if folder:
                page.screenshot(path=str(Path(folder) / f"search-{size}-{scheme}.png"))
