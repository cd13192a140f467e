"""Stopping the gateway: running turns get the grace, queued input waits for the next start,
and nothing is reported answered that was not."""

from __future__ import annotations


from tests.gateway.settling import until_settled
from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import ANSWERED, RouteKey
from vigil.testing.scripting import Reply

CHAT = RouteKey("chat", "s1")


async def test_a_turn_finishing_in_the_grace_is_delivered_and_the_queue_waits_for_the_next_start(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway()
    h.fake.queue(Reply.text(["slow "] * 10, chunk_delay=0.05), "answer to the queued one")
    running = await h.gateway.receive(Inbound(CHAT, "1", "a long task"))
    await eventually(lambda: h.fake.requests, what="the slow turn running")
    queued = await h.gateway.receive(Inbound(CHAT, "2", "and then this"))
    await h.gateway.stop(30.0)
    tables = h.store.gateway
    assert h.adapter.texts() == ["slow " * 10]  # sent before stop returned
    assert tables.inbox_get(running.inbox_id).status == ANSWERED
    assert tables.inbox_get(queued.inbox_id).status != ANSWERED
    assert h.gateway.answered == 1
    assert len(h.fake.requests) == 1

    again = await make_gateway()
    await eventually(lambda: again.adapter.sent, what="the queued message answered after the restart")
    await until_settled(again.store)
    assert again.adapter.texts() == ["answer to the queued one"]
    assert tables.inbox_get(queued.inbox_id).status == ANSWERED
    session_id = tables.route_get(CHAT)
    users = [m.content for m in h.store.get_messages(session_id) if m.role == "user"]
    assert users == ["a long task", "and then this"]


async def test_a_turn_past_the_grace_is_interrupted_and_answered_once_at_the_next_start(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway()
    h.fake.queue(Reply.text(["slow "] * 100, chunk_delay=0.1), "the full answer")
    running = await h.gateway.receive(Inbound(CHAT, "1", "a very long task"))
    await eventually(lambda: h.fake.requests, what="the slow turn running")
    await h.gateway.stop(0.2)
    tables = h.store.gateway
    assert tables.inbox_get(running.inbox_id).status != ANSWERED
    assert h.adapter.sent == [] and h.gateway.answered == 0

    again = await make_gateway()
    await eventually(lambda: again.adapter.sent, what="the interrupted message answered after the restart")
    await until_settled(again.store)
    assert again.adapter.texts() == ["the full answer"]
    assert tables.inbox_get(running.inbox_id).status == ANSWERED
