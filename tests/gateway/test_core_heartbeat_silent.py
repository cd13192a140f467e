"""A heartbeat's HEARTBEAT_OK in the gateway: pages get the whole turn with ``silent: true``
(and the history marks it), the platform gets nothing of it; real news and a --loud heartbeat
go out as before; an ended heartbeat is announced to pages and platform."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import Inbound
from vigil.store.gateway.gateway_tables import RouteKey

CHAT = RouteKey("chat", "s1")


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")


async def _heartbeat_events(watch, count: int) -> list[dict]:
    seen: list[dict] = []
    while sum(e["type"] == "turn_ended" and e.get("kind") == "heartbeat" for e in seen) < count:
        item = await watch.next(timeout=15)
        assert item is not None, seen
        seen.append(item)
    return seen


async def test_pages_fold_heartbeat_ok_and_the_platform_never_sees_it(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.queue("HEARTBEAT_OK", "Deploy failed.")
    h.fake.set_default_reply("HEARTBEAT_OK")
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1s --for 4s check the deploy"))
    watch = h.gateway.subscribe(receipt.session_id)
    seen = await _heartbeat_events(watch, 2)
    ends = [e for e in seen if e["type"] == "turn_ended" and e.get("kind") == "heartbeat"]
    assert [(e["content"], e.get("silent", False)) for e in ends] == [("HEARTBEAT_OK", True), ("Deploy failed.", False)]
    note = None
    while note is None:
        item = await watch.next(timeout=15)
        assert item is not None
        note = item if item["type"] == "note" else None
    watch.close()
    assert note["reason"] == "ended" and note["text"].startswith("♥ Heartbeat ended")
    await eventually(lambda: any(e.kind == "notice" for e in h.adapter.sent), what="the end told to the platform")
    sent = [(e.kind, e.text) for e in h.adapter.sent if e.kind in ("heartbeat", "notice")]
    assert ("heartbeat", "Deploy failed.") in sent and not any("HEARTBEAT_OK" in text for _, text in sent)
    # the platform saw no live event of the quiet heartbeat turns (no typing, no preview)
    assert not [e for _, e in h.adapter.live_events if e.get("kind") == "heartbeat"]
    view = await h.gateway.conversation(receipt.session_id)
    silent = [m["content"] for m in view["messages"] if m.get("silent")]
    assert "HEARTBEAT_OK" in silent and "Deploy failed." not in silent
    assert any(m["role"] == "note" for m in view["messages"])


async def test_a_loud_heartbeat_streams_and_delivers_heartbeat_ok(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    h.fake.set_default_reply("HEARTBEAT_OK")
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1s --loud check the deploy"))
    await eventually(lambda: any(e.kind == "heartbeat" for e in h.adapter.sent), timeout=15, what="a loud answer")
    assert [e.text for e in h.adapter.sent if e.kind == "heartbeat"][0] == "HEARTBEAT_OK"
    assert [e for _, e in h.adapter.live_events if e.get("kind") == "heartbeat"]
    view = await h.gateway.conversation(receipt.session_id)
    assert view["heartbeat"]["loud"] is True


async def test_the_daily_token_budget_pauses_a_heartbeat_with_a_note(make_gateway: GatewayFactory) -> None:
    from vigil.config.settings import HeartbeatSettings, Settings
    from vigil.testing.scripting import Reply
    from vigil.usage import Usage

    settings = Settings().copy_with(update={"heartbeat": HeartbeatSettings(daily_token_budget=10_000)})
    h = await make_gateway(settings=settings)
    h.fake.set_default_reply(Reply.text("HEARTBEAT_OK", usage=Usage(4_000, 0, 0, 10)))
    receipt = await h.gateway.receive(Inbound(CHAT, "1", "/heartbeat every 1s check the deploy"))
    await eventually(lambda: any(e.kind == "notice" for e in h.adapter.sent), timeout=20, what="the budget note")
    [notice] = [e.text for e in h.adapter.sent if e.kind == "notice"]
    assert notice.startswith("♥ Heartbeat paused (every 1s): its turns used 12,030 tokens") and "(3 turns)" in notice
    heartbeat = h.gateway.heartbeat_repo.get(receipt.session_id)
    assert not heartbeat.active and heartbeat.paused_by == "budget" and heartbeat.fire_count == 3
    assert len(h.fake.requests) == 3  # paused before a fourth turn
