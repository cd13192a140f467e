"""Delivery semantics in the gateway core, in-process (real core, real SQLite store, the fake
model over HTTP): a model that is down or busy delays an answer, a refused request fails at
once in words, a message that keeps killing the process or failing the same way is set aside
and can be sent again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.conftest import GatewayFactory, Harness, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import ANSWERED, FAILED, SET_ASIDE, RouteKey
from vigil.testing.scripting import Reply

CHAT = RouteKey("chat", "delivery")
OTHER = RouteKey("chat", "bystander")


def waits(h: Harness) -> list[dict[str, Any]]:
    """The "waiting" live events the platform was shown (the ones saying a next try comes)."""
    return [item for _route, item in h.adapter.live_events if item["type"] == "waiting" and item.get("text")]


def users(h: Harness, route: RouteKey) -> list[str]:
    session_id = h.store.gateway.route_get(route)
    return [m.content for m in h.store.get_messages(session_id) if m.role == "user"]


async def test_a_model_answering_503_for_a_while_delays_the_answer_and_says_so(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(retry_max_delay=0.2)
    h.fake.queue(*[Reply.error(503, "overloaded, try later")] * 4, "here you are")
    receipt = await h.gateway.receive(Inbound(CHAT, "m1", "hello"))
    await eventually(lambda: h.adapter.sent, what="the answer once the model is back")
    assert h.adapter.texts() == ["here you are"]
    assert h.store.gateway.inbox_get(receipt.inbox_id).status == ANSWERED
    shown = waits(h)
    assert len(shown) == 4 and shown[0]["text"].startswith("waiting for the model (retrying, next try in ")
    assert len(h.fake.requests) == 5
    assert users(h, CHAT) == ["hello"]  # asked again, not stored again
    assert any("waits, retrying with back-off" in line and "overloaded" in line for line in h.lines)


async def test_waiting_messages_are_answered_in_order_when_the_model_is_back(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(retry_max_delay=0.2)
    h.fake.queue(*[Reply.error(502, "bad gateway")] * 3)
    h.fake.set_default_reply("fine")
    for n, text in enumerate(["first", "second", "third"]):
        await h.gateway.receive(Inbound(CHAT, f"o{n}", text))
    await eventually(lambda: len(h.adapter.sent) == 3, what="three answers")
    assert users(h, CHAT) == ["first", "second", "third"]
    assert [r.last_user_text for r in h.fake.requests][-3:] == ["first", "second", "third"]


async def test_a_refused_request_fails_at_once_with_a_notice_in_words(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(retry_max_delay=0.2)
    h.fake.queue(Reply.error(400, "this model does not take images"))
    receipt = await h.gateway.receive(Inbound(CHAT, "bad", "look at this"))
    await eventually(lambda: h.adapter.sent, what="the notice")
    [notice] = h.adapter.sent
    assert notice.kind == "notice"
    assert notice.text.startswith("⚠ The model refused this message (HTTP 400: this model does not take images)")
    assert "ModelBadRequest" not in notice.text and "http://" not in notice.text
    assert h.store.gateway.inbox_get(receipt.inbox_id).status == FAILED
    assert len(h.fake.requests) == 1 and waits(h) == []
    assert any(f"message {receipt.inbox_id}" in line and "failed for good" in line for line in h.lines)


async def test_a_retry_window_that_runs_out_fails_the_message_and_says_why(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(retry_window=0.6, retry_max_delay=0.1)
    h.fake.set_default_reply(Reply.error(503, "still down"))
    receipt = await h.gateway.receive(Inbound(CHAT, "w1", "anyone there?"))
    await eventually(lambda: h.adapter.sent, what="the notice")
    [notice] = h.adapter.sent
    assert notice.text.startswith("⚠ vigil stopped trying to answer this message: the model or the store could not "
                                  "be used for 0.6 seconds, the last try failed with: the model endpoint")
    assert h.store.gateway.inbox_get(receipt.inbox_id).status == FAILED
    assert len(h.fake.requests) >= 3
    assert any("retry window (0.6 s) ran out" in line for line in h.lines)


async def test_a_busy_store_during_a_turn_delays_the_answer(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await make_gateway(retry_max_delay=0.1)
    real_append = h.store.append_message
    failures = {"left": 2}

    def busy_append(*args: Any, **kwargs: Any) -> Any:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StoreError("database is locked")
        return real_append(*args, **kwargs)

    monkeypatch.setattr(h.store, "append_message", busy_append)
    await h.gateway.receive(Inbound(CHAT, "s1", "hello"))
    await eventually(lambda: h.adapter.sent, what="the answer once the store is free")
    assert h.adapter.texts() == ["ok"] and users(h, CHAT) == ["hello"]
    assert [item["reason"] for item in waits(h)] == ["transient", "transient"]
    assert all(item["text"].startswith("waiting for the session store (retrying") for item in waits(h))


async def test_a_turn_failing_with_the_same_internal_error_is_set_aside_and_others_go_on(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await make_gateway(retry_max_delay=0.1)
    real_append = h.store.append_message

    def broken_for_one(session_id: str, message: Any, **kwargs: Any) -> Any:
        if message.content == "break things":
            raise RuntimeError("a bug that this message always hits")
        return real_append(session_id, message, **kwargs)

    monkeypatch.setattr(h.store, "append_message", broken_for_one)
    bad = await h.gateway.receive(Inbound(CHAT, "p1", "break things"))
    await h.gateway.receive(Inbound(OTHER, "i1", "hello"))
    await eventually(lambda: len(h.adapter.sent) == 2, what="the notice and the other answer")
    notice = next(e for e in h.adapter.sent if e.route == CHAT)
    assert notice.text.startswith("⚠ vigil set this message aside without answering it: answering it failed again "
                                  "and again with the same error (RuntimeError)")
    assert f"/retry {bad.inbox_id}" in notice.text
    assert h.store.gateway.inbox_get(bad.inbox_id).status == SET_ASIDE
    assert [e.text for e in h.adapter.sent if e.route == OTHER] == ["ok"]
    assert any(f"message {bad.inbox_id}" in line and "set aside as poison" in line for line in h.lines)


async def test_a_message_running_at_three_deaths_in_a_row_is_set_aside_and_retry_sends_it_again(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway(start=False)
    tables = h.store.gateway
    entry, _ = tables.inbox_accept(CHAT, "poison", "crash me", received_at=1.0)
    for _ in range(2):  # two start-ups found it cut off, with nothing else answered meanwhile
        tables.inbox_start(entry.id, "", now=1.0)
        assert tables.inbox_interrupted(entry.id, died=True).status == "pending"
    tables.inbox_start(entry.id, "", now=1.0)  # and the last process died under it too
    tables.inbox_accept(OTHER, "bystander", "hello", received_at=2.0)
    await h.gateway.start()
    await eventually(lambda: len(h.adapter.sent) == 2, what="the notice and the other answer")
    notice = next(e for e in h.adapter.sent if e.route == CHAT)
    assert notice.kind == "notice" and "set this message aside" in notice.text
    assert f"/retry {entry.id}" in notice.text and f"vigil gateway retry {entry.id}" in notice.text
    assert tables.inbox_get(entry.id).status == SET_ASIDE and tables.inbox_get(entry.id).deaths == 3
    assert [r.last_user_text for r in h.fake.requests] == ["hello"]  # it was not run again
    assert any(f"message {entry.id}" in line and "set aside as poison" in line for line in h.lines)

    h.fake.queue("answered at last")
    await h.gateway.receive(Inbound(CHAT, "again", f"/retry {entry.id}"))
    await eventually(lambda: "answered at last" in h.adapter.texts(), what="the answer after /retry")
    assert tables.inbox_get(entry.id).status == ANSWERED
    assert any(f"Message {entry.id} is sent again" in text for text in h.adapter.texts())
    await h.gateway.receive(Inbound(CHAT, "twice", f"/retry {entry.id}"))
    await eventually(lambda: any("was not set aside (it is answered)" in t for t in h.adapter.texts()),
                     what="the refusal of a second /retry")


async def test_a_death_while_other_work_finished_does_not_count_towards_poison(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(start=False)
    tables = h.store.gateway
    slow, _ = tables.inbox_accept(CHAT, "slow", "a long job", received_at=1.0)
    quick, _ = tables.inbox_accept(OTHER, "quick", "a quick one", received_at=1.0)
    for _ in range(2):
        tables.inbox_start(slow.id, "", now=1.0)
        tables.inbox_interrupted(slow.id, died=True)
    assert tables.inbox_get(slow.id).deaths == 2
    tables.inbox_start(slow.id, "", now=5.0)
    tables.inbox_start(quick.id, "", now=5.0)
    tables.inbox_finish(quick.id, ANSWERED, now=6.0)  # answered while the slow one ran
    await h.gateway.start()
    await eventually(lambda: h.adapter.sent, what="the slow one's answer")
    assert h.adapter.texts() == ["ok"]
    assert tables.inbox_get(slow.id).status == ANSWERED
