"""The scheduler without conversations: claims across engines sharing one state.db, the
emergency stop, start-up refunds and changes made by other processes."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.schedule.helpers import inline, settle
from vigil.clock import FakeClock
from vigil.schedule import estop
from vigil.schedule.heartbeat.record import heartbeat_key
from vigil.schedule.heartbeat.repo import STALE_AFTER, HeartbeatRepo, Reservation
from vigil.schedule.heartbeat.scheduler import HOLD_OFF, DirectTarget, HeartbeatScheduler
from vigil.store import SQLiteStore, StoreError

SID = "aaaaaaaaaaaa"


async def _scheduler(store: SQLiteStore, clock: FakeClock, owner: str, fires: list) -> HeartbeatScheduler:
    scheduler = HeartbeatScheduler(store, clock=clock, owner=owner, offload=inline, poll_interval=30)

    def run(reservation: Reservation) -> None:
        fires.append((owner, clock.now(), reservation.heartbeat.fire_count))

    scheduler.own(SID, DirectTarget(scheduler, run))
    await scheduler.start()
    return scheduler


async def test_two_engines_on_one_state_db_fire_every_slot_exactly_once(db_path: Path, clock: FakeClock) -> None:
    stores = [SQLiteStore(db_path, durable=False) for _ in range(2)]
    fires: list[tuple[str, float, int]] = []
    HeartbeatRepo(stores[0], clock).set(SID, "p", 120)
    schedulers = [await _scheduler(s, clock, f"host:{i}:t", fires) for i, s in enumerate(stores)]
    try:
        for _ in range(100):  # 100 x 37 s: about 30 intervals of 120 s
            await clock.advance(37)
            await settle()
        counts = [n for _, _, n in fires]
        # re-anchored at each fire: every 4 steps of 37 s = 148 s, so 25 slots in 3700 s
        assert counts == list(range(1, 26))
        times = [t for _, t, _ in fires]
        assert all(b - a >= 120 for a, b in zip(times, times[1:]))  # never two in one window
        assert {owner for owner, _, _ in fires} <= {"host:0:t", "host:1:t"}
        final = HeartbeatRepo(stores[0], clock).get(SID)
        assert final.fire_count == len(fires) and final.pending is None
        assert sum(s.stats.confirmed for s in schedulers) == len(fires)
    finally:
        for scheduler in schedulers:
            await scheduler.stop()
        for store in stores:
            store.close()


async def test_emergency_stop_refunds_and_release_fires_once(store: SQLiteStore, clock: FakeClock) -> None:
    fires: list = []
    repo = HeartbeatRepo(store, clock)
    hb, _ = repo.set(SID, "p", 60)
    scheduler = await _scheduler(store, clock, "host:1:t", fires)
    try:
        estop.engage(store, clock.now(), reason="test")  # as `vigil pause` from a shell
        await clock.advance(60)
        await settle()
        # Another process engaged it: this scheduler has not looked yet, so it reserves, then
        # refuses at confirmation and refunds.
        assert fires == [] and scheduler.stats.stopped == 1 and scheduler.stats.refunded == 1
        assert repo.get(SID).fire_count == 0 and repo.get(SID).next_due == hb.next_due
        await clock.advance(600)
        await settle()
        assert fires == [] and scheduler.stats.claims == 1  # parked: no reserve/refund churn
        estop.release(store)
        await clock.advance(30)  # the watcher notices within one poll interval
        await settle()
        assert len(fires) == 1 and repo.get(SID).fire_count == 1  # overdue: one fire, no backlog
    finally:
        await scheduler.stop()


async def test_start_up_refunds_orphans_and_sees_changes_from_other_processes(store: SQLiteStore, clock: FakeClock) -> None:
    repo = HeartbeatRepo(store, clock)
    hb, _ = repo.set(SID, "p", 60)
    clock.set_sync(hb.next_due)
    dead = HeartbeatRepo(store, clock, owner=f"{socket.gethostname()}:999999999:gone").reserve(SID)
    assert dead is not None
    fires: list = []
    scheduler = await _scheduler(store, clock, "host:1:t", fires)
    try:
        assert scheduler.stats.orphans_refunded == 1
        await settle()
        assert len(fires) == 1 and repo.get(SID).fire_count == 1  # the refunded slot fires now
        other = HeartbeatRepo(store, clock, owner="h:2:x")
        other.set(SID, "replaced elsewhere", 3600)
        await clock.advance(30)  # watcher: generation changed -> re-read
        await settle()
        assert scheduler.known(SID).prompt == "replaced elsewhere"
        assert scheduler.next_fire(SID) == clock.now() - 30 + 3600
        other.clear(SID)
        await clock.advance(30)
        await settle()
        assert scheduler.next_fire(SID) is None and store.get_meta(heartbeat_key(SID)) is None
    finally:
        await scheduler.stop()


async def test_a_claim_cancelled_mid_reservation_is_refunded(store: SQLiteStore, clock: FakeClock) -> None:
    import asyncio

    repo = HeartbeatRepo(store, clock)
    hb, _ = repo.set(SID, "p", 60)
    gate = asyncio.Event()

    async def slow_store(fn, *args):  # type: ignore[no-untyped-def]
        if fn == scheduler.repo.reserve:
            await gate.wait()  # the reservation is written only after the caller gave up
        return fn(*args)

    scheduler = HeartbeatScheduler(store, clock=clock, owner="host:1:t", offload=slow_store, poll_interval=0)
    scheduler.own(SID, DirectTarget(scheduler))
    clock.set_sync(hb.next_due)
    claim = asyncio.ensure_future(scheduler.claim(SID))
    await settle()
    claim.cancel()
    await settle()
    gate.set()
    await settle()
    assert claim.cancelled()
    after = repo.get(SID)
    assert after.fire_count == 0 and after.pending is None and after.next_due == hb.next_due
    assert scheduler.stats.refunded == 1


class _FlakyStore(SQLiteStore):
    """Heartbeat compare-and-sets fail with a transient error while ``failures`` lasts."""

    failures = 0

    def compare_and_set_meta(self, key, expected, new):  # type: ignore[no-untyped-def]
        if self.failures and key.startswith("heartbeat:"):
            self.failures -= 1
            raise StoreError("database is locked")
        return super().compare_and_set_meta(key, expected, new)


class _RefundingTarget(DirectTarget):
    """Claims, then gives the slot back (preparation rejected) while the store is failing."""

    def __init__(self, scheduler: HeartbeatScheduler, store: _FlakyStore, failures: int) -> None:
        super().__init__(scheduler)
        self.store, self.failures = store, failures

    async def _fire(self, session_id: str) -> None:
        reservation = await self.scheduler.claim(session_id)
        if reservation is not None:
            self.store.failures = self.failures
            await self.scheduler.refund(reservation, failed=True)
            self.store.failures = 0


async def _flaky_setup(db_path: Path, clock: FakeClock, failures: int):  # type: ignore[no-untyped-def]
    store = _FlakyStore(db_path, durable=False)
    scheduler = HeartbeatScheduler(
        store, clock=clock, poll_interval=0, offload=inline, retry_delays=(0, 0, 0)
    )
    hb, _ = scheduler.repo.set(SID, "watch", 60)
    scheduler.own(SID, _RefundingTarget(scheduler, store, failures))
    await scheduler.start()
    await clock.advance(60)
    await settle()
    return store, scheduler, hb


async def test_a_refund_hit_by_a_transient_store_error_is_retried(db_path: Path, clock: FakeClock) -> None:
    store, scheduler, hb = await _flaky_setup(db_path, clock, failures=2)
    try:
        after = scheduler.repo.get(SID)
        assert after.pending is None and after.fire_count == 0 and scheduler.stats.refunded == 1
        fires: list = []
        scheduler.own(SID, DirectTarget(scheduler, run=fires.append))
        await clock.advance(HOLD_OFF)  # the failed attempt is retried after the hold-off
        await settle()
        assert len(fires) == 1 and scheduler.repo.get(SID).fire_count == 1
    finally:
        await scheduler.stop()
        store.close()


async def test_a_slot_whose_refund_failed_for_good_neither_spins_nor_sticks(db_path: Path, clock: FakeClock) -> None:
    store, scheduler, hb = await _flaky_setup(db_path, clock, failures=100)
    try:
        stuck = scheduler.repo.get(SID)
        assert stuck.pending is not None and stuck.pending.owner == scheduler.repo.owner
        fires: list = []
        scheduler.own(SID, DirectTarget(scheduler, run=fires.append))
        wakeups = scheduler.engine.stats.wakeups
        for _ in range(9):  # the next nine minutes: the slot is blocked by our own reservation
            await clock.advance(60)
            await settle()
        assert fires == []
        # tried again every HOLD_OFF seconds, not in a tight loop
        assert scheduler.stats.not_due <= 9 * 60 / HOLD_OFF + 1
        assert scheduler.engine.stats.wakeups - wakeups <= 2 * (9 * 60 / HOLD_OFF) + 2
        await clock.set(stuck.pending.reserved_at + STALE_AFTER)
        await settle()
        await clock.advance(HOLD_OFF)
        await settle()
        # stale: reclaimed (refunded and reserved again), fired once, counted once
        final = scheduler.repo.get(SID)
        assert len(fires) == 1 and final.fire_count == 1 and final.pending is None
    finally:
        await scheduler.stop()
        store.close()
