"""Heartbeat records in the store: set, replace, pause, resume, clear, move, and the run
accounting (reserve, confirm, refund, orphans)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vigil.clock import FakeClock
from vigil.schedule.changes import read_generation
from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError, NoHeartbeat, Route, heartbeat_key
from vigil.schedule.heartbeat.repo import STALE_AFTER, HeartbeatRepo
from vigil.schedule.processes import owner_alive
from vigil.store import SessionStore, SQLiteStore

SID = "aaaaaaaaaaaa"


@pytest.fixture
def repo(store: SQLiteStore, clock: FakeClock) -> HeartbeatRepo:
    return HeartbeatRepo(store, clock)


def test_set_stores_everything_the_spec_lists(repo: HeartbeatRepo, store: SQLiteStore, clock: FakeClock) -> None:
    t0 = clock.now()
    hb, replaced = repo.set(SID, "watch CI", 900, route=Route("slack", "C1", "T9"))
    assert replaced is None
    raw = store.get_meta(heartbeat_key(SID)).value
    assert raw["prompt"] == "watch CI" and raw["interval"] == 900 and raw["status"] == "active"
    assert raw["created_at"] == raw["updated_at"] == t0
    assert raw["next_due"] == t0 + 900 and raw["last_fire"] is None and raw["fire_count"] == 0
    assert raw["version"] == 1 and raw["route"] == {"platform": "slack", "chat": "C1", "thread": "T9"}
    assert raw["pending"] is None
    assert Heartbeat.from_json(raw) == hb == repo.get(SID)


def test_replace_pause_resume_clear_each_change_the_version(repo: HeartbeatRepo, clock: FakeClock) -> None:
    first, _ = repo.set(SID, "one", 600)
    gen = read_generation(repo.store)
    clock.set_sync(clock.now() + 100)
    second, replaced = repo.set(SID, "two", 900)
    assert replaced == first and second.id != first.id and second.version == 2
    assert second.next_due == clock.now() + 900 and second.fire_count == 0
    assert read_generation(repo.store) != gen

    paused, changed = repo.pause(SID)
    assert changed and paused.status == "paused" and paused.next_due is None and paused.version == 3
    again, changed = repo.pause(SID)
    assert not changed and again == paused

    clock.set_sync(clock.now() + 5000)  # far past the old due time: no stale fire on resume
    resumed, changed = repo.resume(SID)
    assert changed and resumed.active and resumed.next_due == clock.now() + 900 and resumed.version == 4
    assert repo.reserve(SID) is None

    assert repo.clear(SID) == resumed
    assert repo.get(SID) is None and repo.clear(SID) is None
    with pytest.raises(NoHeartbeat):
        repo.pause(SID)


def test_reserve_coalesces_missed_intervals_and_re_anchors(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due - 1)
    assert repo.reserve(SID) is None  # not due yet
    clock.set_sync(hb.next_due + 3 * 600 + 17)  # three whole intervals missed
    reservation = repo.reserve(SID)
    assert reservation is not None and reservation.due == hb.next_due
    after = reservation.heartbeat
    assert after.fire_count == 1 and after.last_fire == clock.now() and after.next_due == clock.now() + 600
    assert repo.reserve(SID) is None  # one fire, not a backlog
    assert repo.confirm(reservation)
    assert repo.get(SID).pending is None and repo.get(SID).fire_count == 1


def test_refund_restores_count_and_timer(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due + 5)
    reservation = repo.reserve(SID)
    after = repo.refund(reservation)
    assert after.fire_count == 0 and after.last_fire is None and after.next_due == hb.next_due
    assert after.pending is None
    assert repo.refund(reservation) is None and not repo.confirm(reservation)


def test_refund_after_a_schedule_change_keeps_the_new_timer(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due)
    reservation = repo.reserve(SID)
    repo.pause(SID)  # e.g. `vigil heartbeat pause` from another process
    assert not repo.confirm(reservation)  # the re-check before dispatch fails
    after = repo.refund(reservation)
    assert after.fire_count == 0 and after.status == "paused" and after.next_due is None


def test_replaced_or_cleared_heartbeat_is_not_refunded(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due)
    reservation = repo.reserve(SID)
    new, _ = repo.set(SID, "other", 900)
    assert not repo.confirm(reservation) and repo.refund(reservation) is None
    assert repo.get(SID) == new
    clock.set_sync(new.next_due)
    reservation = repo.reserve(SID)
    repo.clear(SID)
    assert repo.refund(reservation) is None and repo.get(SID) is None


def test_two_repos_never_reserve_the_same_slot(db_path: Path, clock: FakeClock) -> None:
    one = SQLiteStore(db_path, durable=False)
    two = SQLiteStore(db_path, durable=False)
    try:
        a = HeartbeatRepo(one, clock, owner="h:1:a")
        b = HeartbeatRepo(two, clock, owner="h:2:b")
        hb, _ = a.set(SID, "p", 600)
        wins = 0
        for slot in range(5):
            clock.set_sync(hb.next_due + slot * 600)
            got = [r for r in (a.reserve(SID), b.reserve(SID), a.reserve(SID)) if r is not None]
            assert len(got) == 1
            wins += 1
            (a if got[0].heartbeat.pending.owner == "h:1:a" else b).confirm(got[0])
        assert a.get(SID).fire_count == wins == 5
    finally:
        one.close()
        two.close()


def test_a_pending_reservation_blocks_other_claims_until_abandoned(repo: HeartbeatRepo, store: SQLiteStore, clock: FakeClock) -> None:
    other = HeartbeatRepo(store, clock, owner="elsewhere:1:x")
    hb, _ = repo.set(SID, "p", 60)
    clock.set_sync(hb.next_due)
    mine = repo.reserve(SID)
    clock.set_sync(mine.heartbeat.next_due + 1)
    assert other.reserve(SID) is None  # we are between reserving and executing
    clock.set_sync(mine.heartbeat.pending.reserved_at + STALE_AFTER + 1)
    theirs = other.reserve(SID)  # a reservation that old was abandoned: refunded, then reserved
    assert theirs is not None and theirs.heartbeat.fire_count == 1


def test_orphans_of_a_dead_process_are_refunded_on_start_up(store_location: str, shared_store: SessionStore) -> None:
    store = shared_store
    repo = HeartbeatRepo(store)
    hb, _ = repo.set(SID, "p", 60)
    # Make it due, then let a real process reserve the slot and die before executing.
    store.set_meta(heartbeat_key(SID), {**hb.to_json(), "next_due": hb.created_at - 1})
    script = textwrap.dedent(
        f"""
        import os
        from vigil.store import open_store
        from vigil.schedule.heartbeat.repo import HeartbeatRepo
        repo = HeartbeatRepo(open_store({store_location!r}))
        reservation = repo.reserve({SID!r})
        assert reservation is not None
        print(repo.owner, flush=True)
        os._exit(0)  # dies between reserving and executing
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    dead_owner = done.stdout.strip()
    left = repo.get(SID)
    assert left.pending is not None and left.pending.owner == dead_owner and left.fire_count == 1
    assert not owner_alive(dead_owner)

    refunded = repo.refund_orphans()
    assert [h.session_id for h in refunded] == [SID]
    after = repo.get(SID)
    assert after.pending is None and after.fire_count == 0 and after.next_due == hb.created_at - 1


def test_live_owners_keep_their_reservations(repo: HeartbeatRepo, store: SQLiteStore, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due)
    HeartbeatRepo(store, clock, owner="other-host:1:x").reserve(SID)
    assert repo.refund_orphans() == []
    assert repo.refund_orphans(is_alive=lambda owner: False)[0].fire_count == 0


def test_move_follows_the_continuation(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    moved = repo.move(SID, "bbbbbbbbbbbb")
    assert repo.get(SID) is None
    child = repo.get("bbbbbbbbbbbb")
    assert child == moved and child.id == hb.id and child.next_due == hb.next_due
    assert repo.move(SID, "cccccccccccc") is None


def test_damaged_record(repo: HeartbeatRepo, store: SQLiteStore) -> None:
    store.set_meta(heartbeat_key(SID), {"prompt": 3})
    with pytest.raises(HeartbeatError):
        repo.get(SID)
    assert repo.list() == []
    hb, replaced = repo.set(SID, "fixed", 600)  # setting over a damaged record repairs it
    assert replaced is None and repo.get(SID) == hb
    store.set_meta(heartbeat_key(SID), [1, 2])
    repo.clear(SID)
    assert store.get_meta(heartbeat_key(SID)) is None


CHILD = "bbbbbbbbbbbb"


class _Interfering(SQLiteStore):
    """Runs ``interfere()`` once, just before the compare-and-set that deletes the parent's
    record: another process changing the parent between the move's two writes."""

    interfere = None

    def compare_and_set_meta(self, key, expected, new):  # type: ignore[no-untyped-def]
        if self.interfere is not None and new is None and key == heartbeat_key(SID):
            hook, self.interfere = self.interfere, None
            hook()
        return super().compare_and_set_meta(key, expected, new)


def test_move_leaves_exactly_one_owner_when_the_parent_changes_meanwhile(db_path: Path, clock: FakeClock) -> None:
    store = _Interfering(db_path, durable=False)
    repo = HeartbeatRepo(store, clock)
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due)
    other = HeartbeatRepo(store, clock, owner="other-host:1:x")
    store.interfere = lambda: other.reserve(SID)  # a reservation lands between copy and delete
    moved = repo.move(SID, CHILD)
    assert repo.get(SID) is None
    child = repo.get(CHILD)
    # the move was redone from the parent's new record: the reservation moved along
    assert child == moved and child.fire_count == 1 and child.pending.owner == "other-host:1:x"
    store.close()


def test_move_keeps_a_heartbeat_the_continuation_already_has(repo: HeartbeatRepo) -> None:
    repo.set(SID, "parent's", 600)
    own, _ = repo.set(CHILD, "set on the continuation", 900)
    assert repo.move(SID, CHILD) == own
    assert repo.get(SID) is None and repo.get(CHILD) == own


def test_a_move_keeps_the_schedule_version_and_a_pending_reservation_valid(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 600)
    clock.set_sync(hb.next_due)
    reservation = repo.reserve(SID)  # a fire being prepared when compression moves it
    moved = repo.move(SID, CHILD)
    assert moved.version == hb.version and moved.pending.id == reservation.id
    from dataclasses import replace

    assert repo.confirm(replace(reservation, session_id=CHILD))
    assert repo.get(CHILD).fire_count == 1 and repo.get(CHILD).pending is None


def test_own_reservations_are_reclaimed_once_stale(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 60)
    clock.set_sync(hb.next_due)
    assert repo.reserve(SID) is not None  # its refund then failed: it stays pending
    clock.set_sync(hb.next_due + 120)
    assert repo.reserve(SID) is None  # not stale yet: it might still be executing
    clock.set_sync(hb.next_due + STALE_AFTER)
    again = repo.reserve(SID)
    assert again is not None and again.heartbeat.fire_count == 1  # refunded, then reserved
    assert repo.refund_orphans() == []  # ours and fresh


def test_unconfirm_undoes_only_our_own_confirmation(repo: HeartbeatRepo, clock: FakeClock) -> None:
    hb, _ = repo.set(SID, "p", 60)
    clock.set_sync(hb.next_due)
    first = repo.reserve(SID)
    assert repo.confirm(first)
    after = repo.unconfirm(first)
    assert after.fire_count == 0 and after.next_due == hb.next_due and after.last_fire is None
    assert repo.unconfirm(first) is None  # nothing of ours left to undo
    second = repo.reserve(SID)
    assert repo.confirm(second)
    assert repo.unconfirm(first) is None  # a later fire is never undone by an earlier attempt
    assert repo.get(SID).fire_count == 1
