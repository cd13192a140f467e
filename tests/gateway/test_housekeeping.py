"""A gateway running for months keeps its inbox and outbox small: answered messages and sent
replies older than ``gateway.keep_days`` go when it starts (and every few hours), while what is
recent, still pending or set aside stays, and a redelivery of a recent message is still known."""

from __future__ import annotations

import time

from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import ANSWERED, NewOutbound, RouteKey

CHAT = RouteKey("chat", "keep")
DAY = 86_400.0


async def test_old_answered_messages_and_sent_replies_go_and_the_rest_stays(make_gateway: GatewayFactory) -> None:
    h = await make_gateway(start=False, keep_days=30)
    tables = h.store.gateway
    now = time.time()
    long_ago, lately = now - 40 * DAY, now - 2 * DAY

    old, _ = tables.inbox_accept(CHAT, "old", "a question from last season", received_at=long_ago)
    old_reply = tables.inbox_finish(old.id, ANSWERED, now=long_ago, reply=NewOutbound(CHAT, "its answer"))
    assert old_reply is not None
    tables.outbox_sent(old_reply.id, now=long_ago)
    recent, _ = tables.inbox_accept(CHAT, "recent", "a question from this week", received_at=lately)
    recent_reply = tables.inbox_finish(recent.id, ANSWERED, now=lately, reply=NewOutbound(CHAT, "its answer"))
    assert recent_reply is not None
    tables.outbox_sent(recent_reply.id, now=lately)
    waiting, _ = tables.inbox_accept(CHAT, "waiting", "never answered yet", received_at=long_ago)

    await h.gateway.start()
    await eventually(lambda: tables.inbox_get(old.id) is None, what="the old entry pruned")
    assert all(entry.id != old_reply.id for entry in tables.outbox_list())
    assert tables.inbox_get(recent.id).status == ANSWERED
    assert any(entry.id == recent_reply.id for entry in tables.outbox_list())
    assert tables.inbox_get(waiting.id) is not None  # pending at start: answered now, never pruned unanswered
    assert any("older than 30 day(s)" in line for line in h.lines)

    again = await h.gateway.receive(Inbound(CHAT, "recent", "a question from this week"))
    assert again.duplicate and again.inbox_id == recent.id
