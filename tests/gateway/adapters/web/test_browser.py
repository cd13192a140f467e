"""The web chat in a real browser: Playwright driving Debian's Chromium, headless, against the
real gateway and the fake model. Skipped (with the reason) where either is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.gateway.adapters.web.browsing import BROWSER_TESTS, logged_in_new_conversation, send_text
from tests.gateway.adapters.web.conftest import WebGateway
from tests.gateway.adapters.web.page_probes import record_streaming
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

pytestmark = BROWSER_TESTS

ANSWER = "Hello! Here is **bold**, `code` and a list:\n\n- one\n- two"
EVIL = '<script>window.__pwned = 1</script> and <img src=x onerror="window.__pwned = 2"> [link](javascript:window.__pwned=3)'


def _answer_after(page: Any, user_text: str) -> str | None:
    """The text of the answer bubble right after the user's message ``user_text``."""
    return page.evaluate("""(wanted) => {
        const rows = [...document.querySelectorAll('#messages > .message')];
        const at = rows.findIndex(r => r.classList.contains('user') && r.textContent === wanted);
        const next = at < 0 ? null : rows.slice(at + 1).find(r => r.classList.contains('assistant'));
        return next ? next.querySelector('.bubble').textContent : null;
    }""", user_text)


def test_log_in_chat_stream_heartbeat_reload_and_script_shown_as_text(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any, tmp_path: Path,
) -> None:
    page = browser_page
    fake_model_env.rule(contains="say tick", reply="tick tock")  # the heartbeat's prompt
    fake_model_env.rule(contains="hi there", reply=Reply.text(ANSWER, chunk_delay=0.05))
    fake_model_env.rule(contains="something nasty", reply=EVIL)

    # Logging in with the printed URL lands on the page; without the cookie it is the login page.
    page.goto(f"{gateway.url}/")
    assert page.url.endswith("/login") and page.locator("input#token").is_visible()
    page.goto(f"{gateway.url}/login?token={gateway.token}")
    page.wait_for_url(f"{gateway.url}/")
    page.click("#new-conversation")
    page.wait_for_function("() => location.hash.length > 1")
    conversation = page.evaluate("() => location.hash.slice(1)")

    # A message, and its answer streamed into the bubble token by token, rendered as Markdown.
    record_streaming(page)
    send_text(page, "hi there")
    page.wait_for_selector(".message.assistant:not(.streaming) .markdown ul li")
    answer = page.locator(".message.assistant .markdown").first
    assert answer.locator("strong").inner_text() == "bold" and answer.locator("code").inner_text() == "code"
    seen = page.evaluate("() => window.__seen")
    partial = [text for text in seen if text and len(text) < len("Hello! Here is bold, code and a list:")]
    assert partial, f"the answer never showed part way: {seen[:5]}"
    assert page.locator(".message.user .bubble").first.inner_text() == "hi there"
    page.wait_for_function("() => document.getElementById('status').textContent === ''")  # no longer busy
    page.wait_for_function("() => document.getElementById('title').textContent === 'hi there'")

    # A heartbeat set from the composer fires unprompted, marked with its header.
    send_text(page, "/heartbeat every 3s say tick")
    page.wait_for_selector("#heartbeat:not([hidden])")
    assert "every 3s" in page.inner_text("#hb-summary") and "say tick" in page.inner_text("#hb-summary")
    page.wait_for_function("() => /next (in \\d+s|due now)/.test(document.getElementById('hb-countdown').textContent)")
    page.wait_for_selector(".heartbeat-turn .hb-header")
    assert "Heartbeat" in page.inner_text(".heartbeat-turn .hb-header")
    assert "fires every 3s" in page.inner_text(".heartbeat-turn .hb-header")
    page.wait_for_function("""() => [...document.querySelectorAll('.message.assistant:not(.streaming) .markdown')]
        .some(e => e.textContent.includes('tick tock'))""")
    page.screenshot(path=str(tmp_path / "web-chat-heartbeat.png"))  # active, with its countdown
    send_text(page, "/heartbeat pause")
    page.wait_for_selector("#heartbeat.paused")

    # An answer carrying HTML is shown as text: no element made, nothing run.
    send_text(page, "show me something nasty")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.markdown')].some(e => e.textContent.includes('<script>'))")
    assert _answer_after(page, "show me something nasty") == EVIL
    assert page.locator("#messages script, #messages img, #messages a[href^='javascript']").count() == 0
    assert page.evaluate("() => window.__pwned") is None

    # After a reload the history is all there, the heartbeat turn still marked.
    page.reload()
    page.wait_for_selector(".message.assistant .markdown ul li")
    assert conversation in page.url
    users = page.locator(".message.user .bubble").all_inner_texts()
    assert users[0] == "hi there" and "show me something nasty" in users
    assert page.locator(".heartbeat-turn .hb-header").count() >= 1
    assert page.locator(".markdown", has_text="tick tock").count() >= 1
    assert _answer_after(page, "show me something nasty") == EVIL
    assert _answer_after(page, "hi there") == "Hello! Here is bold, code and a list:onetwo"
    assert page.locator("#messages script, #messages img").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("#conversation-list .conversation.selected").count() == 1
    page.screenshot(path=str(tmp_path / "web-chat.png"))
    page.set_viewport_size({"width": 420, "height": 800})  # a phone: the list hides behind a button
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().right <= 0")
    assert page.locator("#toggle-sidebar").is_visible() and page.locator("#input").is_visible()
    page.screenshot(path=str(tmp_path / "web-chat-narrow.png"))
    page.click("#toggle-sidebar")
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
    assert page.locator("#conversation-list .conversation.selected").is_visible()
    assert page.errors == []


HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "**<b onmouseover=alert(1)>bold</b>** and `<i>code</i>`",
    "[click](javascript:window.__pwned=3) [data](data:text/html,<script>x</script>) [ok](https://example.com/a?b=<c>)",
    '```html\n<iframe src="https://evil.example"></iframe>\n```',
    '# <svg onload=alert(1)>\n- <a href="javascript:x">list</a>\n> <style>body{display:none}</style>',
]
RICH = ("Docs are at https://example.com/docs?page=2 for you.\n\n"
        "```python\ndef add(a, b):\n    return a + b\n```\n\n" + "\n\n".join(HOSTILE))


def test_an_answer_shows_bare_links_highlighted_code_with_copy_and_hostile_markup_as_text(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any,
) -> None:
    page = browser_page
    fake_model_env.rule(contains="links and code", reply=RICH)
    logged_in_new_conversation(page, gateway)
    send_text(page, "links and code please")
    page.wait_for_selector(".message.assistant:not(.streaming) .code-block")
    answer = page.locator(".message.assistant .markdown").first
    link = answer.get_by_role("link", name="https://example.com/docs?page=2")
    assert link.get_attribute("href") == "https://example.com/docs?page=2" and link.get_attribute("target") == "_blank"
    block = answer.locator(".code-block").first
    assert block.locator(".code-lang").inner_text() == "python"
    assert block.locator(".hljs-keyword").first.inner_text() == "def"
    copy = block.get_by_role("button", name="Copy")
    copy.click()
    page.wait_for_function("() => document.querySelector('.code-block button').textContent.startsWith('Cop')")
    assert page.get_by_role("button", name="Copy answer").count() == 1
    # hostile input stays text: no element made from it, no link but the http(s) ones
    assert page.locator("#messages script, #messages img, #messages iframe, #messages svg, #messages style").count() == 0
    hrefs = page.evaluate("() => [...document.querySelectorAll('#messages a')].map(a => a.getAttribute('href'))")
    assert hrefs == ["https://example.com/docs?page=2", "https://example.com/a?b=%3Cc%3E"]
    text = answer.inner_text()
    for shown in ("<script>window.__pwned = 1</script>", '<img src=x onerror="window.__pwned = 2">',
                  "<b onmouseover=alert(1)>bold</b>", '<iframe src="https://evil.example"></iframe>'):
        assert shown in text
    assert page.evaluate("() => window.__pwned") is None
    assert page.errors == []


def test_a_dangerous_command_waits_for_the_approve_button_and_shows_as_a_command_line(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any, tmp_path: Path,
) -> None:
    page = browser_page
    target = tmp_path / "approved"
    target.mkdir()
    command = f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"
    fake_model_env.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": command})), "Cleaned up.")
    logged_in_new_conversation(page, gateway)
    send_text(page, "clean up")
    card = page.wait_for_selector(".approval")
    assert "terminal" in card.inner_text() and "mkfs.ext4" in card.inner_text()
    page.wait_for_function("() => /denied automatically in/.test(document.querySelector('.approval-countdown').textContent)")
    assert not (target / "ran").exists()  # nothing runs before the click
    page.click(".approval button.primary")
    page.wait_for_selector(".approval.approved")
    page.wait_for_selector("details.tool[data-done]")
    assert (target / "ran").exists()
    line = page.inner_text("details.tool summary code")
    assert line == f"$ {command}"
    assert not page.locator("details.tool pre.tool-result").is_visible()  # collapsed until opened
    page.click("details.tool summary")
    assert page.locator("details.tool pre.tool-result").is_visible()
    page.wait_for_function("() => document.body.textContent.includes('Cleaned up.')")
    assert page.locator(".approval button:enabled").count() == 0
    assert page.errors == []


def test_the_page_reconnects_after_a_gateway_restart_and_keeps_working(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any,
) -> None:
    page = browser_page
    fake_model_env.rule(contains="before", reply="Answer before the restart.")
    fake_model_env.rule(contains="after", reply="Answer after the restart.")
    conversation = logged_in_new_conversation(page, gateway)
    send_text(page, "before")
    page.wait_for_function("() => document.body.textContent.includes('Answer before the restart.')")
    gateway.stop()
    page.wait_for_function("() => /reconnecting/.test(document.getElementById('connection').textContent)")
    gateway.start()
    page.wait_for_function("() => document.getElementById('connection').textContent === ''", timeout=60_000)
    send_text(page, "after")
    page.wait_for_function("() => document.body.textContent.includes('Answer after the restart.')")
    assert page.evaluate("() => location.hash.slice(1)") == conversation
    users = page.locator(".message.user .bubble").all_inner_texts()
    assert users == ["before", "after"]


def test_messages_sent_during_a_turn_wait_below_it_and_each_shows_once_next_to_its_answer(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any,
) -> None:
    page = browser_page
    fake_model_env.rule(contains="slow one", reply=Reply.text("slow answer that takes a while", chunk_delay=0.1))
    fake_model_env.rule(contains="queued one", reply="answer one")
    fake_model_env.rule(contains="queued two", reply="answer two")
    logged_in_new_conversation(page, gateway)
    send_text(page, "slow one")
    page.wait_for_selector(".message.assistant.streaming")
    send_text(page, "queued one")
    send_text(page, "queued two")
    page.wait_for_function("() => document.querySelectorAll('.message.user:not(.pending)').length === 3")
    assert _rows(page)[-2:] == [("user", "queued one"), ("user", "queued two")]  # waiting below the turn
    page.wait_for_selector(".message.assistant:not(.streaming) >> text=answer two")
    expected = [
        ("user", "slow one"), ("assistant", "slow answer that takes a while"),
        ("user", "queued one"), ("assistant", "answer one"),
        ("user", "queued two"), ("assistant", "answer two"),
    ]
    assert _rows(page) == expected  # each once, next to its answer, as the history has them
    page.reload()
    page.wait_for_selector(".message.assistant >> text=answer two")
    assert _rows(page) == expected
    assert page.errors == []


def _rows(page: Any) -> list[tuple[str, str]]:
    """(kind, text) of each row of the conversation as shown."""
    return [tuple(row) for row in page.evaluate("""() => [...document.querySelectorAll('#messages > .message')]
        .map(r => [r.classList.contains('user') ? 'user' : r.classList.contains('assistant') ? 'assistant' : 'notice',
                   (r.querySelector('.bubble') || r).textContent.trim()])""")]


def test_upload_shift_enter_and_search_from_the_page(
    gateway: WebGateway, fake_model_env: FakeModelServer, browser_page: Any, tmp_path: Path,
) -> None:
    page = browser_page
    fake_model_env.set_default_reply("Got it.")
    logged_in_new_conversation(page, gateway)
    document, unwanted = tmp_path / "report.txt", tmp_path / "draft.txt"
    document.write_text("quarterly numbers")
    unwanted.write_text("not this one")
    page.set_input_files("#upload-input", [str(document), str(unwanted)])
    # each file a chip with its name and size, removable before sending; nothing uploaded yet
    chips = page.locator("#attachments .chip")
    assert chips.locator(".chip-name").all_inner_texts() == ["report.txt", "draft.txt"]
    assert chips.locator(".chip-size").all_inner_texts() == ["17 B", "12 B"]
    page.get_by_role("button", name="Remove draft.txt").click()
    assert chips.count() == 1
    assert not list(gateway.home.rglob("report.txt"))
    page.fill("#input", "first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line about walruses")
    assert page.input_value("#input") == "first line\nsecond line about walruses"  # not sent yet
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.body.textContent.includes('Got it.')")
    sent = "first line\nsecond line about walruses\n\nI uploaded report.txt (17 B) into the working directory."
    assert page.locator(".message.user .bubble").all_inner_texts() == [sent]
    assert fake_model_env.requests[-1].last_user_text == sent
    [uploaded] = gateway.home.rglob("report.txt")
    assert uploaded.read_text() == "quarterly numbers" and not list(gateway.home.rglob("draft.txt"))
    assert str(uploaded.parent) not in page.inner_text("body")  # no server path shown
    assert page.input_value("#input") == "" and chips.count() == 0
    page.click("#new-conversation")
    page.wait_for_function("() => document.querySelectorAll('#conversation-list .conversation').length === 2")
    page.keyboard.press("Control+K")
    assert page.evaluate("() => document.activeElement.id") == "search"
    page.keyboard.type("walruses")
    page.wait_for_function("() => document.querySelectorAll('#conversation-list .conversation').length === 1")
    page.wait_for_selector("#conversation-list .conv-snippet mark")
    assert page.inner_text("#conversation-list .conv-snippet mark") == "walruses"
    page.fill("#search", "no such words anywhere")
    page.wait_for_selector("#conversation-list .empty-list")
    assert page.errors == []
