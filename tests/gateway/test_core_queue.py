"""The gateway core under a busy queue: conversation boundaries (/suspend, /new) with messages
waiting behind them, and slash commands from a platform."""

from __future__ import annotations

import asyncio

from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import ANSWERED, RouteKey
from vigil.testing.scripting import Reply

CHAT = RouteKey("chat", "q1")


async def test_a_message_queued_behind_suspend_is_answered_in_a_new_conversation(make_gateway: GatewayFactory) -> None:
    """/suspend jumps the queue and ends the conversation; the message that was waiting behind
    it must still be answered (in the next conversation), not left for the next start."""
    h = await make_gateway()
    h.fake.queue(Reply.text(["slow "] * 40, chunk_delay=0.1), "answer after suspend")
    first = await h.gateway.receive(Inbound(CHAT, "1", "a long task"))
    await eventually(lambda: h.fake.requests, what="the slow turn running")
    waiting = await h.gateway.receive(Inbound(CHAT, "2", "are you there?"))
    await h.gateway.receive(Inbound(CHAT, "3", "/suspend"))
    await eventually(lambda: "answer after suspend" in h.adapter.texts(), what="the queued message answered")
    await eventually(lambda: h.store.gateway.inbox_get(waiting.inbox_id).status == ANSWERED, what="entry finished")
    new_session = h.store.gateway.route_get(CHAT)
    assert new_session is not None and new_session != first.session_id
    users = [m.content for m in h.store.get_messages(new_session) if m.role == "user"]
    assert users == ["are you there?"]
    assert h.store.get_session(first.session_id).is_ended


async def test_after_suspend_the_next_message_starts_one_new_conversation(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.set_default_reply("ok")
    first = await h.gateway.receive(Inbound(CHAT, "1", "hello"))
    await eventually(lambda: len(h.adapter.sent) == 1, what="the first reply")  # /suspend would interrupt it
    await h.gateway.receive(Inbound(CHAT, "2", "/suspend"))
    await eventually(lambda: len(h.adapter.sent) == 2, what="two replies")
    await eventually(lambda: not h.gateway.all_live(), what="the suspended conversation closed")
    again = await h.gateway.receive(Inbound(CHAT, "3", "hello again"))
    await eventually(lambda: len(h.adapter.sent) == 3, what="the third reply")
    assert again.session_id is not None and again.session_id != first.session_id
    assert h.store.gateway.route_get(CHAT) == again.session_id


async def test_messages_right_after_new_all_go_to_the_new_conversation(make_gateway: GatewayFactory) -> None:
    """A burst "/new", "a", "b", "c": every message after /new lands in one new conversation,
    in order, and the route ends there."""
    h = await make_gateway()
    h.fake.set_default_reply("ok")
    for round_ in range(5):
        base = len(h.adapter.sent)
        start = await h.gateway.receive(Inbound(CHAT, f"{round_}-0", "before"))
        await eventually(lambda: len(h.adapter.sent) == base + 1, what="the first answer")
        await h.gateway.receive(Inbound(CHAT, f"{round_}-new", "/new"))
        receipts = []
        for n in range(3):
            receipts.append(await h.gateway.receive(Inbound(CHAT, f"{round_}-{n + 1}", f"after {n}")))
            await asyncio.sleep(0)
        await eventually(lambda: len(h.adapter.sent) == base + 5, what="every reply of the round")
        route = h.store.gateway.route_get(CHAT)
        assert route != start.session_id
        users = [m.content for m in h.store.get_messages(route) if m.role == "user"]
        assert users == ["after 0", "after 1", "after 2"], f"round {round_}: {users}"
        assert len(h.gateway.live) == 1


async def test_every_listed_slash_command_replies_through_the_outbox(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.set_default_reply("hi")
    await h.gateway.receive(Inbound(CHAT, "0", "hello"))
    await eventually(lambda: len(h.adapter.sent) == 1, what="the first answer")
    commands = ["/help", "/status", "/usage", "/cron", "/hb status", "/heartbeat", "/compress"]
    for n, text in enumerate(commands):
        await h.gateway.receive(Inbound(CHAT, f"c{n}", text))
    await eventually(lambda: len(h.adapter.sent) == 1 + len(commands), what="a reply to every command")
    replies = dict(zip(commands, h.adapter.sent[1:]))
    for text, entry in replies.items():
        assert entry.kind == "command", text
        assert entry.text.strip(), f"{text} replied nothing"
        assert not entry.text.startswith("Unknown command"), f"{text}: {entry.text}"
    assert "/status" in replies["/help"].text
    session_id = h.store.gateway.route_get(CHAT)
    assert session_id[:8] in replies["/status"].text


async def test_quit_from_a_platform_does_not_pretend_to_leave(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    await h.gateway.receive(Inbound(CHAT, "0", "/quit"))
    await eventually(lambda: h.adapter.sent, what="the reply")
    assert h.adapter.sent[0].text != "Bye."
    assert "/suspend" in h.adapter.sent[0].text


async def test_the_queue_depth_gauge_goes_back_to_zero_once_the_queue_drains(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    from vigil.gateway.metrics import GatewayMetrics

    metrics = GatewayMetrics()
    h.gateway.metrics = metrics
    h.fake.queue(Reply.text(["slow "] * 10, chunk_delay=0.05), "two", "three")
    await h.gateway.receive(Inbound(CHAT, "1", "one"))
    await eventually(lambda: h.fake.requests, what="the first turn running")
    await h.gateway.receive(Inbound(CHAT, "2", "two"))
    await h.gateway.receive(Inbound(CHAT, "3", "three"))
    assert b"vigil_gateway_queue_depth 2.0" in metrics.exposition()
    await eventually(lambda: len(h.adapter.sent) == 3, what="every answer")
    await eventually(lambda: b"vigil_gateway_queue_depth 0.0" in metrics.exposition(), what="the gauge at zero")


async def test_concurrent_deliveries_of_one_chat_are_answered_in_arrival_order(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    texts = [f"message {n}" for n in range(12)]
    h.fake.queue(*[f"answer to {t}" for t in texts])
    receipts = await asyncio.gather(*[h.gateway.receive(Inbound(CHAT, f"k{n}", t)) for n, t in enumerate(texts)])
    assert [r.inbox_id for r in receipts] == sorted(r.inbox_id for r in receipts)
    await eventually(lambda: len(h.adapter.sent) == len(texts), what="every answer")
    assert h.adapter.texts() == [f"answer to {t}" for t in texts]
    session_id = h.store.gateway.route_get(CHAT)
    assert [m.content for m in h.store.get_messages(session_id) if m.role == "user"] == texts


async def test_a_slow_chat_does_not_hold_up_another(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.queue(Reply.text(["slow "] * 60, chunk_delay=0.1), "quick answer")
    await h.gateway.receive(Inbound(CHAT, "1", "a long task"))
    await eventually(lambda: h.fake.requests, what="the slow turn running")
    await h.gateway.receive(Inbound(RouteKey("chat", "q-other"), "2", "quick one"))
    await eventually(lambda: h.adapter.texts() == ["quick answer"], what="the other chat answered first")
