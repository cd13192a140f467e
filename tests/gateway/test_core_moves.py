"""A conversation that moves to another session (/resume, /compress) keeps one live object
per session and tells its pages why it moved."""

from __future__ import annotations

from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.scripting import Reply

A = RouteKey("chat", "m-a")
B = RouteKey("chat", "m-b")


async def test_resuming_a_conversation_live_in_another_chat_keeps_one_turn_at_a_time(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway()
    h.fake.queue("a hello", "b hello")
    await h.gateway.receive(Inbound(A, "1", "hello from a"))
    await eventually(lambda: len(h.adapter.sent) == 1, what="a's answer")
    b = await h.gateway.receive(Inbound(B, "2", "hello from b"))
    await eventually(lambda: len(h.adapter.sent) == 2, what="b's answer")
    await h.gateway.receive(Inbound(A, "3", f"/resume {b.session_id}"))
    await eventually(lambda: len(h.adapter.sent) == 3, what="the /resume reply")
    assert len([live for live in h.gateway.all_live() if live.session_id == b.session_id]) == 1
    h.fake.queue(Reply.text(["slow "] * 20, chunk_delay=0.05), "quick answer")
    await h.gateway.receive(Inbound(B, "4", "slow question from b"))
    await eventually(lambda: len(h.fake.requests) == 3, what="b's slow turn running")
    await h.gateway.receive(Inbound(A, "5", "quick question from a"))
    await eventually(lambda: len(h.adapter.sent) == 5, what="both answers")
    history = [(m.role, m.content) for m in h.store.get_messages(b.session_id) if m.role in ("user", "assistant")]
    assert history[-4:] == [
        ("user", "slow question from b"), ("assistant", "slow " * 20),
        ("user", "quick question from a"), ("assistant", "quick answer"),
    ]


async def test_compress_from_a_platform_moves_pages_and_heartbeat_as_a_compression(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway()
    h.fake.set_default_reply("summary of the conversation so far")
    first = await h.gateway.receive(Inbound(A, "1", "hello"))
    await h.gateway.receive(Inbound(A, "1b", "tell me more"))
    await h.gateway.receive(Inbound(A, "1c", "and more"))
    await h.gateway.receive(Inbound(A, "2", "/heartbeat every 1h check the deploy"))
    await eventually(lambda: len(h.adapter.sent) == 4, what="four replies")
    watch = h.gateway.subscribe(first.session_id)
    await h.gateway.receive(Inbound(A, "3", "/compress"))
    moved = None
    while moved is None:
        item = await watch.next(timeout=15)
        assert item is not None
        if item["type"] == "session_moved":
            moved = item
    watch.close()
    await eventually(lambda: len(h.adapter.sent) == 5, what="the /compress reply")
    assert not h.adapter.sent[4].meta.get("is_error"), h.adapter.sent[4].text
    child = moved["new_session_id"]
    assert moved["reason"] == "compression"
    assert h.store.gateway.route_get(A) == child
    assert h.gateway.heartbeat_repo.get(child) is not None  # the heartbeat follows a compression
    assert h.gateway.heartbeat_repo.get(first.session_id) is None
