"""The heartbeat scheduler of one process: which heartbeats it owns, when they are due, and
the claim → confirm/refund protocol every fire goes through.

A process fires only the heartbeats of conversations it *owns* (the REPL its open
conversation, the gateway the conversations it routes). Each owner is a
:class:`HeartbeatTarget`: when a heartbeat comes due the scheduler tells the target, and the
target — once its conversation is idle — runs the protocol:

1. ``claim`` reserves the slot durably in the store (compare-and-set), before anything else;
2. the target prepares (is the conversation still this one, is nobody waiting ...);
3. ``confirm`` checks the emergency stop and makes the reservation final as the agent begins
   executing — or ``refund`` gives the slot back if the attempt ends before that.

The fire count is the number of fires that reached execution: a confirmation that is written
but whose attempt then does not begin (cancelled meanwhile, user input arrived) is undone
(:meth:`HeartbeatScheduler.withdraw`). A refund gives the count back but, when the schedule
changed meanwhile, keeps the new schedule's timer (see ``Heartbeat.refunded``).

The engine is armed for the end of a quiet window, not a due time inside it; an ended
heartbeat is cleared and one over ``daily_token_budget`` paused, each with a note
(:mod:`~vigil.schedule.heartbeat.upkeep`, :attr:`HeartbeatScheduler.on_note`).

A due time in the past is never re-armed in a tight loop: after a claim that found the slot
blocked, or an attempt that failed, the heartbeat is tried again :data:`HOLD_OFF` later.

Changes made by other processes are noticed through the profile's schedule generation, one
key read every ``poll_interval`` seconds; a change made here re-arms at once.

With a :class:`~vigil.schedule.heartbeat.lease.LeaseBook` the scheduler fires an owned
heartbeat only while it holds the session's ownership lease (see
:mod:`vigil.schedule.heartbeat.ownership`): owning takes the lease, the watcher renews it,
disowning and stopping release it, and a lease taken over elsewhere disowns the session. A
gateway also adopts (:meth:`~HeartbeatScheduler.adopt`) every active heartbeat nobody holds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Sequence, TypeVar

from vigil.clock import Clock, SystemClock
from vigil.schedule import estop
from vigil.schedule.changes import read_generation
from vigil.schedule.engine import DueEngine
from vigil.schedule.heartbeat.giveback import GiveBack
from vigil.schedule.heartbeat.lease import LeaseBook
from vigil.schedule.heartbeat.ownership import LeaseKeeper, tick_seconds
from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError
from vigil.schedule.heartbeat.repo import PROCESS_OWNER, HeartbeatRepo, Reservation
from vigil.schedule.heartbeat.targets import DirectTarget, HeartbeatTarget, SchedulerStats
from vigil.schedule.heartbeat.upkeep import Noted, Upkeep
from vigil.schedule.polling import Offload, OffloadedCalls, poll_seconds, watch_changes
from vigil.store import SessionStore, StoreError

__all__ = ["GIVE_BACK_RETRY_DELAYS", "HOLD_OFF", "DirectTarget", "HeartbeatScheduler", "HeartbeatTarget", "SchedulerStats"]

log = logging.getLogger(__name__)

T = TypeVar("T")
"""How blocking store calls run: ``await offload(fn, *args)`` (default ``asyncio.to_thread``)."""

_RESYNC_ONE_BY_ONE = 32

HOLD_OFF = 30.0
"""Seconds (schedule time) before a heartbeat whose claim found its slot blocked, or whose
attempt failed, is tried again."""

GIVE_BACK_RETRY_DELAYS: tuple[float, ...] = (0.05, 0.25, 1.0, 4.0)
"""Real-time pauses between attempts to give a slot back when the store fails. A locked or
briefly unreachable store recovers in wall time, whatever the schedule's clock says. If every
attempt fails the reservation stays pending until it is stale (``STALE_AFTER``) and is then
reclaimed by the next claim."""


class HeartbeatScheduler(GiveBack):
    """Arms the due-time engine for owned heartbeats and runs the claim protocol (giving a
    slot back: :class:`~vigil.schedule.heartbeat.giveback.GiveBack`).

    ``poll_interval`` is lowered by the test-only ``VIGIL_TEST_SCHEDULE_POLL_SECONDS``;
    ``leases``: fire only the heartbeats whose ownership lease this scheduler holds.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Clock | None = None,
        poll_interval: float = 15.0,
        owner: str = PROCESS_OWNER,
        offload: Offload | None = None,
        hold_off: float = HOLD_OFF,
        retry_delays: Sequence[float] = GIVE_BACK_RETRY_DELAYS,
        leases: LeaseBook | None = None,
        daily_token_budget: int | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self.daily_token_budget = daily_token_budget  # tokens per 24 h (None: no limit)
        self.on_note: Callable[[Noted], None] | None = None  # told of each note (must not block)
        self.upkeep = Upkeep(self)
        self.repo = HeartbeatRepo(store, self.clock, owner=owner)
        self.poll_interval = poll_seconds(poll_interval)
        self.hold_off = hold_off
        self.retry_delays = tuple(retry_delays)
        self.stats = SchedulerStats()
        self.engine = DueEngine(self.clock, self._on_due)
        self._call = OffloadedCalls(offload)
        self._targets: dict[str, HeartbeatTarget] = {}
        self._known: dict[str, Heartbeat] = {}
        self._parked: set[str] = set()
        self._not_before: dict[str, float] = {}  # held off: not armed earlier than this
        self._stopped = False  # the emergency stop as last seen
        self._generation: str | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._leases = None if leases is None else LeaseKeeper(self, leases)

    @property
    def leases(self) -> LeaseBook | None:
        return None if self._leases is None else self._leases.book

    @property
    def store(self) -> SessionStore:
        return self.repo.store

    # -- life cycle ---------------------------------------------------------------------------
    async def start(self) -> list[Heartbeat]:
        """Refund reservations left behind by dead processes, load the owned heartbeats and
        start the engine and the change watcher. Returns the refunded records."""
        refunded = await self._call(self.repo.refund_orphans)
        self.stats.orphans_refunded += len(refunded)
        self._generation = await self._call(read_generation, self.store)
        self._stopped = await self._call(estop.engaged, self.store)
        if self._leases is not None and self._leases.adopting:
            await self._call(self._leases.book.sweep)
        await self.resync()
        self.engine.start()
        if self._watcher is None and tick_seconds(self.poll_interval, self._leases) > 0:
            self._watcher = asyncio.create_task(self._watch(), name="heartbeat-watcher")
        return refunded

    async def stop(self) -> None:
        """Stop the engine and the watcher and release the leases (running turns are not
        touched)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass
        await self.engine.stop()
        self.upkeep.cancel()
        if self._leases is not None:
            await self._leases.close()

    # -- ownership ------------------------------------------------------------------------------
    def own(self, session_id: str, target: HeartbeatTarget) -> None:
        """``target`` fires the heartbeat of ``session_id`` from now on (call :meth:`refresh`;
        with leases, that takes the session's lease first)."""
        self._targets[session_id] = target
        if self._leases is not None:
            self._leases.wanted(session_id)

    def own_leased(self, session_id: str, target: HeartbeatTarget) -> None:
        """Own ``session_id`` whose lease is held already (adoption)."""
        self._targets[session_id] = target

    def adopt(
        self,
        target_for: Callable[[str], HeartbeatTarget],
        adoptable: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        """From now on own every active heartbeat whose lease is free (at start, at every
        resync and poll tick), as :data:`~vigil.schedule.heartbeat.lease.GATEWAY` does;
        ``target_for(session_id)`` gives the target; ``adoptable`` (blocking) keeps only the
        sessions this process may adopt. Needs leases."""
        if self._leases is None:
            raise ValueError("adopting heartbeats needs a LeaseBook (leases=...)")
        self._leases.target_for = target_for
        self._leases.adoptable = adoptable
        if self._watcher is not None:
            self._leases.spawn(self.resync())

    def lose(self, session_id: str) -> None:
        """Another process holds the lease of ``session_id``: stop firing it here and tell
        the target (``heartbeat_lost``, when it has one)."""
        target = self._targets.get(session_id)
        self.disown(session_id)
        lost = getattr(target, "heartbeat_lost", None)
        if callable(lost):
            try:
                lost(session_id)
            except Exception:
                log.exception("heartbeat_lost failed for %s", session_id)

    def owned(self) -> set[str]:
        """The sessions owned here, whether or not their lease is held yet."""
        return set(self._targets)

    def disown(self, session_id: str, target: HeartbeatTarget | None = None) -> None:
        """Stop firing ``session_id`` here (only if ``target`` still owns it, when given)."""
        if target is not None and self._targets.get(session_id) is not target:
            return
        self._targets.pop(session_id, None)
        self._known.pop(session_id, None)
        self._parked.discard(session_id)
        self._not_before.pop(session_id, None)
        self.engine.disarm(session_id)
        if self._leases is not None:
            self._leases.dropped(session_id)

    def owns(self, session_id: str) -> bool:
        """Whether this scheduler fires the heartbeat of ``session_id`` (with leases: owned
        and its lease held)."""
        return session_id in self._targets and (self._leases is None or session_id not in self._leases.pending)

    def known(self, session_id: str) -> Heartbeat | None:
        """The heartbeat of an owned session as last read (for status lines; no store call)."""
        return self._known.get(session_id)

    def next_fire(self, session_id: str) -> float | None:
        """When the engine will next fire ``session_id`` (``None``: not armed)."""
        return self.engine.due_of(session_id)

    @property
    def emergency_stopped(self) -> bool:
        """The emergency stop as this scheduler last saw it."""
        return self._stopped

    @property
    def quiet(self) -> bool:
        """No store call of the scheduler is in progress (for tests and benchmarks)."""
        return self._call.in_flight == 0

    async def offloaded(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` off the event loop, counted in :attr:`quiet`."""
        return await self._call(fn, *args)

    # -- arming -----------------------------------------------------------------------------------
    async def refresh(self, session_id: str) -> Heartbeat | None:
        """Re-read the session's heartbeat and arm or disarm it accordingly (with leases, take
        the session's lease if it has a heartbeat, release it if not)."""
        try:
            heartbeat = await self._call(self.repo.get, session_id)
        except HeartbeatError as exc:
            log.warning("ignoring the damaged heartbeat of %s: %s", session_id, exc)
            heartbeat = None
        if self._leases is not None and session_id in self._targets:
            await self._leases.settle([session_id], lambda _sid: heartbeat is not None)
        self._apply(session_id, heartbeat)
        return heartbeat

    async def resync(self) -> None:
        """Re-read every owned heartbeat (after a change made by another process). With leases,
        first check the held leases and adopt the free ones; then take or release leases as the
        owned sessions have heartbeats or not."""
        listed: list[Heartbeat] | None = None
        if self._leases is not None:
            await self._leases.verify()
            if self._leases.adopting:
                listed = await self._call(self.repo.list)
                await self._leases.adopt_free(listed)
        owned = list(self._targets)
        if listed is None and len(owned) <= _RESYNC_ONE_BY_ONE:
            for session_id in owned:
                await self.refresh(session_id)
            return
        if listed is None:
            listed = await self._call(self.repo.list)
        stored = {h.session_id: h for h in listed}
        if self._leases is not None:
            await self._leases.settle(owned, stored.__contains__)
            owned = list(self._targets)
        for session_id in owned:
            self._apply(session_id, stored.get(session_id))

    def _apply(self, session_id: str, heartbeat: Heartbeat | None) -> None:
        if session_id not in self._targets:
            return
        if heartbeat is None:
            self._known.pop(session_id, None)
        else:
            self._known[session_id] = heartbeat
        unleased = self._leases is not None and session_id in self._leases.pending
        # Armed for its next fire, or for its end (it is cleared then, even while paused).
        wake = None if unleased or heartbeat is None else heartbeat.wake_at()
        if wake is not None and heartbeat is not None and heartbeat.fire_at() is not None:
            if self._stopped:  # parked: only its end stays armed
                self._parked.add(session_id)
                wake = heartbeat.ends_at
            else:
                wake = self._held(session_id, wake)
        if wake is None:
            self.engine.disarm(session_id)
        else:
            self.engine.arm(session_id, wake)

    def _held(self, session_id: str, due: float) -> float:
        """``due``, or later while the heartbeat is held off (see :meth:`_hold_off`); a due
        time past the hold (a new schedule, another process's fire) ends the hold."""
        not_before = self._not_before.get(session_id)
        if not_before is None:
            return due
        if due >= not_before:
            del self._not_before[session_id]
            return due
        return not_before

    def _on_due(self, session_id: str, _due: float) -> None:
        target = self._targets.get(session_id)
        if target is None:
            return
        known = self._known.get(session_id)
        if known is not None and known.ended(self.clock.now()):
            self.upkeep.spawn(self.upkeep.expire(session_id))
            return
        if self._stopped:
            self._parked.add(session_id)
            return
        target.heartbeat_due(session_id)

    # -- the claim protocol -------------------------------------------------------------------------
    async def claim(self, session_id: str) -> Reservation | None:
        """Reserve the due slot durably (step 1). ``None``: nothing to fire now; the
        heartbeat is re-armed from what the store says, but never for a time in the past.
        While the heartbeat is held off (after a failed attempt) nothing is claimed."""
        not_before = self._not_before.get(session_id)
        if not_before is not None and self.clock.now() < not_before:
            self.engine.arm(session_id, not_before)
            return None
        if await self.upkeep.over_budget(session_id):
            return None
        attempt = asyncio.ensure_future(self._call(self.repo.reserve, session_id))
        try:
            reservation = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # The reservation may be durable already even though nobody will use it.
            await self._refund_abandoned(attempt)
            raise
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot claim the heartbeat of %s: %s", session_id, exc)
            self.stats.not_due += 1
            self._hold_off(session_id)
            return None
        if reservation is None:
            # Not due after all (another process fired, paused, cleared), or the slot is
            # blocked by a reservation still pending: then the stored due time is past.
            self.stats.not_due += 1
            await self._refresh_quietly(session_id)
            self._hold_off(session_id)
            return None
        self.stats.claims += 1
        self._not_before.pop(session_id, None)
        self._apply(session_id, reservation.heartbeat)
        return reservation

    async def confirm(self, reservation: Reservation) -> bool:
        """Step 3, just before the agent starts: refuse under the emergency stop, re-check
        that the heartbeat is still scheduled as reserved, and make the reservation final.

        On ``False`` the slot has already been given back. If the caller is cancelled
        meanwhile, the confirmation (which runs on, shielded) is awaited and then undone or
        the slot refunded before ``CancelledError`` propagates: the attempt did not reach
        execution, so it must not count.
        """
        try:
            stopped = await self._call(estop.engaged, self.store)
        except asyncio.CancelledError:
            await self.refund(reservation)
            raise
        except StoreError as exc:
            log.warning("cannot check the emergency stop for %s: %s", reservation.session_id, exc)
            await self.refund(reservation, failed=True)
            return False
        if stopped:
            self._stopped = True
            self.stats.stopped += 1
            await self.refund(reservation)
            return False
        attempt = asyncio.ensure_future(self._call(self.repo.confirm, reservation))
        try:
            confirmed = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            await asyncio.shield(self._withdraw_after(attempt, reservation))
            raise
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot confirm the heartbeat of %s: %s", reservation.session_id, exc)
            # The write may have landed before the error: withdraw covers both cases.
            await self.withdraw(reservation, failed=True)
            return False
        if not confirmed:
            await self.refund(reservation)
            return False
        self.stats.confirmed += 1
        return True

    async def _refresh_quietly(self, session_id: str) -> None:
        try:
            await self.refresh(session_id)
        except StoreError as exc:
            log.warning("cannot re-read the heartbeat of %s: %s", session_id, exc)
            self._hold_off(session_id)

    def _hold_off(self, session_id: str) -> None:
        """Keep an owned, active heartbeat armed, but not for a time in the past: try again
        :attr:`hold_off` from now, whatever a re-read of the store says meanwhile. Without
        this a blocked slot or a failing attempt would re-fire at once, forever."""
        if session_id not in self._targets or self._stopped:
            return
        known = self._known.get(session_id)
        if known is None or not known.active:
            return
        due = self.engine.due_of(session_id)
        now = self.clock.now()
        if due is not None and due > now:
            return
        self.stats.held_off += 1
        self._not_before[session_id] = now + self.hold_off
        self.engine.arm(session_id, now + self.hold_off)

    # -- watching other processes ------------------------------------------------------------------
    async def check_changes(self) -> bool:
        """Look at the schedule generation once; resync if another process changed something.
        Returns whether anything changed."""
        generation = await self._call(read_generation, self.store)
        if generation == self._generation:
            return False
        self._generation = generation
        was_stopped = self._stopped
        self._stopped = await self._call(estop.engaged, self.store)
        if was_stopped and not self._stopped:
            self._parked.clear()
        await self.resync()
        return True

    async def _watch(self) -> None:
        await watch_changes(
            self.clock, tick_seconds(self.poll_interval, self._leases), self._tick, "schedule", store=self.store
        )

    async def _tick(self) -> None:
        changed = await self.check_changes()
        if self._leases is not None and not changed:
            await self._leases.tick()
