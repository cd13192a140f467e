"""What people expect in a chat app, on Telegram: the answer appears by editing one message,
``typing`` shows while the agent works, a file sent to the bot is read by the agent, and a
dangerous command waits for its owner's button press."""

from __future__ import annotations

import time

import pytest

from tests.gateway.adapters.telegram.conftest import FRIEND, GROUP, OWNER, STRANGER, Factory, eventually
from vigil.gateway.adapters.base import DeliveryError
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey
from vigil.testing.scripting import Reply, ToolCallSpec


async def test_the_answer_streams_into_one_edited_message_with_typing_shown(make_telegram: Factory) -> None:
    h = await make_telegram()
    words = [f"word{n} " for n in range(12)]
    h.model.queue(Reply.text(words, chunk_delay=0.08))
    h.fake.message(OWNER, OWNER, "stream please")
    [answer] = await h.answered(OWNER, 1)
    assert answer == "".join(words)
    [message] = h.fake.sent(OWNER)
    assert len(message.edits) >= 2, "the answer did not appear progressively"
    assert all(answer.startswith(earlier) for earlier in message.edits)  # every version a prefix
    assert ("typing" in [action for _chat, _thread, action in h.fake.actions(OWNER)])
    edits = [c.at for c in h.fake.calls("editMessageText")]
    gaps = [b - a for a, b in zip(edits, edits[1:-1])]  # the final edit is not throttled
    assert all(gap >= 0.15 for gap in gaps), gaps


async def test_a_quick_answer_arrives_as_one_message_without_a_preview(make_telegram: Factory) -> None:
    """No preview for a turn shorter than an edit interval: nothing a crash could leave shown
    and then send again."""
    h = await make_telegram()
    h.model.queue("Right away.")
    h.fake.message(OWNER, OWNER, "quick one")
    assert await h.answered(OWNER, 1) == ["Right away."]
    [message] = h.fake.sent(OWNER)
    assert message.edits == [] and len(h.fake.calls("sendMessage")) == 1
    assert not h.fake.calls("editMessageText")


async def test_typing_and_streaming_go_to_the_forum_topic(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.queue(Reply.text(["a ", "b ", "c"], chunk_delay=0.1))
    h.fake.message(GROUP, OWNER, "in the topic", chat_type="supergroup", thread_id=5)
    await h.answered(GROUP, 1)
    assert h.fake.texts(GROUP, 5) == ["a b c"]
    assert all(thread == 5 for _chat, thread, _a in h.fake.actions(GROUP))


async def test_a_document_sent_to_the_bot_is_saved_and_read_by_the_agent(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.queue(Reply.tool_calls(ToolCallSpec("read_file", {"path": "notes.txt"})), "The word is pineapple.")
    h.fake.message(OWNER, OWNER, document=("notes.txt", b"the secret word is pineapple\n"), caption="read this")
    assert await h.answered(OWNER, 1) == ["The word is pineapple."]
    first, second = h.model.requests[0].body["messages"], h.model.requests[1].body["messages"]
    user = next(m for m in first if m["role"] == "user")
    assert user["content"].startswith("read this") and "notes.txt" in user["content"]
    assert any(m["role"] == "tool" and "pineapple" in str(m["content"]) for m in second)
    session = h.route_session(RouteKey("telegram", str(OWNER)))
    assert session is not None
    saved = h.gateway.workdir(session) / "notes.txt"
    assert saved.read_bytes() == b"the secret word is pineapple\n" and oct(saved.stat().st_mode)[-3:] == "600"


async def test_a_photo_is_saved_and_a_file_over_the_limit_is_refused(make_telegram: Factory) -> None:
    h = await make_telegram(upload_max_bytes=100)
    h.fake.message(OWNER, OWNER, photo=b"\xff\xd8" + b"x" * 50)
    await h.answered(OWNER, 1)
    h.fake.message(OWNER, OWNER, document=("big.bin", b"y" * 500))
    await h.answered(OWNER, 2)
    texts = [next(m for m in r.body["messages"][::-1] if m["role"] == "user")["content"] for r in h.model.requests]
    assert "saved as" in texts[0] and ".jpg" in texts[0]
    assert "big.bin" in texts[1] and "not saved" in texts[1] and "100 bytes" in texts[1]
    session = h.route_session(RouteKey("telegram", str(OWNER)))
    assert session is not None and not (h.gateway.workdir(session) / "big.bin").exists()


async def test_a_strangers_file_is_not_downloaded(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.fake.message(STRANGER, STRANGER, "hi", document=("x.txt", b"data"))
    await eventually(lambda: h.fake.pending() == 0, what="the update to be taken")
    assert not any(c.method.lower() == "getfile" for c in h.fake.calls())


async def test_a_file_entry_in_the_outbox_is_sent_as_a_document(make_telegram: Factory, tmp_path) -> None:
    h = await make_telegram()
    h.fake.message(OWNER, OWNER, "hello")
    await h.answered(OWNER, 1)
    report = tmp_path / "report.csv"
    report.write_text("a,b\n1,2\n")
    route = RouteKey("telegram", str(OWNER))
    # the store takes kind "file" once the send_file tool lands; the adapter's side of it:
    now = time.time()
    await h.adapter.send(OutboxEntry(7, route, "file", "here is the report", None, None, now, "pending", 0, now,
                                     meta={"path": str(report), "name": "report.csv"}))
    document = [m for m in h.fake.sent(OWNER) if m.kind == "document"]
    assert document[0].file_name == "report.csv" and document[0].content == b"a,b\n1,2\n"
    assert document[0].text == "here is the report"
    gone = OutboxEntry(8, route, "file", "", None, None, now, "pending", 0, now, meta={"path": str(tmp_path / "nope")})
    with pytest.raises(DeliveryError) as refused:
        await h.adapter.send(gone)
    assert not refused.value.retryable


DANGEROUS = "mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"


async def test_an_approval_is_answered_by_its_owner_only(make_telegram: Factory, tmp_path) -> None:
    h = await make_telegram(approval_timeout=60)
    target = tmp_path / "t"
    target.mkdir()
    h.model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": DANGEROUS.format(target=target)})), "Done.")
    h.fake.message(GROUP, OWNER, "clean up the disk", chat_type="supergroup")
    asked = await eventually(lambda: [m for m in h.fake.sent(GROUP) if m.reply_markup], what="the approval buttons")
    buttons = asked[0].reply_markup["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["Approve", "Deny"]
    approve = buttons[0]["callback_data"]
    h.fake.press(GROUP, FRIEND, asked[0].message_id, approve)  # someone else in the group
    refused = await eventually(lambda: h.fake.callback_answers(), what="the refusal")
    assert refused[0]["show_alert"] and "Only the person" in refused[0]["text"]
    assert not (target / "ran").exists()
    h.fake.press(GROUP, OWNER, asked[0].message_id, approve)
    await eventually(lambda: (target / "ran").exists(), what="the approved command")
    assert h.fake.callback_answers()[1]["text"] == "Approved."
    await eventually(lambda: "Done." in h.fake.texts(GROUP), what="the answer")
    await eventually(lambda: "Approved" in h.fake.sent(GROUP)[0].text, what="the request marked approved")
    assert h.fake.sent(GROUP)[0].reply_markup is None


async def test_a_denied_approval_does_not_run(make_telegram: Factory, tmp_path) -> None:
    h = await make_telegram(approval_timeout=60)
    target = tmp_path / "t"
    target.mkdir()
    h.model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": DANGEROUS.format(target=target)})), "Not run.")
    h.fake.message(OWNER, OWNER, "clean up")
    asked = await eventually(lambda: [m for m in h.fake.sent(OWNER) if m.reply_markup], what="the approval buttons")
    h.fake.press(OWNER, OWNER, asked[0].message_id, asked[0].reply_markup["inline_keyboard"][0][1]["callback_data"])
    await eventually(lambda: "Not run." in h.fake.texts(OWNER), what="the answer")
    assert not (target / "ran").exists()
    assert "Denied" in h.fake.sent(OWNER)[0].text


async def test_an_interrupted_answer_says_it_stopped(make_telegram: Factory) -> None:
    h = await make_telegram(busy="interrupt")
    h.model.queue(Reply.text([f"w{n} " for n in range(60)], chunk_delay=0.05), "Second answer.")
    h.fake.message(OWNER, OWNER, "a long one")
    await eventually(lambda: h.fake.texts(OWNER), what="the preview")
    h.fake.message(OWNER, OWNER, "never mind")
    await eventually(lambda: "Second answer." in h.fake.texts(OWNER) and h.idle(), what="the second answer")
    await eventually(lambda: h.fake.texts(OWNER)[0].endswith("… (stopped)"), what="the stopped preview")
    first, second = h.fake.texts(OWNER)
    assert first.startswith("w0 ") and second == "Second answer."


async def test_an_unknown_user_gets_a_pairing_code_and_no_model_request(make_telegram: Factory) -> None:
    pytest.importorskip("vigil.gateway.authorization", reason="the pairing hook is not in this build yet")
    h = await make_telegram()
    h.fake.message(STRANGER, STRANGER, "let me in", document=("x.txt", b"data"))
    [answer] = await eventually(lambda: h.fake.texts(STRANGER), what="the pairing code")
    assert "vigil pairing approve" in answer
    assert h.model.requests == [] and not h.fake.calls("getFile")
