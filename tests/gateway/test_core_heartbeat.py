"""Heartbeats in the gateway: a fire that never reaches the agent is refunded, counted and
logged; a heartbeat turn cannot ask for an approval."""

from __future__ import annotations

from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.gateway.metrics import GatewayMetrics
from vigil.schedule import estop
from vigil.store.gateway.gateway_tables import RouteKey

CHAT = RouteKey("chat", "h1")


async def test_a_fire_stopped_by_the_emergency_stop_is_refunded_counted_and_logged(
    make_gateway: GatewayFactory, monkeypatch
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h = await make_gateway()
    metrics = GatewayMetrics()
    h.gateway.metrics = metrics
    h.fake.set_default_reply("ok")
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1s check the deploy"))
    await eventually(lambda: h.adapter.sent, what="the heartbeat set")
    estop.engage(h.store, h.gateway.clock.now(), reason="test")
    asked = len(h.fake.requests)
    await eventually(lambda: any("slot refunded" in line for line in h.lines), what="a refund logged")
    heartbeat = h.gateway.heartbeat_repo.get(receipt.session_id)
    assert heartbeat.fire_count == 0 and heartbeat.pending is None
    assert len(h.fake.requests) == asked  # the agent never ran
    assert b"vigil_gateway_heartbeat_refunds_total 0.0" not in metrics.exposition()
    assert b"vigil_gateway_heartbeat_refunds_total" in metrics.exposition()
    assert not [e for e in h.adapter.sent if e.kind == "heartbeat"]


async def test_a_heartbeat_turn_cannot_ask_for_an_approval(make_gateway: GatewayFactory, monkeypatch, tmp_path) -> None:
    from vigil.testing.scripting import Reply, ToolCallSpec

    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    h = await make_gateway()
    target = tmp_path / "untouched"
    target.mkdir()
    h.fake.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"})),
        "nothing to report",
    )
    h.fake.set_default_reply("quiet")
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1s clean up the disk"))
    watch = h.gateway.subscribe(receipt.session_id)
    seen = []
    while not any(e["type"] == "turn_ended" and e.get("kind") == "heartbeat" for e in seen):
        item = await watch.next(timeout=15)
        assert item is not None
        seen.append(item)
    watch.close()
    assert not [e for e in seen if e["type"] == "approval_request"]
    finished = [e for e in seen if e["type"] == "tool_finished"]
    assert finished and "unattended" in finished[0]["content"]
    assert not (target / "ran").exists()
    assert not [e for e, _ in h.adapter.live_events if e and _["type"] == "approval_request"]


async def test_a_conversation_adopted_for_its_heartbeat_is_not_shown_busy_nor_waited_for(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway()
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1h check the deploy"))
    await eventually(lambda: h.adapter.sent, what="the heartbeat set")
    await h.gateway.stop(1.0)

    again = await make_gateway()  # adopts the heartbeat; its conversation starts when it is due
    await eventually(lambda: receipt.session_id in again.gateway.live, what="the heartbeat adopted")
    view = await again.gateway.conversation(receipt.session_id)
    assert view["busy"] is False
    listed = {c["id"]: c for c in await again.gateway.conversations()}
    assert listed[receipt.session_id]["busy"] is False
    await again.gateway.stop(30.0)
    assert not any("running turn" in line for line in again.lines)

