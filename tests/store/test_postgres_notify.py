"""Notifications between store objects on one PostgreSQL schema (each as another process would
open it): delivered, in order, only within the schema, and back after a lost connection."""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

import pytest

from vigil.store import SQLiteStore, StoreError
from vigil.store.notify import MAX_PAYLOAD, Notifications
from vigil.store.postgres import PostgresStore

from .conftest import drop_schema, terminate_listeners, with_schema

pytestmark = pytest.mark.postgres
WAIT = 10.0  # a guard against a hang; nothing here is timed


class Inbox:
    """A subscriber that keeps what it hears, and counts reconnects."""

    def __init__(self) -> None:
        self.payloads: queue.Queue[str] = queue.Queue()
        self.reconnects = threading.Event()

    def __call__(self, payload: str) -> None:
        self.payloads.put(payload)

    def on_reconnect(self) -> None:
        self.reconnects.set()

    def take(self, count: int) -> list[str]:
        return [self.payloads.get(timeout=WAIT) for _ in range(count)]

    def nothing_more(self) -> bool:
        return self.payloads.empty()


@pytest.fixture
def open_store(pg_url: str) -> Iterator[Callable[..., PostgresStore]]:
    opened: list[PostgresStore] = []

    def make(url: str = pg_url) -> PostgresStore:
        store = PostgresStore(url)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def notifications(store: PostgresStore) -> Notifications:
    found = store.notifications()
    assert isinstance(found, Notifications)
    return found


def test_a_notification_published_by_one_store_reaches_the_others_in_order(open_store) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = open_store(), open_store()
    inbox, own = Inbox(), Inbox()
    notifications(receiver).subscribe("schedule", inbox)
    notifications(sender).subscribe("schedule", own)
    for i in range(50):
        notifications(sender).publish("schedule", f"change {i}")
    assert notifications(sender).flush()
    expected = [f"change {i}" for i in range(50)]
    assert inbox.take(50) == expected
    assert own.take(50) == expected  # the publishing process hears itself too
    assert sender.notifications() is sender.notifications()  # one per store object


def test_channels_and_schemas_are_kept_apart(open_store, postgres_server: str, pg_schema: str) -> None:  # type: ignore[no-untyped-def]
    other_schema = pg_schema + "_other"
    try:
        here, there = open_store(), open_store(with_schema(postgres_server, other_schema))
        same_channel_other_schema, other_channel = Inbox(), Inbox()
        notifications(there).subscribe("schedule", same_channel_other_schema)
        notifications(here).subscribe("other", other_channel)
        marker = Inbox()
        notifications(here).subscribe("schedule", marker)
        notifications(here).publish("schedule", "for this schema only")
        notifications(there).publish("schedule", "for the other schema")
        assert marker.take(1) == ["for this schema only"]
        assert same_channel_other_schema.take(1) == ["for the other schema"]
        assert marker.nothing_more() and other_channel.nothing_more()
    finally:
        drop_schema(postgres_server, other_schema)


def test_an_unsubscribed_callback_hears_nothing_more(open_store) -> None:  # type: ignore[no-untyped-def]
    store = open_store()
    gone, kept = Inbox(), Inbox()
    unsubscribe = notifications(store).subscribe("schedule", gone)
    notifications(store).subscribe("schedule", kept)
    unsubscribe()
    unsubscribe()  # twice is harmless
    notifications(store).publish("schedule", "after")
    assert kept.take(1) == ["after"]
    assert gone.nothing_more()


def test_bad_payloads_and_channel_names_are_refused(open_store) -> None:  # type: ignore[no-untyped-def]
    n = notifications(open_store())
    n.publish("schedule", "é" * (MAX_PAYLOAD // 2))  # exactly the limit in bytes
    with pytest.raises(ValueError, match=f"at most {MAX_PAYLOAD} bytes"):
        n.publish("schedule", "x" * (MAX_PAYLOAD + 1))
    with pytest.raises(ValueError, match="NUL"):
        n.publish("schedule", "a\x00b")
    for bad in ("", "Schedule", "sched-ule", 'x"; DROP', "1st", "x" * 33):
        with pytest.raises(ValueError, match="invalid notification channel"):
            n.publish(bad, "p")
        with pytest.raises(ValueError, match="invalid notification channel"):
            n.subscribe(bad, print)
    assert n.flush()


def test_closing_the_store_sends_what_is_queued_and_stops_the_threads(open_store) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = open_store(), open_store()
    inbox = Inbox()
    notifications(receiver).subscribe("schedule", inbox)
    before = set(threading.enumerate())
    closed = notifications(sender)
    unsubscribe = closed.subscribe("schedule", Inbox())
    for i in range(20):
        closed.publish("schedule", str(i))
    sender.close()
    assert inbox.take(20) == [str(i) for i in range(20)]
    assert set(threading.enumerate()) <= before  # the sender's listener and sender threads ended
    sender.close()  # twice is harmless, and so is a late unsubscribe
    unsubscribe()
    with pytest.raises(StoreError, match="closed"):
        closed.publish("schedule", "too late")


def test_a_killed_listener_connection_comes_back(open_store, postgres_server: str) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = open_store(), open_store()
    inbox = Inbox()
    notifications(receiver).subscribe("schedule", inbox)
    channel = notifications(receiver).channel_name("schedule")  # type: ignore[attr-defined]
    # The listener's last statement was its LISTEN on this test's own schema.
    assert terminate_listeners(postgres_server, f'LISTEN "{channel}"') == [True]
    assert inbox.reconnects.wait(WAIT)  # listening again: the subscriber may catch up once
    notifications(sender).publish("schedule", "after the outage")
    assert inbox.take(1) == ["after the outage"]


def test_sqlite_has_no_notifications(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = SQLiteStore(tmp_path / "state.db")
    try:
        assert store.notifications() is None
    finally:
        store.close()
