"""The scheduler without conversations: claims across engines sharing one state.db, the
emergency stop, start-up refunds and changes made by other processes."""

from __future__ import annotations

from pathlib import Path

from tests.schedule.helpers import inline, settle
from vigil.clock import FakeClock
from vigil.schedule import estop
from vigil.schedule.heartbeat import heartbeat_key
from vigil.schedule.heartbeat_repo import HeartbeatRepo, Reservation
from vigil.schedule.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import SQLiteStore

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
    dead = HeartbeatRepo(store, clock, owner="vm:999999999:gone").reserve(SID)
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
