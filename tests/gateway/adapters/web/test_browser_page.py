"""The web chat as a person uses it, in Debian's Chromium against the real gateway and the fake
model: Stop, the heartbeat badge, a phone's width, dark mode. Skipped where either is missing."""

from __future__ import annotations

from typing import Any, Callable

from tests.gateway.process import history
from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.browsing import BROWSER_TESTS, logged_in_new_conversation, send_text
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = BROWSER_TESTS

LONG_ANSWER = "Counting sheep: " + " ".join(f"sheep{n}" for n in range(400))
PHONE = {"width": 390, "height": 844}


def test_stop_ends_a_streaming_answer_and_the_conversation_goes_on_with_its_heartbeat(
    gateway: WebGateway, fake_model_env: FakeModelServer, open_page: Callable[..., Any],
) -> None:
    page = open_page()
    fake_model_env.rule(contains="count sheep", reply=Reply.text(LONG_ANSWER, chunk_delay=0.05))
    fake_model_env.rule(contains="after the stop", reply="Still here.")
    conversation = logged_in_new_conversation(page, gateway)
    heartbeat = page.locator("#heartbeat")
    assert not heartbeat.is_visible()  # no heartbeat: no badge at all
    send_text(page, "/heartbeat every 1h say tick")
    heartbeat.wait_for(state="visible")
    stop = page.get_by_role("button", name="Stop")
    assert not stop.is_visible()

    send_text(page, "count sheep please")
    page.wait_for_function("() => /sheep3/.test(document.querySelector('.message.assistant.streaming')?.textContent)")
    stop.click()
    page.wait_for_selector(".message.assistant:not(.streaming) .turn-cancelled")
    stop.wait_for(state="hidden")
    shown = page.inner_text(".message.assistant .bubble")
    assert "sheep3" in shown and "sheep399" not in shown

    # Esc stops too.
    send_text(page, "count sheep again")
    page.wait_for_function("() => /sheep3/.test(document.querySelector('.message.assistant.streaming')?.textContent)")
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.querySelectorAll('.turn-cancelled').length === 2")

    send_text(page, "after the stop")
    page.wait_for_selector(".message.assistant:not(.streaming) >> text=Still here.")
    assert heartbeat.is_visible() and "paused" not in (heartbeat.get_attribute("class") or "")
    assert history(gateway.api(), conversation)["heartbeat"]["status"] == "active"
    assert "every 1h" in page.inner_text("#hb-summary")

    # Another conversation has no heartbeat: the badge goes.
    page.click("#new-conversation")
    page.wait_for_function("(id) => location.hash.slice(1) !== id", arg=conversation)
    heartbeat.wait_for(state="hidden")
    assert page.errors == []


def test_on_a_phone_nothing_scrolls_sideways_and_the_composer_stays_reachable(
    gateway: WebGateway, fake_model_env: FakeModelServer, open_page: Callable[..., Any],
) -> None:
    wide = ("A long line: https://example.com/" + "very-long-path/" * 20 + "\n\n```bash\n"
            + "echo " + "x" * 300 + "\n```\n\n" + "word " * 300)
    fake_model_env.rule(contains="something wide", reply=wide)
    page = open_page(viewport=PHONE, is_mobile=True, has_touch=True)
    page.goto(f"{gateway.url}/login?token={gateway.token}")
    page.wait_for_url(f"{gateway.url}/")
    page.click("#new-chat")  # the list, and its button, hide behind ☰ on a phone
    page.wait_for_function("() => location.hash.length > 1")
    send_text(page, "/heartbeat every 30m check the mail and summarise anything urgent in two lines")
    page.locator("#heartbeat").wait_for(state="visible")
    send_text(page, "show me something wide " + "y" * 200)
    page.wait_for_selector(".message.assistant:not(.streaming) .code-block")
    sideways = page.evaluate("""() => ({
        page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        messages: (m => m.scrollWidth - m.clientWidth)(document.getElementById('messages')),
        wider: [...document.querySelectorAll('#messages *, .chat-head *, #composer *')]
            .filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('pre, .visually-hidden'))
            .map(e => e.tagName + '.' + e.className).slice(0, 5),
    })""")
    assert sideways == {"page": 0, "messages": 0, "wider": []}
    box = page.locator("#input").bounding_box()
    assert box is not None and box["y"] + box["height"] <= PHONE["height"] and box["width"] > 200
    badge = page.locator("#hb-toggle").bounding_box()
    assert badge is not None and badge["height"] < 40  # one compact line, not a banner
    page.locator("#messages").evaluate("(m) => { m.scrollTop = 0; }")
    assert page.locator("#input").is_visible() and page.get_by_role("button", name="Send").is_visible()
    assert page.errors == []


def test_dark_mode_follows_the_system_and_the_toggle(gateway: WebGateway, open_page: Callable[..., Any]) -> None:
    page = open_page(color_scheme="dark")
    logged_in_new_conversation(page, gateway)
    background = "() => getComputedStyle(document.body).backgroundColor"
    assert page.evaluate(background) == "rgb(22, 24, 28)"
    toggle = page.get_by_role("button", name="Dark mode")
    assert toggle.get_attribute("aria-pressed") == "true"
    toggle.click()
    assert page.evaluate(background) == "rgb(247, 247, 248)"
    page.reload()  # the choice is kept
    page.wait_for_selector("#input")
    assert page.evaluate(background) == "rgb(247, 247, 248)"
    page.get_by_role("button", name="Dark mode").click()
    assert page.evaluate(background) == "rgb(22, 24, 28)"
    assert page.errors == []
