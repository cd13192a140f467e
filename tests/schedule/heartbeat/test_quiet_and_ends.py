"""The scheduler honours the options on a fake clock, on SQLite and PostgreSQL: no fire in a
quiet window and one when it ends, an ended heartbeat cleared with a note, a heartbeat over
its daily token budget paused with a note."""

from __future__ import annotations

from datetime import datetime, timezone

from tests.schedule.helpers import inline, settle
from vigil.clock import FakeClock
from vigil.schedule.heartbeat.options import HeartbeatOptions, QuietWindow
from vigil.schedule.heartbeat.repo import HeartbeatRepo, Reservation
from vigil.schedule.heartbeat.scheduler import DirectTarget, HeartbeatScheduler
from vigil.schedule.heartbeat.text import heartbeat_message
from vigil.schedule.heartbeat.upkeep import Noted
from vigil.store import NewMessage, SessionStore
from vigil.usage import Usage

SID = "bbbbbbbbbbbb"


def utc(clock: FakeClock) -> str:
    return datetime.fromtimestamp(clock.now(), timezone.utc).strftime("%H:%M")


async def _running(store: SessionStore, clock: FakeClock, fires: list, notes: list, **kw: object) -> HeartbeatScheduler:
    scheduler = HeartbeatScheduler(store, clock=clock, owner="host:1:t", offload=inline, poll_interval=30, **kw)  # type: ignore[arg-type]

    def run(reservation: Reservation) -> None:
        fires.append(utc(clock))

    scheduler.on_note = notes.append
    scheduler.own(SID, DirectTarget(scheduler, run))
    await scheduler.start()
    return scheduler


async def _walk(clock: FakeClock, minutes: int) -> None:
    for _ in range(minutes):
        await clock.advance(60)
        await settle()


async def test_no_fire_in_the_quiet_window_and_one_when_it_ends(shared_store: SessionStore, clock: FakeClock) -> None:
    assert utc(clock) == "08:00"
    shared_store.create_session(source="cli", title="t", session_id=SID)
    options = HeartbeatOptions(QuietWindow.parse("08:05-09:00"), zone="UTC")
    HeartbeatRepo(shared_store, clock).set(SID, "watch", 600, options=options)
    fires: list[str] = []
    scheduler = await _running(shared_store, clock, fires, [])
    try:
        assert scheduler.next_fire(SID) == clock.now() + 3600  # armed for the window's end, not 08:10
        await _walk(clock, 59)
        assert fires == []  # 08:10 ... 08:50 were due inside the window
        await _walk(clock, 1)
        assert fires == ["09:00"]  # coalesced: one fire as the window ends
        await _walk(clock, 20)
        assert fires == ["09:00", "09:10", "09:20"]  # outside the window it fires as ever
        assert HeartbeatRepo(shared_store, clock).get(SID).fire_count == 3
    finally:
        await scheduler.stop()


async def test_a_heartbeat_due_before_a_busy_spell_ends_in_the_window_waits_for_its_end(
    shared_store: SessionStore, clock: FakeClock
) -> None:
    """Due before the window, claimed only inside it (the conversation was busy): no fire."""
    shared_store.create_session(source="cli", title="t", session_id=SID)
    repo = HeartbeatRepo(shared_store, clock)
    repo.set(SID, "watch", 300, options=HeartbeatOptions(QuietWindow.parse("08:06-08:30"), zone="UTC"))
    await clock.advance(7 * 60)  # due at 08:05, nobody claimed it; now 08:07, inside
    assert repo.reserve(SID) is None
    await clock.advance(23 * 60)
    assert repo.reserve(SID) is not None  # 08:30: the window is over


async def test_an_ended_heartbeat_is_cleared_with_a_note(shared_store: SessionStore, clock: FakeClock) -> None:
    shared_store.create_session(source="cli", title="t", session_id=SID)
    repo = HeartbeatRepo(shared_store, clock)
    repo.set(SID, "watch the deploy", 600, options=HeartbeatOptions(ends_in=25 * 60))
    fires: list[str] = []
    notes: list[Noted] = []
    scheduler = await _running(shared_store, clock, fires, notes)
    try:
        await _walk(clock, 24)
        assert fires == ["08:10", "08:20"] and notes == []
        await _walk(clock, 1)
        assert repo.get(SID) is None  # 08:25: cleared by itself
        [note] = notes
        assert note.kind == "ended" and note.text.startswith("♥ Heartbeat ended (every 10m, fired 2 times)")
        stored = [m for m in shared_store.get_messages(SID) if m.role == "note"]
        assert [m.content for m in stored] == [note.text] and stored[0].meta == {"heartbeat": "ended"}
        await _walk(clock, 30)
        assert fires == ["08:10", "08:20"] and len(notes) == 1
    finally:
        await scheduler.stop()


async def test_a_paused_heartbeat_ends_too(shared_store: SessionStore, clock: FakeClock) -> None:
    shared_store.create_session(source="cli", title="t", session_id=SID)
    repo = HeartbeatRepo(shared_store, clock)
    repo.set(SID, "watch", 600, options=HeartbeatOptions(ends_in=30 * 60))
    repo.pause(SID)
    notes: list[Noted] = []
    scheduler = await _running(shared_store, clock, [], notes)
    try:
        await _walk(clock, 30)
        assert repo.get(SID) is None and [n.kind for n in notes] == ["ended"]
    finally:
        await scheduler.stop()


def _heartbeat_turn(store: SessionStore, clock: FakeClock, usage: Usage) -> None:
    repo = HeartbeatRepo(store, clock)
    hb = repo.get(SID)
    store.append_message(SID, NewMessage("user", heartbeat_message(hb)), created_at=clock.now())
    store.append_message(SID, NewMessage("assistant", "HEARTBEAT_OK", usage=usage), created_at=clock.now())


async def test_a_heartbeat_over_its_daily_token_budget_is_paused_with_a_note(
    shared_store: SessionStore, clock: FakeClock
) -> None:
    shared_store.create_session(source="cli", title="t", session_id=SID)
    repo = HeartbeatRepo(shared_store, clock)
    repo.set(SID, "watch", 600)
    fires: list[str] = []
    notes: list[Noted] = []
    scheduler = await _running(shared_store, clock, fires, notes, daily_token_budget=5_000)
    try:
        shared_store.append_message(SID, NewMessage("user", "a person's question"))
        shared_store.append_message(SID, NewMessage("assistant", "long", usage=Usage(90_000, 0, 0, 900)))
        _heartbeat_turn(shared_store, clock, Usage(1_000, 2_000, 0, 10))  # 3,010: within the budget
        await _walk(clock, 10)
        assert fires == ["08:10"] and notes == []  # the person's own turn does not count
        _heartbeat_turn(shared_store, clock, Usage(1_000, 1_000, 0, 10))  # 5,020 in 24 h: over
        await _walk(clock, 10)
        assert fires == ["08:10"]
        paused = repo.get(SID)
        assert not paused.active and paused.paused_by == "budget"
        [note] = notes
        assert note.kind == "over_budget" and "5,020 tokens in the last 24 hours (2 turns)" in note.text
        assert [m.content for m in shared_store.get_messages(SID) if m.role == "note"] == [note.text]
        resumed, _ = repo.resume(SID)
        assert resumed.paused_by is None
        await clock.advance(86_400)  # a day later the old turns no longer count
        await settle()
        assert fires[-1:] == [utc(clock)] and len(notes) == 1
    finally:
        await scheduler.stop()
