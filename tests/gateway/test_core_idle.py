"""Live conversations nobody uses are closed and come back on the next message."""

from __future__ import annotations


from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import RouteKey

CHAT = RouteKey("chat", "i1")


async def test_an_idle_conversation_is_closed_and_comes_back_with_its_history(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.gateway.idle.idle_after = 0.01
    h.fake.queue("first answer", "second answer")
    first = await h.gateway.receive(Inbound(CHAT, "1", "remember the word heron"))
    await eventually(lambda: h.adapter.sent, what="the first answer")
    await eventually(lambda: h.gateway.live == {}, what="the idle conversation closed by the sweeper")
    await eventually(lambda: any("idle conversation" in line for line in h.lines), what="the log line")
    again = await h.gateway.receive(Inbound(CHAT, "2", "which word?"))
    await eventually(lambda: len(h.adapter.sent) == 2, what="the second answer")
    assert again.session_id == first.session_id
    asked = [m["content"] for m in h.fake.requests[-1].body["messages"] if m["role"] == "user"]
    assert asked == ["remember the word heron", "which word?"]


async def test_a_watched_conversation_or_one_with_a_heartbeat_stays_live(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.gateway.idle.idle_after = 0.0  # every conversation not kept is past the bound at once
    await h.gateway.idle.stop()  # swept by hand below
    h.fake.set_default_reply("ok")
    watched = await h.gateway.receive(Inbound(CHAT, "1", "hello"))
    beating_route = RouteKey("chat", "i2")
    beating = await h.gateway.receive(Inbound(beating_route, "2", "/heartbeat every 1h check the deploy"))
    plain = await h.gateway.receive(Inbound(RouteKey("chat", "i3"), "3", "hello"))
    await eventually(lambda: len(h.adapter.sent) == 3, what="three replies")
    watch = h.gateway.subscribe(watched.session_id)
    assert await h.gateway.idle.sweep() == 1
    assert set(h.gateway.live) == {watched.session_id, beating.session_id}
    assert plain.session_id not in h.gateway.live
    watch.close()
    assert await h.gateway.idle.sweep() == 1
    assert set(h.gateway.live) == {beating.session_id}
