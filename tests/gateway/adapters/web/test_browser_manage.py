"""The web chat's conversation controls in Debian's Chromium, against one real gateway and one
browser for the module: rename, archive (with Undo, and the archived list) and delete (after a
confirmation) from the list and the header; the heartbeat set, changed, paused, resumed and
cleared from controls, and its "nothing changed" answers folded; /stop against /suspend while
an answer streams; the messages waiting behind an answer, numbered, each with Remove; a
/background task's answer shown as a marked note; Retry on an answer that failed. Every change is checked where it is kept, through the API."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from tests.gateway.process import history, wait_for
from tests.gateway.adapters.web.conftest import WebGateway, module_gateway, user_texts
from tests.gateway.adapters.web.browsing import BROWSER_TESTS, log_in, send_text
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = BROWSER_TESTS

LONG_ANSWER = "Counting sheep: " + " ".join(f"sheep{n}" for n in range(400))


@pytest.fixture(scope="module")
def shared(fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebGateway]:
    with module_gateway(fake_model_session, tmp_path_factory, "browser-manage") as running:
        yield running


@pytest.fixture
def page(shared: WebGateway, fake_model: FakeModelServer, open_page: Callable[..., Any]) -> Any:
    opened = open_page()
    log_in(opened, shared)
    opened.wait_for_selector("#conversation-list > *")  # the page has started
    return opened


def _new_conversation(page: Any) -> str:
    before = page.evaluate("() => location.hash")
    page.click("#new-conversation")
    page.wait_for_function("(before) => location.hash.length > 1 && location.hash !== before", arg=before)
    return page.evaluate("() => decodeURIComponent(location.hash.slice(1))")


def _answer_shown(page: Any, answer: str) -> None:
    page.wait_for_selector(f".message.assistant:not(.streaming) >> text={answer}")


def _answered(page: Any, text: str, answer: str) -> None:
    send_text(page, text)
    _answer_shown(page, answer)


def _list_item(page: Any, conversation: str) -> Any:
    return page.locator(f"#conversation-list .conv-item:has(.conversation[data-id='{conversation}'])")


def _menu(page: Any, opener: Any, item: str) -> None:
    opener.click()
    page.get_by_role("menuitem", name=item).click()


def test_rename_archive_with_undo_and_delete_after_a_confirmation(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    fake_model.set_default_reply("Lisbon is lovely in May.")
    api = shared.api()
    conversation = _new_conversation(page)
    _answered(page, "plan a trip to Lisbon", "Lisbon is lovely in May.")

    # Rename from the header's menu: a dialog that refuses an empty title.
    _menu(page, page.get_by_role("button", name="Conversation actions"), "Rename…")
    field = page.get_by_role("textbox", name="Title")
    field.fill("   ")
    page.get_by_role("button", name="Rename").click()
    page.wait_for_selector(".dialog-error:text('The title must not be empty.')")
    field.fill("Lisbon in May")
    field.press("Enter")
    page.wait_for_function("() => document.getElementById('title').textContent === 'Lisbon in May'")
    assert history(api, conversation)["title"] == "Lisbon in May"
    _list_item(page, conversation).locator(".conv-title:text('Lisbon in May')").wait_for()

    # Archive from the list: it leaves the list; Undo brings it back.
    item = _list_item(page, conversation)
    _menu(page, item.get_by_role("button", name="Actions for Lisbon in May"), "Archive")
    item.wait_for(state="detached")
    assert history(api, conversation)["archived"] is True
    page.get_by_role("button", name="Undo").click()
    _list_item(page, conversation).wait_for()
    assert history(api, conversation)["archived"] is False

    # Archived again, it is in the archived list, and Unarchive brings it back.
    _menu(page, _list_item(page, conversation).get_by_role("button", name="Actions for Lisbon in May"), "Archive")
    _list_item(page, conversation).wait_for(state="detached")
    page.get_by_role("button", name="Archived").click()
    page.wait_for_selector("#conversation-list .conv-group:text('Archived · 1')")
    _menu(page, _list_item(page, conversation).get_by_role("button", name="Actions for Lisbon in May"), "Unarchive")
    page.wait_for_selector("#conversation-list >> text=No archived conversations.")
    page.get_by_role("button", name="Archived").click()
    _list_item(page, conversation).wait_for()
    assert history(api, conversation)["archived"] is False

    # Delete asks first: Cancel keeps it, Delete removes it for good.
    _menu(page, page.get_by_role("button", name="Conversation actions"), "Delete…")
    dialog = page.get_by_role("dialog", name="Delete conversation?")
    assert "“Lisbon in May” and its 2 messages will be deleted for good" in dialog.inner_text()
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    assert api.get(f"/api/conversations/{conversation}").status_code == 200
    _menu(page, page.get_by_role("button", name="Conversation actions"), "Delete…")
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    _list_item(page, conversation).wait_for(state="detached")
    page.wait_for_selector("#empty .suggestions")  # the welcome screen, not a dead conversation
    assert page.evaluate("() => location.hash") == ""
    assert api.get(f"/api/conversations/{conversation}").status_code == 404
    assert page.errors == []


def test_the_heartbeat_is_set_changed_paused_resumed_and_cleared_from_controls(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    api = shared.api()
    conversation = _new_conversation(page)
    badge = page.locator("#heartbeat")
    assert not badge.is_visible()
    _menu(page, page.get_by_role("button", name="Conversation actions"), "Set a heartbeat…")
    page.get_by_role("textbox", name="Every").fill("every day")
    page.get_by_role("textbox", name="Instruction").fill("look at the inbox")
    page.get_by_role("button", name="Set heartbeat").click()
    page.wait_for_selector(".dialog-error:text('Write the interval as a number and a unit')")
    page.get_by_role("textbox", name="Every").fill("2h")
    page.get_by_role("textbox", name="Quiet hours (optional)").fill("22:00-07:00")
    page.get_by_role("button", name="Set heartbeat").click()
    badge.wait_for(state="visible")
    assert "every 2h" in badge.inner_text()
    shown = history(api, conversation)["heartbeat"]
    assert shown["interval"] == 7200 and shown["quiet"] == "22:00-07:00"

    def panel(button: str) -> None:
        page.click("#hb-toggle")
        page.locator("#hb-panel").get_by_role("button", name=button).click()

    panel("Pause")
    page.wait_for_selector("#heartbeat.paused")
    assert history(api, conversation)["heartbeat"]["status"] == "paused"
    panel("Resume")
    page.wait_for_selector("#heartbeat:not(.paused)")
    assert history(api, conversation)["heartbeat"]["status"] == "active"
    panel("Change…")
    assert page.get_by_role("textbox", name="Instruction").input_value() == "look at the inbox"
    page.get_by_role("textbox", name="Every").fill("30m")
    page.get_by_role("button", name="Change").click()
    page.wait_for_function("() => /every 30m/.test(document.getElementById('hb-summary').textContent)")
    shown = history(api, conversation)["heartbeat"]
    assert shown["interval"] == 1800 and shown["quiet"] == "22:00-07:00"  # its options are kept
    assert "Quiet 22:00-07:00." in page.locator("#hb-details").text_content()
    panel("Clear")
    badge.wait_for(state="hidden")
    assert history(api, conversation)["heartbeat"] is None
    assert page.errors == []


def test_stop_keeps_the_conversation_and_its_heartbeat_and_suspend_puts_it_aside(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    api = shared.api()
    fake_model.rule(contains="count sheep", reply=Reply.text(LONG_ANSWER, chunk_delay=0.05))
    fake_model.rule(contains="still there", reply="Still here.")
    conversation = _new_conversation(page)
    send_text(page, "/heartbeat every 1h say tick")
    page.locator("#heartbeat").wait_for(state="visible")
    streaming = "() => /sheep3/.test(document.querySelector('.message.assistant.streaming')?.textContent)"

    send_text(page, "count sheep please")
    page.wait_for_function(streaming)
    send_text(page, "/stop")
    page.wait_for_selector(".message.assistant .turn-cancelled")
    page.wait_for_selector(".notice.command >> text=Stopped the answer. The conversation and its heartbeat go on.")
    _answered(page, "are you still there?", "Still here.")
    shown = history(api, conversation)
    assert shown["id"] == conversation and not shown["ended"] and shown["heartbeat"]["status"] == "active"
    assert page.locator("#heartbeat").is_visible()

    send_text(page, "count sheep again")
    page.wait_for_function("() => document.querySelectorAll('.message.assistant .turn-cancelled').length === 1"
                           " && /sheep3/.test(document.querySelector('.message.assistant.streaming')?.textContent)")
    send_text(page, "/suspend")
    page.wait_for_selector(".notice >> text=This conversation was suspended")
    page.locator("#heartbeat").wait_for(state="hidden")
    assert page.locator(".message.assistant .turn-cancelled").count() == 2
    shown = history(api, conversation)
    assert shown["ended"] and shown["heartbeat"] is None
    assert page.errors == []


def _waiting(page: Any) -> list[tuple[str, str]]:
    """(text, label) of each message shown as waiting behind the answer, top to bottom."""
    return [tuple(row) for row in page.evaluate("""() => [...document.querySelectorAll('#messages > .message.user.queued')]
        .map(r => [r.querySelector('.bubble').textContent, r.querySelector('.queue-label').textContent])""")]


def test_messages_waiting_behind_an_answer_are_numbered_and_one_is_removed_with_its_button(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    api = shared.api()
    fake_model.rule(contains="build slowly", reply=Reply.text(LONG_ANSWER, chunk_delay=0.05))
    fake_model.rule(contains="run the tests", reply="All green.")
    fake_model.rule(contains="tidy up", reply="Tidied.")
    conversation = _new_conversation(page)
    send_text(page, "build slowly")
    page.wait_for_selector(".message.assistant.streaming")
    for text in ("run the tests", "deploy", "tidy up"):
        send_text(page, text)
    page.wait_for_function("() => document.querySelectorAll('.message.user.queued').length === 3")
    assert _waiting(page) == [("run the tests", "Queued #1"), ("deploy", "Queued #2"), ("tidy up", "Queued #3")]
    page.get_by_role("button", name="Remove waiting message 2: deploy").click()
    page.wait_for_selector(".toast >> text=Withdrew “deploy”: it will not be answered.")
    page.wait_for_function("() => document.querySelectorAll('.message.user.queued').length === 2")
    assert _waiting(page) == [("run the tests", "Queued #1"), ("tidy up", "Queued #2")]
    assert [w["text"] for w in history(api, conversation)["waiting"]] == ["run the tests", "tidy up"]

    page.reload()  # drawn again from the conversation's waiting list
    page.wait_for_function("() => document.querySelectorAll('.message.user.queued').length === 2")
    assert _waiting(page) == [("run the tests", "Queued #1"), ("tidy up", "Queued #2")]
    page.click("#stop")
    _answer_shown(page, "Tidied.")
    assert _waiting(page) == []
    users = user_texts(api, conversation)
    assert users == ["build slowly", "run the tests", "tidy up"]
    assert page.errors == []


def test_a_heartbeat_that_found_nothing_changed_is_one_quiet_line_that_opens(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    fake_model.rule(contains="check the deploy", reply="HEARTBEAT_OK", times=1)
    fake_model.rule(contains="check the deploy", reply="The deploy failed.")
    _new_conversation(page)
    send_text(page, "/heartbeat every 2s check the deploy")
    _answer_shown(page, "The deploy failed.")
    send_text(page, "/heartbeat clear")
    page.locator("#heartbeat").wait_for(state="hidden")

    def shown() -> list[str]:
        return page.evaluate("""() => [...document.querySelectorAll('#messages > .message')].map(r =>
            r.classList.contains('heartbeat-fold') ? 'fold: ' + r.querySelector('.fold-text').textContent + (r.open ? ' (open)' : '')
            : r.classList.contains('heartbeat-turn') ? 'heartbeat' : r.classList.contains('assistant') ? 'answer: ' + r.textContent.trim()
            : r.classList.contains('user') ? 'you' : 'notice')""")

    expected = ["you", "notice", "fold: Heartbeat: nothing changed", "heartbeat", "answer: The deploy failed.Copy", "you", "notice"]
    assert shown() == expected
    fold = page.locator(".heartbeat-fold")
    assert not fold.locator(".message.assistant").is_visible()
    fold.locator("summary").click()
    assert fold.locator(".message.assistant").inner_text().startswith("HEARTBEAT_OK")
    assert fold.locator(".hb-prompt").inner_text() == "check the deploy"
    page.reload()  # the history (which keeps no commands) folds it the same way
    page.wait_for_selector(".heartbeat-fold")
    assert shown() == expected[2:5]
    assert page.errors == []


def test_a_background_tasks_answer_is_a_marked_note_not_an_answer(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    fake_model.rule(contains="capital of Peru", reply="Lima, on the **Pacific** coast.")
    conversation = _new_conversation(page)
    send_text(page, "/btw what is the capital of Peru?")
    note = page.locator("#messages > .background-note")
    note.wait_for()
    assert note.get_attribute("aria-label") == "Background task"
    assert note.locator(".note-status").inner_text() == "answered"
    assert note.locator(".note-prompt").inner_text() == "“what is the capital of Peru?”"
    assert note.locator(".bubble strong").inner_text() == "Pacific"
    assert page.locator(".reply-notice").count() == 0  # its copy for the chat is not shown again
    api = shared.api()
    wait_for(lambda: [m for m in history(api, conversation)["messages"] if m["role"] == "note"], what="the note stored")
    page.reload()  # the history shows it the same way
    page.locator("#messages > .background-note .note-status").wait_for()
    assert page.locator("#messages > .background-note").count() == 1
    assert page.locator("#messages > .background-note .bubble").inner_text() == "Lima, on the Pacific coast."
    assert page.errors == []


def test_retry_sends_an_answer_that_failed_again(shared: WebGateway, fake_model: FakeModelServer, page: Any) -> None:
    api = shared.api()
    fake_model.queue(Reply.error(400, "This model does not take messages about kites"))
    fake_model.rule(contains="kites", reply="Kites fly best in steady wind.")
    conversation = _new_conversation(page)
    send_text(page, "tell me about kites")
    notice = page.locator(".reply-notice", has_text="The model refused this message")
    notice.wait_for()
    retry = notice.get_by_role("button", name="Retry: send the message again")
    retry.click()
    _answer_shown(page, "Kites fly best in steady wind.")
    assert retry.is_disabled()
    users = user_texts(api, conversation)
    assert users == ["tell me about kites", "tell me about kites"]
    assert page.errors == []


def test_keyboard_ctrl_k_searches_enter_sends_and_shift_enter_breaks_the_line(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    fake_model.set_default_reply("Two lines received.")
    api = shared.api()
    conversation = _new_conversation(page)
    page.focus("#input")
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert page.input_value("#input") == "first line\nsecond line"
    page.keyboard.press("Enter")
    _answer_shown(page, "Two lines received.")
    assert user_texts(api, conversation) == ["first line\nsecond line"]
    page.keyboard.press("Control+k")
    assert page.evaluate("() => document.activeElement.id") == "search"
    page.focus("#input")
    page.keyboard.press("Meta+k")
    assert page.evaluate("() => document.activeElement.id") == "search"
    assert page.errors == []


def test_another_page_sees_a_rename_and_a_deletion_at_once(
    shared: WebGateway, fake_model: FakeModelServer, page: Any,
) -> None:
    fake_model.set_default_reply("Noted.")
    api = shared.api()
    conversation = _new_conversation(page)
    _answered(page, "remember the milk", "Noted.")
    assert api.patch(f"/api/conversations/{conversation}", json={"title": "Shopping"}).status_code == 200
    page.wait_for_function("() => document.getElementById('title').textContent === 'Shopping'")
    assert api.delete(f"/api/conversations/{conversation}").status_code == 200
    page.wait_for_selector(".toast >> text=This conversation was deleted.")
    page.wait_for_selector("#empty .suggestions")
    _list_item(page, conversation).wait_for(state="detached")
    assert page.locator("#conversation-menu").is_hidden()
    assert page.errors == []
