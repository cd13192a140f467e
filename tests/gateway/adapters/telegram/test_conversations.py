"""Telegram conversations through the real gateway: private chats, groups (one conversation
per person), forum topics, slash commands and long answers, against the fake Bot API."""

from __future__ import annotations

from tests.gateway.adapters.telegram.conftest import FRIEND, GROUP, OWNER, Factory, eventually
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.scripting import Reply


async def test_a_private_message_is_answered_in_its_chat(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.rule(contains="capital of France", reply="Paris.")
    h.fake.message(OWNER, OWNER, "What is the capital of France?")
    assert await h.answered(OWNER, 1) == ["Paris."]
    inbox = h.store.gateway.inbox_get(1)
    assert inbox is not None and inbox.sender == str(OWNER) and inbox.route == RouteKey("telegram", str(OWNER))
    assert h.adapter.health().state == "connected"


async def test_in_a_group_each_person_has_their_own_conversation(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.rule(contains="I am Ann", reply="Hello Ann.")
    h.model.rule(contains="I am Bob", reply="Hello Bob.")
    h.fake.message(GROUP, OWNER, "I am Ann", chat_type="supergroup")
    await h.answered(GROUP, 1)
    h.fake.message(GROUP, FRIEND, "I am Bob", chat_type="supergroup")
    assert await h.answered(GROUP, 2) == ["Hello Ann.", "Hello Bob."]
    ann = h.route_session(RouteKey("telegram", str(GROUP), "", str(OWNER)))
    bob = h.route_session(RouteKey("telegram", str(GROUP), "", str(FRIEND)))
    assert ann and bob and ann != bob
    # Bob's conversation never saw Ann's message
    last = h.model.requests[-1].body["messages"]
    assert not any("I am Ann" in str(m.get("content")) for m in last)


async def test_a_shared_group_conversation_when_configured(make_telegram: Factory) -> None:
    h = await make_telegram(telegram_overrides={"group_per_user": False})
    h.fake.message(GROUP, OWNER, "one", chat_type="group")
    await h.answered(GROUP, 1)
    h.fake.message(GROUP, FRIEND, "two", chat_type="group")
    await h.answered(GROUP, 2)
    assert h.route_session(RouteKey("telegram", str(GROUP))) is not None
    assert any("one" in str(m.get("content")) for m in h.model.requests[-1].body["messages"])


async def test_each_forum_topic_is_a_conversation_answered_in_its_topic(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.model.rule(contains="deploy", reply="Deploy topic answer.")
    h.model.rule(contains="lunch", reply="Lunch topic answer.")
    h.fake.message(GROUP, OWNER, "about the deploy", chat_type="supergroup", thread_id=7)
    await h.answered(GROUP, 1)
    h.fake.message(GROUP, OWNER, "about lunch", chat_type="supergroup", thread_id=9)
    await h.answered(GROUP, 2)
    assert h.fake.texts(GROUP, 7) == ["Deploy topic answer."]
    assert h.fake.texts(GROUP, 9) == ["Lunch topic answer."]
    seven = h.route_session(RouteKey("telegram", str(GROUP), "7", str(OWNER)))
    nine = h.route_session(RouteKey("telegram", str(GROUP), "9", str(OWNER)))
    assert seven and nine and seven != nine


async def test_slash_commands_reach_the_registry_and_are_in_the_menu(make_telegram: Factory) -> None:
    h = await make_telegram()
    names = {c["command"] for c in h.fake.commands()}
    assert {"heartbeat", "hb", "new", "status", "help"} <= names
    h.fake.message(GROUP, OWNER, "/hb@vigil_test_bot every 10m check the deploy", chat_type="supergroup")
    [reply] = await h.answered(GROUP, 1)
    assert "10m" in reply or "10 min" in reply, reply
    session = h.route_session(RouteKey("telegram", str(GROUP), "", str(OWNER)))
    assert session is not None and h.gateway.heartbeat_repo.get(session) is not None
    assert h.model.requests == []  # a command, not a turn


async def test_a_command_for_another_bot_is_ignored(make_telegram: Factory) -> None:
    h = await make_telegram()
    h.fake.message(GROUP, OWNER, "/new@some_other_bot", chat_type="supergroup")
    h.fake.message(GROUP, OWNER, "hello", chat_type="supergroup")
    await h.answered(GROUP, 1)
    assert h.store.gateway.inbox_get(2) is None  # only one message reached the gateway


async def test_a_long_answer_is_split_at_the_limit_and_sent_in_order(make_telegram: Factory) -> None:
    h = await make_telegram()
    answer = "\n\n".join(f"Paragraph {n}: " + "word " * 300 for n in range(8))
    h.model.queue(Reply.text(answer))
    h.fake.message(OWNER, OWNER, "tell me everything")
    await eventually(lambda: "".join(h.fake.texts(OWNER)) == answer and h.idle(), what="the whole answer")
    texts = h.fake.texts(OWNER)
    # about 12,000 characters: two paragraphs per message, cut between paragraphs
    assert len(texts) == 4 and all(len(t) <= 4096 for t in texts)
    assert all(t.startswith("Paragraph ") for t in texts) and all(t.endswith("\n\n") for t in texts[:-1])


async def test_markdown_in_an_answer_is_sent_as_plain_text(make_telegram: Factory) -> None:
    h = await make_telegram()
    tricky = "Use *bold*, _this_ and <b>not html</b> & [a link](http://x.y) - done."
    h.model.queue(Reply.text(tricky))
    h.fake.message(OWNER, OWNER, "format something")
    assert await h.answered(OWNER, 1) == [tricky]
    assert all(m.parse_mode is None for m in h.fake.sent(OWNER))


async def test_a_heartbeat_set_from_a_topic_fires_into_that_topic(make_telegram: Factory, monkeypatch) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h = await make_telegram()
    h.model.rule(contains="check the deploy", reply="Deploy is green.")
    h.fake.message(GROUP, OWNER, "/heartbeat every 1s check the deploy", chat_type="supergroup", thread_id=4)
    await eventually(lambda: "Deploy is green." in h.fake.texts(GROUP, 4), timeout=20, what="a heartbeat answer")
    assert h.fake.texts(GROUP, None) == []  # nothing outside the topic
