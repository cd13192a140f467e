"""Two gateways' outbox senders on one PostgreSQL store (two stores on one schema, as two
machines would open it), each with a platform of its own that records what it is handed:
every reply goes out once, each chat's in order, and what a worker that died had claimed is
sent by the other once its claims lapse."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Iterator

import pytest

from tests.gateway.conftest import eventually
from tests.store import conftest as store_fixtures
from vigil.clock import FakeClock
from vigil.gateway.outbox import OutboxSender
from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import FAILED, PENDING, SENT, NewOutbound, OutboxEntry, RouteKey
from vigil.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

# The PostgreSQL server and a fresh schema per test, as the store tests have them.
postgres_server = store_fixtures.postgres_server
pg_schema = store_fixtures.pg_schema
pg_url = store_fixtures.pg_url

CHATS = [RouteKey("chat", f"chat-{n}") for n in range(30)]


class Platform:
    """Takes replies and records them in one log shared by every worker's platform (the
    people in the chats see one stream); after ``dies_after`` replies it never answers
    again (its gateway hangs mid-send)."""

    def __init__(self, worker: str, log: list[tuple[str, OutboxEntry]], dies_after: int | None = None) -> None:
        self.worker = worker
        self.log = log
        self.dies_after = dies_after
        self.hung: list[OutboxEntry] = []
        self.taken = 0

    async def send(self, message: OutboxEntry) -> None:
        if self.dies_after is not None and self.taken >= self.dies_after:
            self.hung.append(message)
            await asyncio.Event().wait()
        self.taken += 1
        await asyncio.sleep(0)  # a platform call: other chats and the other worker go on meanwhile
        self.log.append((self.worker, message))

    def mine(self) -> list[OutboxEntry]:
        return [entry for worker, entry in self.log if worker == self.worker]


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[SessionStore]]:
    opened: list[SessionStore] = [PostgresStore(pg_url), PostgresStore(pg_url)]
    yield opened
    for store in opened:
        store.close()


def sender(store: SessionStore, platform: Platform, clock: FakeClock) -> OutboxSender:
    return OutboxSender(
        store, {"chat": platform}, clock, attempts=5, report=lambda *_: None, worker=platform.worker  # type: ignore[dict-item]
    )


def queue(store: SessionStore, clock: FakeClock, per_chat: int) -> list[OutboxEntry]:
    return [
        store.gateway.outbox_add(NewOutbound(chat, f"{chat.chat} reply {n}"), now=clock.now())
        for n in range(per_chat)
        for chat in CHATS
    ]


def check_once_and_in_order(log: list[tuple[str, OutboxEntry]], queued: list[OutboxEntry]) -> None:
    assert sorted(entry.id for _, entry in log) == [entry.id for entry in queued]
    by_chat: dict[RouteKey, list[int]] = defaultdict(list)
    for _, entry in log:
        by_chat[entry.route].append(entry.id)
    assert all(ids == sorted(ids) for ids in by_chat.values())


async def worker_dies_mid_send(
    stores: list[SessionStore], clock: FakeClock, log: list[tuple[str, OutboxEntry]]
) -> tuple[list[OutboxEntry], OutboxSender]:
    """300 replies queued; worker-a claims them, sends 100, hangs on the next and dies: its
    claims on the 200 it did not send stay behind. Returns the queued replies and its sender."""
    dying = Platform("worker-a", log, dies_after=100)
    queued = queue(stores[0], clock, 10)
    first = sender(stores[0], dying, clock)
    first.start()
    first.wake()
    await eventually(lambda: len(dying.mine()) == 100 and dying.hung, what="the first worker hung mid-send")
    await first.stop()
    assert stores[1].gateway.outbox_counts()[PENDING] == 200
    return queued, first


async def test_two_workers_send_each_reply_once_and_each_chat_in_order(stores: list[SessionStore]) -> None:
    clock = FakeClock()
    log: list[tuple[str, OutboxEntry]] = []
    platforms = [Platform("worker-a", log), Platform("worker-b", log)]
    senders = [sender(store, platform, clock) for store, platform in zip(stores, platforms)]
    for running in senders:
        running.start()
    queued: list[OutboxEntry] = []
    try:
        for _wave in range(10):  # replies keep coming while both workers send
            queued += await asyncio.to_thread(queue, stores[0], clock, 1)
            for running in senders:
                running.wake()
            await asyncio.sleep(0.01)
        await eventually(lambda: len(log) >= len(queued), what="every reply sent")
    finally:
        for running in senders:
            await running.stop()
    check_once_and_in_order(log, queued)
    assert stores[1].gateway.outbox_counts()[SENT] == len(queued) == 300
    assert all(platform.mine() for platform in platforms)  # they really shared the work


async def test_what_a_dead_worker_claimed_is_sent_by_the_other_once_its_claims_lapse(
    stores: list[SessionStore],
) -> None:
    clock = FakeClock()
    log: list[tuple[str, OutboxEntry]] = []
    queued, first = await worker_dies_mid_send(stores, clock, log)

    other = sender(stores[1], Platform("worker-b", log), clock)
    await other.drain()
    assert len(log) == 100  # the dead worker's claims still hold: nothing is sent twice
    await clock.advance(first.hold)
    await other.drain()
    check_once_and_in_order(log, queued)
    assert len(log) == 300 and {worker for worker, _ in log[100:]} == {"worker-b"}
    assert stores[1].gateway.outbox_counts() == {PENDING: 0, SENT: 300, FAILED: 0}


async def test_what_a_worker_found_gone_had_claimed_is_sent_at_once_by_another(stores: list[SessionStore]) -> None:
    clock = FakeClock()
    log: list[tuple[str, OutboxEntry]] = []
    queued, _first = await worker_dies_mid_send(stores, clock, log)
    # Releasing nobody's, or a live worker's that holds nothing, changes nothing.
    assert stores[1].gateway.outbox_release([]) == 0 and stores[1].gateway.outbox_release(["worker-b"]) == 0
    for bad in ("", None):
        with pytest.raises((TypeError, ValueError)):
            stores[1].gateway.outbox_release([bad])  # type: ignore[list-item]

    # Its process is gone: the other worker releases its claims and sends at once, in order.
    assert stores[1].gateway.outbox_release(["worker-a"]) == 200
    other = sender(stores[1], Platform("worker-b", log), clock)
    await other.drain()
    check_once_and_in_order(log, queued)
    assert len(log) == 300 and {worker for worker, _ in log[100:]} == {"worker-b"}
    assert stores[1].gateway.outbox_counts() == {PENDING: 0, SENT: 300, FAILED: 0}
    assert stores[0].gateway.outbox_release(["worker-a"]) == 0  # nothing pending is claimed any more
