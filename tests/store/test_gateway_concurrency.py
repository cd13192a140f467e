"""Concurrent gateway table writes on every backend: threads on stores of their own (as
separate processes would be) delivering or finishing the same messages, or claiming the same
outbox, at once. The SQLite test with two real processes is in test_concurrency."""

from __future__ import annotations

import random
import threading

from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import ANSWERED, FAILED, PENDING, SENT, NewOutbound, RouteKey

from .conftest import StoreFactory
from .gateway_support import WEB


def test_concurrent_accepts_of_one_message_store_it_once(store_factory: StoreFactory) -> None:
    """Threads on four stores of their own (four processes, as far as the database can tell)
    deliver the same messages in different orders: each is stored once, and exactly one
    delivery of each hears ``True``."""
    stores = [store_factory() for _ in range(4)]
    ids = [f"update-{n}" for n in range(40)]
    threads_per_store = 2
    barrier = threading.Barrier(len(stores) * threads_per_store)
    outcomes: list[tuple[str, int, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def deliver(store: SessionStore, seed: int) -> None:
        order = ids[:]
        random.Random(seed).shuffle(order)
        barrier.wait()
        for external_id in order:
            try:
                entry, new = store.gateway.inbox_accept(WEB, external_id, f"text of {external_id}", received_at=1.0)
            except BaseException as exc:  # noqa: BLE001 - every failure is reported
                with lock:
                    errors.append(exc)
                continue
            with lock:
                outcomes.append((external_id, entry.id, new))

    threads = [
        threading.Thread(target=deliver, args=(s, n * threads_per_store + t))
        for n, s in enumerate(stores)
        for t in range(threads_per_store)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for external_id in ids:
        mine = [(entry_id, new) for eid, entry_id, new in outcomes if eid == external_id]
        assert len(mine) == len(threads)
        assert sum(new for _, new in mine) == 1, external_id
        assert len({entry_id for entry_id, _ in mine}) == 1
    assert stores[0].gateway.inbox_counts()[PENDING] == len(ids)


def test_concurrent_finishes_queue_one_reply(store_factory: StoreFactory) -> None:
    stores = [store_factory() for _ in range(3)]
    entry, _ = stores[0].gateway.inbox_accept(WEB, "m1", "hello", received_at=1.0)
    barrier = threading.Barrier(6)
    replies: list[object] = []

    def finish(store: SessionStore, n: int) -> None:
        barrier.wait()
        replies.append(store.gateway.inbox_finish(entry.id, ANSWERED, now=2.0, reply=NewOutbound(WEB, f"reply {n}")))

    threads = [threading.Thread(target=finish, args=(stores[n % 3], n)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queued = [r for r in replies if r is not None]
    assert len(replies) == 6 and len(queued) == 1
    assert stores[1].gateway.outbox_list() == queued


def test_concurrent_claimers_send_each_reply_once_and_each_chat_in_order(store_factory: StoreFactory) -> None:
    """Eight claimers on four stores of their own (as gateways on four machines) drain one
    outbox of 2,000 replies to 40 chats, each sending what it claimed: every reply is claimed
    by exactly one of them, and each chat's replies are sent in the order they were queued."""
    stores = [store_factory() for _ in range(4)]
    chats = [RouteKey("web", f"chat-{n}") for n in range(40)]
    queued = [stores[0].gateway.outbox_add(NewOutbound(chats[n % len(chats)], f"reply {n}"), now=1.0) for n in range(2000)]
    claimers = [(store, f"worker-{n}-{t}") for n, store in enumerate(stores) for t in range(2)]
    barrier = threading.Barrier(len(claimers))
    sent: list[tuple[str, int]] = []
    by_chat: dict[RouteKey, list[int]] = {chat: [] for chat in chats}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claim_and_send(store: SessionStore, worker: str) -> None:
        barrier.wait()
        try:
            while True:
                claimed = store.gateway.outbox_claim(worker, 2.0, limit=25, hold=3600.0)
                if not claimed:
                    if store.gateway.outbox_counts()[PENDING] == 0:
                        return
                    continue  # what is left is claimed by others, or locked this instant
                for entry in claimed:
                    with lock:  # "sent" before the store hears it: the next claimer may follow at once
                        sent.append((worker, entry.id))
                        by_chat[entry.route].append(entry.id)
                    store.gateway.outbox_sent(entry.id, now=3.0)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=claim_and_send, args=claimer) for claimer in claimers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(entry_id for _, entry_id in sent) == [entry.id for entry in queued]
    assert all(ids == sorted(ids) for ids in by_chat.values())
    assert len({worker for worker, _ in sent}) > 1  # they really shared the work
    assert stores[1].gateway.outbox_counts() == {PENDING: 0, SENT: 2000, FAILED: 0}
