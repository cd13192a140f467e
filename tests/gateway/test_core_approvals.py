"""Approvals in gateway conversations: a turn stopped while it waits is not reported as a
timeout, and its command does not run."""

from __future__ import annotations

from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import RouteKey
from vigil.testing.scripting import Reply, ToolCallSpec

CHAT = RouteKey("chat", "a1")


async def test_stop_while_an_approval_waits_resolves_it_as_cancelled(make_gateway: GatewayFactory, tmp_path) -> None:
    h = await make_gateway(approval_timeout=600)
    target = tmp_path / "kept"
    target.mkdir()
    h.fake.queue("hi", Reply.tool_calls(ToolCallSpec(
        "terminal", {"command": f"mkfs.ext4 /nonexistent/vigil-device; touch {target}/ran"})))
    first = await h.gateway.receive(Inbound(CHAT, "1", "hello"))
    await eventually(lambda: h.adapter.sent, what="the first answer")
    watch = h.gateway.subscribe(first.session_id)
    await h.gateway.receive(Inbound(CHAT, "2", "clean up"))
    while True:
        item = await watch.next(timeout=15)
        assert item is not None
        if item["type"] == "approval_request":
            break
    await h.gateway.receive(Inbound(CHAT, "3", "/stop"))
    while True:
        item = await watch.next(timeout=15)
        assert item is not None
        if item["type"] == "approval_resolved":
            break
    watch.close()
    assert item["approved"] is False and item["reason"] == "cancelled"
    assert h.gateway.approvals.pending_for(first.session_id) == []
    assert not (target / "ran").exists()
