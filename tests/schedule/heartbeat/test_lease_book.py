"""Heartbeat ownership leases in the store: who may take one, renewal, release, expiry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vigil.clock import FakeClock
from vigil.schedule.changes import read_generation
from vigil.schedule.heartbeat.lease import (
    GATEWAY,
    REPL,
    LeaseBook,
    holder_key,
    lease_key,
    live_leases,
)
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
from vigil.schedule.polling import TEST_POLL_ENV
from vigil.store import SQLiteStore

SID = "aaaaaaaaaaaa"


def test_a_gateway_takes_only_free_leases_and_a_repl_takes_over(store: SQLiteStore, clock: FakeClock) -> None:
    gateway = LeaseBook(store, clock, kind=GATEWAY, seconds=30)
    repl = LeaseBook(store, clock, kind=REPL, seconds=30)
    assert gateway.take(SID) and gateway.take(SID)  # free, then already its own
    held = gateway.holder(SID)
    assert held is not None and held.kind == GATEWAY and held.pid == os.getpid() and gateway.mine(held)

    before = read_generation(store)
    assert repl.take(SID, force=True)
    assert read_generation(store) != before  # the gateway notices at its next poll
    assert repl.mine(repl.holder(SID)) and repl.holder(SID).kind == REPL
    assert not gateway.take(SID)  # a live REPL lease: the gateway keeps off
    assert gateway.renew([SID]) == set() and repl.renew([SID]) == {SID}


def test_release_only_gives_up_ones_own_lease(store: SQLiteStore, clock: FakeClock) -> None:
    gateway = LeaseBook(store, clock, kind=GATEWAY, seconds=30)
    repl = LeaseBook(store, clock, kind=REPL, seconds=30)
    assert repl.take(SID, force=True)
    assert not gateway.release(SID) and repl.holder(SID) is not None
    before = read_generation(store)
    assert repl.release(SID)
    assert repl.holder(SID) is None and store.get_meta(lease_key(SID)) is None
    assert read_generation(store) != before
    assert not repl.release(SID)  # nothing left to release
    assert gateway.take(SID)


async def test_a_lease_lives_while_its_holder_renews_and_lapses_when_it_stops(store: SQLiteStore, clock: FakeClock) -> None:
    repl = LeaseBook(store, clock, kind=REPL, seconds=30)
    gateway = LeaseBook(store, clock, kind=GATEWAY, seconds=30)
    assert repl.take(SID, force=True)
    written = store.get_meta(lease_key(SID))
    for _ in range(6):  # a minute of renewals every 10 s
        await clock.advance(10)
        assert repl.renew([SID]) == {SID}
    assert not gateway.take(SID)
    # Renewal wrote only the holder's record, not the lease itself.
    assert store.get_meta(lease_key(SID)) == written
    assert store.get_meta(holder_key(repl.token)).value["expires_at"] == clock.now() + 30
    await clock.advance(29)
    assert not gateway.take(SID)
    await clock.advance(2)  # the holder stopped renewing (it died): the lease lapses
    assert gateway.holder(SID) is None
    assert gateway.take(SID) and gateway.holder(SID).kind == GATEWAY


def test_the_lease_of_a_process_that_no_longer_runs_is_free(store: SQLiteStore, clock: FakeClock) -> None:
    dead_pid = {"pid": None}
    repl = LeaseBook(store, clock, kind=REPL, seconds=30)
    assert repl.take(SID, force=True)
    dead_pid["pid"] = repl.pid
    gateway = LeaseBook(
        store, clock, kind=GATEWAY, seconds=30, is_running=lambda host, pid: pid != dead_pid["pid"]
    )
    assert gateway.take(SID)


def test_many_leases_are_taken_in_one_batch_and_held_ones_reported(store: SQLiteStore, clock: FakeClock) -> None:
    ids = [f"{i:012x}" for i in range(200)]
    repl = LeaseBook(store, clock, kind=REPL, seconds=30)
    assert repl.take(ids[7], force=True)
    gateway = LeaseBook(store, clock, kind=GATEWAY, seconds=30)
    result = gateway.take_many(ids)
    assert result.taken == set(ids) - {ids[7]}
    assert set(result.elsewhere) == {ids[7]} and result.elsewhere[ids[7]].kind == REPL
    assert gateway.renew(ids) == set(ids) - {ids[7]}
    assert gateway.release_many(ids) == set(ids) - {ids[7]}
    assert set(live_leases(store, ids, clock.now())) == {ids[7]}


async def test_a_damaged_or_expired_lease_counts_as_free_and_is_swept(store: SQLiteStore, clock: FakeClock) -> None:
    store.set_meta(lease_key("bbbbbbbbbbbb"), {"kind": "martian"})
    old = LeaseBook(store, clock, kind=REPL, seconds=30)
    assert old.take(SID, force=True)
    await clock.advance(60)
    gateway = LeaseBook(store, clock, kind=GATEWAY, seconds=30)
    assert gateway.holder("bbbbbbbbbbbb") is None and gateway.holder(SID) is None
    assert gateway.sweep() == 3  # two leases and the dead holder's record
    assert store.list_meta("heartbeat-lease") == []
    assert gateway.take("bbbbbbbbbbbb")


def test_a_lease_book_has_a_known_kind(store: SQLiteStore, clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="repl, gateway"):
        LeaseBook(store, clock, kind="cron")


def test_two_stores_on_one_file_see_each_others_leases(db_path: Path, clock: FakeClock) -> None:
    first, second = SQLiteStore(db_path), SQLiteStore(db_path)
    try:
        assert LeaseBook(first, clock, kind=REPL).take(SID, force=True)
        assert not LeaseBook(second, clock, kind=GATEWAY).take(SID)
    finally:
        first.close()
        second.close()


def test_the_test_only_poll_variable_shortens_polls_and_leases(
    store: SQLiteStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert HeartbeatScheduler(store, clock=clock).poll_interval == 15.0
    assert LeaseBook(store, clock, kind=REPL).seconds == 30.0
    monkeypatch.setenv(TEST_POLL_ENV, "0.5")
    assert HeartbeatScheduler(store, clock=clock).poll_interval == 0.5
    assert HeartbeatScheduler(store, clock=clock, poll_interval=0).poll_interval == 0  # no watcher stays none
    book = LeaseBook(store, clock, kind=REPL)
    assert book.seconds == 1.5 and book.renew_every == 0.5
    monkeypatch.setenv(TEST_POLL_ENV, "soon")  # not a number: ignored
    assert HeartbeatScheduler(store, clock=clock).poll_interval == 15.0
