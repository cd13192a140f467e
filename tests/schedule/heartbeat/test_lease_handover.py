"""Two schedulers, a REPL's and a gateway's, on one state.db with leases: the heartbeat changes
hands when the REPL opens and closes the conversation or dies, and every slot fires once."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest

from tests.schedule.helpers import inline, settle
from vigil.clock import FakeClock
from vigil.schedule.heartbeat.lease import GATEWAY, REPL, LeaseBook, holder_key, lease_key
from vigil.schedule.heartbeat.repo import HeartbeatRepo, Reservation
from vigil.schedule.heartbeat.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import SQLiteStore

SID = "aaaaaaaaaaaa"
INTERVAL = 60
POLL = 15.0
LEASE = 30.0  # renewed every 10 s


class Fires:
    """Every fire that reached execution, by which process."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.log: list[tuple[str, int]] = []

    def by(self, who: str) -> list[int]:
        return [count for name, count in self.log if name == who]

    def counts(self) -> list[int]:
        return [count for _, count in self.log]


class Target(DirectTarget):
    """Fires at once and remembers the sessions it was told it lost."""

    def __init__(self, scheduler: HeartbeatScheduler, fires: Fires, who: str) -> None:
        def run(reservation: Reservation) -> None:
            fires.log.append((who, reservation.heartbeat.fire_count))

        super().__init__(scheduler, run)
        self.lost: list[str] = []

    def heartbeat_lost(self, session_id: str) -> None:
        self.lost.append(session_id)


class Profile:
    """One state.db opened by two 'processes' (a store each), one fake clock."""

    def __init__(self, db_path: Path, clock: FakeClock) -> None:
        self.clock = clock
        self.gateway_store = SQLiteStore(db_path, durable=False)
        self.repl_store = SQLiteStore(db_path, durable=False)
        self.fires = Fires(clock)
        self.gateway_targets: list[Target] = []
        self.schedulers: list[HeartbeatScheduler] = []

    def scheduler(self, store: SQLiteStore, kind: str) -> HeartbeatScheduler:
        book = LeaseBook(store, self.clock, kind=kind, seconds=LEASE)
        scheduler = HeartbeatScheduler(store, clock=self.clock, offload=inline, poll_interval=POLL, leases=book)
        self.schedulers.append(scheduler)
        return scheduler

    async def gateway(self) -> HeartbeatScheduler:
        scheduler = self.scheduler(self.gateway_store, GATEWAY)

        def target_for(session_id: str) -> Target:
            target = Target(scheduler, self.fires, "gateway")
            self.gateway_targets.append(target)
            return target

        scheduler.adopt(target_for)
        await scheduler.start()
        return scheduler

    async def repl(self) -> HeartbeatScheduler:
        """A REPL opening the conversation (as ``Conversation`` does: own, then refresh)."""
        scheduler = self.scheduler(self.repl_store, REPL)
        await scheduler.start()
        scheduler.own(SID, Target(scheduler, self.fires, "repl"))
        await scheduler.refresh(SID)
        return scheduler

    async def run(self, seconds: float, step: float = 5.0) -> None:
        for _ in range(int(seconds / step)):
            await self.clock.advance(step)
            await settle()

    async def close(self) -> None:
        for scheduler in self.schedulers:
            await scheduler.stop()
        self.gateway_store.close()
        self.repl_store.close()


@pytest.fixture
async def profile(db_path: Path, clock: FakeClock) -> AsyncIterator[Profile]:
    profile = Profile(db_path, clock)
    yield profile
    await profile.close()


def _stored_count(profile: Profile) -> int:
    heartbeat = HeartbeatRepo(profile.gateway_store, profile.clock).get(SID)
    assert heartbeat is not None and heartbeat.pending is None
    return heartbeat.fire_count


async def test_the_gateway_adopts_a_free_heartbeat_and_a_repl_takes_it_over(profile: Profile) -> None:
    HeartbeatRepo(profile.repl_store, profile.clock).set(SID, "watch the CI", INTERVAL)
    gateway = await profile.gateway()
    assert gateway.owns(SID) and gateway.leases.holder(SID).kind == GATEWAY
    await profile.run(130)
    assert profile.fires.by("gateway") == [1, 2]

    repl = await profile.repl()
    assert repl.owns(SID) and repl.leases.holder(SID).kind == REPL
    await profile.run(300)
    # The gateway noticed at its next poll and gave the heartbeat up; the REPL fires it.
    assert not gateway.owns(SID) and profile.gateway_targets[0].lost == [SID]
    assert profile.fires.by("gateway") == [1, 2] and profile.fires.by("repl")[:1] == [3]
    assert profile.fires.counts() == list(range(1, len(profile.fires.log) + 1))
    assert _stored_count(profile) == len(profile.fires.log) >= 6


async def test_the_gateway_takes_the_heartbeat_back_when_the_repl_closes(profile: Profile) -> None:
    HeartbeatRepo(profile.repl_store, profile.clock).set(SID, "watch the CI", INTERVAL)
    repl = await profile.repl()
    gateway = await profile.gateway()
    assert not gateway.owns(SID)  # the REPL holds it: nothing to adopt
    await profile.run(130)
    assert profile.fires.by("repl") == [1, 2] and profile.fires.by("gateway") == []

    await repl.stop()  # the REPL closes: its lease is released at once
    assert profile.repl_store.get_meta(lease_key(SID)) is None
    assert profile.repl_store.get_meta(holder_key(repl.leases.token)) is None
    await profile.run(POLL)
    assert gateway.owns(SID)
    await profile.run(200)
    assert profile.fires.by("repl") == [1, 2] and profile.fires.by("gateway")[:1] == [3]
    assert profile.fires.counts() == list(range(1, len(profile.fires.log) + 1))
    assert _stored_count(profile) == len(profile.fires.log)


async def test_the_gateway_adopts_after_a_dead_repls_lease_lapses(profile: Profile) -> None:
    HeartbeatRepo(profile.repl_store, profile.clock).set(SID, "watch the CI", INTERVAL)
    # A REPL took the lease and died without a word: nothing renews it any more.
    assert LeaseBook(profile.repl_store, profile.clock, kind=REPL, seconds=LEASE).take(SID, force=True)
    gateway = await profile.gateway()
    await profile.run(25)
    assert not gateway.owns(SID) and profile.fires.log == []  # still within the lease
    await profile.run(20)  # the lease lapsed at 30 s; the gateway looks every 10 s
    assert gateway.owns(SID)
    await profile.run(60)
    assert profile.fires.by("gateway") == [1]
    assert _stored_count(profile) == 1


async def test_a_repl_stays_the_owner_while_it_renews(profile: Profile) -> None:
    HeartbeatRepo(profile.repl_store, profile.clock).set(SID, "watch the CI", INTERVAL)
    repl = await profile.repl()
    gateway = await profile.gateway()
    await profile.run(600)  # many lease lengths
    assert repl.owns(SID) and not gateway.owns(SID)
    assert profile.fires.by("gateway") == [] and profile.fires.by("repl") == list(range(1, 11))
    assert _stored_count(profile) == 10


async def test_a_repl_opening_another_repls_conversation_takes_it_and_the_first_gives_way(profile: Profile) -> None:
    HeartbeatRepo(profile.repl_store, profile.clock).set(SID, "watch the CI", INTERVAL)
    first = await profile.repl()
    await profile.run(65)
    second = await profile.repl()
    await profile.run(200)
    assert not first.owns(SID) and second.owns(SID)
    assert profile.fires.counts() == list(range(1, len(profile.fires.log) + 1))
    assert profile.fires.by("repl") == profile.fires.counts()


async def test_adopted_heartbeats_are_renewed_with_one_write_per_tick(profile: Profile) -> None:
    ids = [f"{i:012x}" for i in range(100)]
    repo = HeartbeatRepo(profile.gateway_store, profile.clock)
    for sid in ids:
        repo.set(sid, "watch", 3600)
    gateway = await profile.gateway()
    assert all(gateway.owns(sid) for sid in ids)
    leases_before = {e.key: e for e in profile.gateway_store.list_meta("heartbeat-lease:")}
    await profile.run(120)  # four lease lengths: only the holder record was rewritten
    assert {e.key: e for e in profile.gateway_store.list_meta("heartbeat-lease:")} == leases_before
    assert len(gateway.leases.holders(ids)) == 100
    # A heartbeat set now (a generation change) is adopted at the next poll.
    repo.set("bbbbbbbbbbbb", "watch", 3600)
    await profile.run(POLL)
    assert gateway.owns("bbbbbbbbbbbb")


async def test_a_repl_takes_back_what_a_gateway_took_while_it_stalled(profile: Profile) -> None:
    HeartbeatRepo(profile.repl_store, profile.clock).set(SID, "watch the CI", INTERVAL)
    repl = await profile.repl()
    # As if the REPL had not renewed for a lease length and a gateway had adopted it then.
    intruder = LeaseBook(profile.gateway_store, profile.clock, kind=GATEWAY, seconds=LEASE)
    assert intruder.take_many([SID], force=True).taken == {SID}
    await profile.run(15)
    assert repl.owns(SID) and repl.leases.holder(SID).kind == REPL
    await profile.run(120)
    assert profile.fires.by("repl") == [1, 2]
