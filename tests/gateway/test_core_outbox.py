"""The outbox under failures: order per chat, and no second delivery after a store error."""

from __future__ import annotations

import asyncio

from tests.gateway.settling import until_settled
from tests.gateway.conftest import GatewayFactory, eventually
from vigil.gateway.adapters.base import DeliveryError, Inbound
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import SENT, OutboxEntry, RouteKey

CHAT = RouteKey("chat", "o1")
OTHER = RouteKey("chat", "o2")


async def test_a_reply_waiting_for_its_retry_keeps_its_place_in_the_chat(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    adapter = h.adapter
    refused: list[str] = []
    record = type(adapter).send

    async def send_refusing_the_first_once(message: OutboxEntry) -> None:
        if message.text == "first answer" and not refused:
            refused.append(message.text)
            raise DeliveryError("rate limited", retryable=True, retry_after=0.5)
        await record(adapter, message)

    adapter.send = send_refusing_the_first_once  # type: ignore[method-assign]
    # By content: the two chats' turns run at once, so their model calls come in either order.
    h.fake.rule(contains="one", reply="first answer")
    h.fake.rule(contains="two", reply="second answer")
    h.fake.rule(contains="elsewhere", reply="other chat answer")
    await h.gateway.receive(Inbound(CHAT, "1", "one"))
    await eventually(lambda: refused, what="the first reply refused")
    await h.gateway.receive(Inbound(CHAT, "2", "two"))
    await h.gateway.receive(Inbound(OTHER, "3", "elsewhere"))
    await eventually(lambda: len(adapter.sent) == 3, what="every reply delivered")
    in_chat = [e.text for e in adapter.sent if e.route == CHAT]
    assert in_chat == ["first answer", "second answer"]
    assert adapter.texts()[0] == "other chat answer"  # another chat does not wait


async def test_a_reply_the_platform_took_is_not_sent_again_when_marking_it_fails(
    make_gateway: GatewayFactory, monkeypatch
) -> None:
    h = await make_gateway()
    tables = h.store.gateway
    real_sent = tables.outbox_sent
    failures = {"left": 1}

    def flaky_sent(*args, **kwargs):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StoreError("database is locked")
        return real_sent(*args, **kwargs)

    monkeypatch.setattr(tables, "outbox_sent", flaky_sent)
    h.fake.queue("only once")
    await h.gateway.receive(Inbound(CHAT, "1", "hello"))
    await eventually(lambda: tables.outbox_counts()[SENT] == 1, what="the reply marked sent")
    await until_settled(h.store)
    assert h.adapter.texts() == ["only once"]


async def test_a_platform_call_that_hangs_is_retried_and_does_not_hold_up_other_chats(
    make_gateway: GatewayFactory,
) -> None:
    h = await make_gateway()
    adapter = h.adapter
    h.gateway.outbox.send_timeout = 0.3
    hung: list[str] = []
    record = type(adapter).send

    async def hang_once(message: OutboxEntry) -> None:
        if message.route == CHAT and not hung:
            hung.append(message.text)
            await asyncio.Event().wait()  # the platform never answers
        await record(adapter, message)

    adapter.send = hang_once  # type: ignore[method-assign]
    h.fake.queue("stuck answer", "other chat answer")
    await h.gateway.receive(Inbound(CHAT, "1", "one"))
    await eventually(lambda: hung, what="the hung send")
    await h.gateway.receive(Inbound(OTHER, "2", "elsewhere"))
    await eventually(lambda: len(adapter.sent) == 2, what="both replies delivered")
    assert sorted(adapter.texts()) == ["other chat answer", "stuck answer"]
    assert any("retrying" in line for line in h.lines)


async def test_a_slow_platform_call_delays_only_its_own_chat(make_gateway: GatewayFactory) -> None:
    h = await make_gateway()
    adapter = h.adapter
    release = asyncio.Event()
    record = type(adapter).send

    async def slow_in_one_chat(message: OutboxEntry) -> None:
        if message.route == CHAT:
            await release.wait()  # a platform taking its time (well inside the send timeout)
        await record(adapter, message)

    adapter.send = slow_in_one_chat  # type: ignore[method-assign]
    h.fake.queue("slow chat answer", "slow chat second", "other chat answer")
    await h.gateway.receive(Inbound(CHAT, "1", "one"))
    await h.gateway.receive(Inbound(CHAT, "2", "two"))
    await eventually(lambda: h.store.gateway.outbox_counts().get("pending", 0) >= 2, what="both slow replies queued")
    await h.gateway.receive(Inbound(OTHER, "3", "elsewhere"))
    await eventually(lambda: adapter.texts() == ["other chat answer"], what="the other chat served meanwhile")
    release.set()
    await eventually(lambda: len(adapter.sent) == 3, what="every reply delivered")
    assert [e.text for e in adapter.sent if e.route == CHAT] == ["slow chat answer", "slow chat second"]


async def test_stopping_the_outbox_waits_for_a_store_call_in_flight(make_gateway: GatewayFactory, monkeypatch) -> None:
    """The store is closed right after the gateway stops: a query still running in a worker
    thread then crashed the process (a segfault in SQLite)."""
    import threading
    import time

    h = await make_gateway()
    tables = h.store.gateway
    real_next_due = tables.outbox_next_due
    inside, finished = threading.Event(), threading.Event()

    def slow_next_due(**kwargs):
        inside.set()
        time.sleep(0.3)
        try:
            return real_next_due(**kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(tables, "outbox_next_due", slow_next_due)
    h.gateway.outbox.wake()
    await eventually(inside.is_set, what="the sender inside a store call")
    await h.gateway.outbox.stop()
    assert finished.is_set()
