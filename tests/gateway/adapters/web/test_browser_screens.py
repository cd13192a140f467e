"""The web chat's main screens pass axe-core (no serious or critical violation), light and dark,
desktop and phone: the empty page, a conversation with code and tool calls, an approval waiting,
messages waiting behind an answer, heartbeats that found nothing changed (folded), search results. With ``VIGIL_SCREENSHOTS=DIR`` each screen is also saved there as a PNG (the
README's screenshots: ``VIGIL_SCREENSHOTS=docs/screenshots pytest -k screens -n 0``).

axe-core comes from ``frontend/node_modules`` (``npm ci`` in frontend/; .ci/run does it)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.browsing import BROWSER_TESTS, send_text
from vigil.schedule.heartbeat.text import ASK_FOR_SILENCE, heartbeat_header
from vigil.store import NewMessage, ToolCall, open_store
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

AXE = Path(__file__).resolve().parents[4] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
pytestmark = [
    *BROWSER_TESTS,
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
RELEASE_ANSWER = """Since Monday the release branch has 14 new commits:

- **Uploads**: files over the size cap are refused with 413 before anything is written.
- **Search**: results show snippets with the matched words marked.
- **Heartbeats**: quiet hours, an end date and a daily token budget.
""" + " ".join(["The rest are small fixes to the docs and the tests."] * 60)
CI_PROMPT = "check the CI run of PR #1234 and tell me when it finishes"


@pytest.fixture
def page(gateway: WebGateway, open_page: Callable[..., Any]) -> Any:
    # axe is injected as an inline script, which the page's policy would refuse
    return open_page(viewport=SIZES["desktop"], bypass_csp=True)


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
        _settled(page)
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


def _settled(page: Any) -> None:
    """Wait for the transitions a change of size starts (the list sliding out of a phone's
    screen) to end, so that no screen is taken half-way."""
    page.evaluate("""() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))
        .then(() => Promise.all(document.getAnimations().filter(a => a instanceof CSSTransition).map(a => a.finished)))""")


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
    send_text(page, "/heartbeat every 2h look at the inbox and tell me what is urgent")
    page.wait_for_selector("#heartbeat:not([hidden])")
    send_text(page, "Write me a script that lists my text files with their sizes")
    page.wait_for_selector(".message.assistant:not(.streaming) .code-block")
    page.wait_for_function("() => document.querySelectorAll('details.tool[data-done]').length === 2")
    page.click("details.tool summary")  # one card opened, to show its output
    _check(page, "conversation", problems)

    fake_model_env.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": "mkfs.ext4 /dev/sdz1"})), "Not done.")
    send_text(page, "format the spare disk")
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

    _check_queue(page, fake_model_env, problems)
    _check_folded_heartbeats(page, gateway, problems)

    page.fill("#search", "script")
    page.wait_for_selector("#conversation-list .conv-snippet mark")
    page.set_viewport_size(SIZES["phone"])
    _check_search = page.evaluate("() => document.getElementById('search').value")
    assert _check_search == "script"
    page.set_viewport_size(SIZES["desktop"])
    _check_searching(page, problems)
    assert problems == [], "\n".join(problems)
    assert page.errors == []


def _check_queue(page: Any, fake: FakeModelServer, problems: list[str]) -> None:
    """Two messages waiting behind an answer being written, each numbered with Remove."""
    fake.rule(contains="release branch", reply=Reply.text([w + " " for w in RELEASE_ANSWER.split(" ")], chunk_delay=0.1))
    fake.rule(contains="staging logs", reply="No errors in the staging logs since Monday.")
    fake.rule(contains="release notes", reply="Here is a draft of the release notes.")
    page.click("#new-conversation")
    page.wait_for_selector("#empty")
    send_text(page, "Summarize what changed in the release branch since Monday")
    page.wait_for_selector(".message.assistant.streaming li")
    send_text(page, "Also look at the staging logs for errors")
    send_text(page, "Then draft the release notes")
    page.wait_for_function("() => document.querySelectorAll('.message.user.queued .queue-remove').length === 2")
    _check(page, "queue", problems)
    page.click("#stop")
    page.wait_for_selector(".message.assistant:not(.streaming) >> text=Here is a draft of the release notes.")


def _check_folded_heartbeats(page: Any, gateway: WebGateway, problems: list[str]) -> None:
    """A conversation whose heartbeat found nothing changed twice (two quiet lines), then news.
    Its history is written into the store as the heartbeat's turns would have left it, at a
    quarter of an hour apart (the gateway's heartbeats here fire every few seconds)."""
    page.click("#new-conversation")
    page.wait_for_selector("#empty")
    conversation = page.evaluate("() => decodeURIComponent(location.hash.slice(1))")
    fired = heartbeat_header(900) + "\n" + CI_PROMPT + "\n\n" + ASK_FOR_SILENCE
    checks = ToolCall("c1", "terminal", json.dumps({"command": "gh pr checks 1234"}))
    start = time.time() - 50 * 60
    history = [
        (0, NewMessage("user", "Keep an eye on the CI run of PR #1234 and tell me when it finishes")),
        (5, NewMessage("assistant", "I will look at it every 15 minutes and tell you when it finishes.")),
        (900, NewMessage("user", fired)),
        (902, NewMessage("assistant", "", tool_calls=(checks,))),
        (903, NewMessage("tool", "14 of 37 checks done, none failed", tool_call_id="c1", tool_name="terminal")),
        (905, NewMessage("assistant", "HEARTBEAT_OK")),
        (1800, NewMessage("user", fired)),
        (1803, NewMessage("assistant", "HEARTBEAT_OK")),
        (2700, NewMessage("user", fired)),
        (2702, NewMessage("assistant", "", tool_calls=(checks._replace(id="c2"),))),
        (2703, NewMessage("tool", "37 of 37 checks done, 1 failed: test_upload_limits (3.12)", tool_call_id="c2", tool_name="terminal")),
        (2706, NewMessage("assistant", "CI finished: 36 of 37 checks passed. **test_upload_limits** failed on Python 3.12.")),
    ]
    store = open_store(gateway.home / "state.db")
    try:
        for after, message in history:
            store.append_message(conversation, message, created_at=start + after)
        store.update_session(conversation, title="CI of PR #1234")
    finally:
        store.close()
    send_text(page, f"/heartbeat every 15m {CI_PROMPT}")
    page.wait_for_selector("#heartbeat:not([hidden])")
    page.reload()  # the history, without the command
    page.wait_for_function("() => document.querySelectorAll('.heartbeat-fold').length === 2")
    _check(page, "heartbeat-folded", problems)


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
