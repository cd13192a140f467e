"""Crash windows of the gateway core: what start-up finds, and a store that fails while an
answered message is being finished."""

from __future__ import annotations

import asyncio

from tests.gateway.settling import until_settled
from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store import NewMessage, StoreError
from vigil.store.gateway.gateway_tables import ANSWERED, RouteKey

CHAT = RouteKey("chat", "r1")


async def test_an_answer_given_in_the_conversation_after_new_is_not_given_twice(make_gateway: GatewayFactory) -> None:
    """The message was queued behind /new, so its start was recorded in the old session but
    it ran in the new one; the crash came after the answer was stored. Start-up must find
    that answer where the route leads now, not ask the model again."""
    h = await make_gateway(start=False)
    tables = h.store.gateway
    old = h.store.create_session(source="chat", tool_names=())
    new = h.store.create_session(source="chat", tool_names=())
    h.store.end_session(old.id, "new")
    tables.route_set(CHAT, new.id, now=1.0)
    entry, _ = tables.inbox_accept(CHAT, "after-new", "what is 2+2", received_at=1.0)
    tables.inbox_start(entry.id, old.id, now=1.0)
    h.store.append_message(new.id, NewMessage("user", "what is 2+2", meta={"inbox": entry.id}))
    h.store.append_message(new.id, NewMessage("assistant", "4", meta={"stop_reason": "stop"}))
    await h.gateway.start()
    await eventually(lambda: h.adapter.sent, what="the stored answer delivered")
    await until_settled(h.store)
    assert h.adapter.texts() == ["4"]
    assert h.fake.requests == []
    assert tables.inbox_get(entry.id).status == ANSWERED


async def test_an_answer_stored_before_the_start_was_recorded_is_not_given_twice(make_gateway: GatewayFactory) -> None:
    """The turn ran before the "started" mark reached the store (it is written beside the
    turn, not before it) and the crash came then: no session is recorded for the entry."""
    h = await make_gateway(start=False)
    tables = h.store.gateway
    session = h.store.create_session(source="chat", tool_names=())
    tables.route_set(CHAT, session.id, now=1.0)
    entry, _ = tables.inbox_accept(CHAT, "unmarked", "hello", received_at=1.0)
    h.store.append_message(session.id, NewMessage("user", "hello", meta={"inbox": entry.id}))
    h.store.append_message(session.id, NewMessage("assistant", "hi there", meta={"stop_reason": "stop"}))
    await h.gateway.start()
    await eventually(lambda: h.adapter.sent, what="the stored answer delivered")
    await until_settled(h.store)
    assert h.adapter.texts() == ["hi there"]
    assert h.fake.requests == []


async def test_a_store_error_while_finishing_is_retried_and_the_reply_goes_out_now(
    make_gateway: GatewayFactory, monkeypatch
) -> None:
    h = await make_gateway()
    tables = h.store.gateway
    real_finish = tables.inbox_finish
    failures = {"left": 2}

    def flaky_finish(*args, **kwargs):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StoreError("database is locked")
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(tables, "inbox_finish", flaky_finish)
    h.fake.queue("the answer")
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "hello"))
    await eventually(lambda: h.adapter.texts() == ["the answer"], what="the reply after the store recovered")
    assert failures["left"] == 0
    assert tables.inbox_get(receipt.inbox_id).status == ANSWERED
    assert h.gateway.answered == 1


async def test_a_message_stored_while_the_gateway_stops_waits_for_the_next_start(make_gateway: GatewayFactory) -> None:
    """A message whose inbox write was in flight when the stop began is kept, not handed to
    a conversation that is being closed (nor to a new one started after the stop)."""
    h = await make_gateway()
    tables = h.store.gateway
    real_accept = tables.inbox_accept
    entered, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_accept(*args, **kwargs):
        loop.call_soon_threadsafe(entered.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
        return real_accept(*args, **kwargs)

    tables.inbox_accept = slow_accept  # type: ignore[method-assign]
    receiving = asyncio.ensure_future(h.gateway.receive(Inbound(CHAT, "late", "hello")))
    await entered.wait()
    stopping = asyncio.ensure_future(h.gateway.stop(1.0))
    await eventually(lambda: h.gateway.closing, what="the stop begun")
    release.set()
    receipt = await receiving
    await stopping
    del tables.inbox_accept
    assert h.gateway.live == {}  # no conversation started after the stop
    assert tables.inbox_get(receipt.inbox_id).status != ANSWERED
    assert h.fake.requests == []

    again = await make_gateway()
    await eventually(lambda: again.adapter.sent, what="the kept message answered after the restart")
    assert tables.inbox_get(receipt.inbox_id).status == ANSWERED
    assert len(again.fake.requests) == 1


async def test_a_message_stored_but_not_handed_on_is_answered_when_the_platform_sends_it_again(
    make_gateway: GatewayFactory, monkeypatch
) -> None:
    """The inbox write succeeded but routing failed (a store error): the adapter reports the
    error, the platform redelivers, and the redelivery must not be dropped as a duplicate."""
    h = await make_gateway()
    real_resolve = h.gateway.router.resolve
    failures = {"left": 1}

    def flaky_resolve(route):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StoreError("database is locked")
        return real_resolve(route)

    monkeypatch.setattr(h.gateway.router, "resolve", flaky_resolve)
    h.fake.queue("answered at last")
    try:
        await h.gateway.receive(Inbound(CHAT, "m1", "hello"))
    except StoreError:
        pass
    else:
        raise AssertionError("the routing failure was not reported to the adapter")
    again = await h.gateway.receive(Inbound(CHAT, "m1", "hello"))
    assert again.duplicate
    await eventually(lambda: h.adapter.sent, what="the message answered")
    third = await h.gateway.receive(Inbound(CHAT, "m1", "hello"))  # now a true duplicate
    await until_settled(h.store)
    assert third.duplicate
    assert h.adapter.texts() == ["answered at last"] and len(h.fake.requests) == 1
    assert h.store.gateway.inbox_get(again.inbox_id).status == ANSWERED
