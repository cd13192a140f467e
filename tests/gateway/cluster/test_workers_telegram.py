"""Telegram with a poll lease, two in-process gateways on one store: the one holding the lease
polls, the other only sends; a poller whose lease was taken over (it stalled past the lease)
stops polling, and the new poller goes on from the offset in the store."""

from __future__ import annotations

import importlib.util

import pytest

from tests.gateway.adapters.telegram import conftest as telegram_fixtures
from vigil.gateway.cluster.adapter_lease import AdapterLease

pytestmark = pytest.mark.skipif(importlib.util.find_spec("telegram") is None,
                                reason="needs python-telegram-bot (vigil[telegram])")

telegram, make_telegram = telegram_fixtures.telegram, telegram_fixtures.make_telegram
OWNER = telegram_fixtures.OWNER
eventually = telegram_fixtures.eventually


async def test_only_the_lease_holder_polls_and_a_poller_that_lost_it_stops(make_telegram, telegram) -> None:  # noqa: ANN001
    first = await make_telegram(start=False)
    second = await make_telegram(start=False)
    for harness, token in ((first, "w1"), (second, "w2")):
        harness.adapter.poll_lease = AdapterLease(harness.store, "telegram", token=token, seconds=1.5)
    await first.gateway.start()
    await eventually(lambda: first.adapter.health().detail.startswith("polling"), what="the first worker polling")
    await second.gateway.start()
    await eventually(lambda: second.adapter.health().detail.startswith("sending"), what="the second worker sending")
    assert "worker w1 polls" in second.adapter.health().detail

    telegram.message(OWNER, OWNER, "first")
    await eventually(lambda: telegram.texts(OWNER) == ["ok"], what="the first answer")
    assert telegram.max_polls == 1
    offset = first.store.get_meta("telegram.offset")
    assert offset is not None and offset.value >= 2  # every update below it is in the inbox

    # The first worker stalled past its lease, and the second took the lease meanwhile
    # (no await between the two writes: the first cannot renew in between)
    held = first.store.get_meta("adapter-lease:telegram")
    assert held is not None and held.value["token"] == "w1"
    first.store.set_meta("adapter-lease:telegram", {**held.value, "expires_at": 0.0})
    assert second.adapter.poll_lease.take()
    await eventually(lambda: second.adapter.health().detail.startswith("polling"), what="the second worker polling")
    await eventually(lambda: first.adapter.health().detail.startswith("sending"), what="the first worker giving way")
    telegram.message(OWNER, OWNER, "second")
    await eventually(lambda: telegram.texts(OWNER) == ["ok", "ok"], what="the second answer")
    assert telegram.delivered(1) == 1  # the new poller started from the stored offset

    await second.gateway.stop(1.0)  # releases the lease: the first polls again at its next try
    await eventually(lambda: first.adapter.health().detail.startswith("polling"), what="the first worker polling again")
