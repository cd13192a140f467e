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

Changes made by other processes are noticed through the profile's schedule generation, one
key read every ``poll_interval`` seconds; a change made here re-arms at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol, TypeVar

from vigil.clock import Clock, SystemClock
from vigil.schedule import estop
from vigil.schedule.changes import read_generation
from vigil.schedule.engine import DueEngine
from vigil.schedule.heartbeat import Heartbeat, HeartbeatError
from vigil.schedule.heartbeat_repo import PROCESS_OWNER, HeartbeatRepo, Reservation
from vigil.store import SessionStore, StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Offload = Callable[..., Awaitable[Any]]
"""How blocking store calls run: ``await offload(fn, *args)`` (default ``asyncio.to_thread``)."""

_RESYNC_ONE_BY_ONE = 32


class HeartbeatTarget(Protocol):
    """A conversation (or anything) that fires the heartbeats of the sessions it owns."""

    def heartbeat_due(self, session_id: str) -> None:
        """The heartbeat of ``session_id`` is due: start the claim protocol when idle.
        Must return at once."""
        ...


@dataclass
class SchedulerStats:
    claims: int = 0
    """Slots reserved by this process."""
    confirmed: int = 0
    """Reservations that reached execution."""
    refunded: int = 0
    not_due: int = 0
    """Claims that found nothing to reserve (another process fired, paused, cleared ...)."""
    stopped: int = 0
    """Attempts refused by the emergency stop."""
    orphans_refunded: int = 0


class HeartbeatScheduler:
    """Arms the due-time engine for owned heartbeats and runs the claim protocol."""

    def __init__(
        self,
        store: SessionStore,
        *,
        clock: Clock | None = None,
        poll_interval: float = 15.0,
        owner: str = PROCESS_OWNER,
        offload: Offload | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self.repo = HeartbeatRepo(store, self.clock, owner=owner)
        self.poll_interval = poll_interval
        self.stats = SchedulerStats()
        self.engine = DueEngine(self.clock, self._on_due)
        self._offload: Offload = offload or asyncio.to_thread
        self._targets: dict[str, HeartbeatTarget] = {}
        self._known: dict[str, Heartbeat] = {}
        self._parked: set[str] = set()
        self._stopped = False  # the emergency stop as last seen
        self._generation: str | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._in_flight = 0

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
        await self.resync()
        self.engine.start()
        if self._watcher is None and self.poll_interval > 0:
            self._watcher = asyncio.create_task(self._watch(), name="heartbeat-watcher")
        return refunded

    async def stop(self) -> None:
        """Stop the engine and the watcher (running turns are not touched)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass
        await self.engine.stop()

    # -- ownership ------------------------------------------------------------------------------
    def own(self, session_id: str, target: HeartbeatTarget) -> None:
        """``target`` fires the heartbeat of ``session_id`` from now on (call :meth:`refresh`)."""
        self._targets[session_id] = target

    def disown(self, session_id: str, target: HeartbeatTarget | None = None) -> None:
        """Stop firing ``session_id`` here (only if ``target`` still owns it, when given)."""
        if target is not None and self._targets.get(session_id) is not target:
            return
        self._targets.pop(session_id, None)
        self._known.pop(session_id, None)
        self._parked.discard(session_id)
        self.engine.disarm(session_id)

    def owns(self, session_id: str) -> bool:
        return session_id in self._targets

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
        return self._in_flight == 0

    # -- arming -----------------------------------------------------------------------------------
    async def refresh(self, session_id: str) -> Heartbeat | None:
        """Re-read the session's heartbeat and arm or disarm it accordingly."""
        try:
            heartbeat = await self._call(self.repo.get, session_id)
        except HeartbeatError as exc:
            log.warning("ignoring the damaged heartbeat of %s: %s", session_id, exc)
            heartbeat = None
        self._apply(session_id, heartbeat)
        return heartbeat

    async def resync(self) -> None:
        """Re-read every owned heartbeat (after a change made by another process)."""
        owned = list(self._targets)
        if len(owned) <= _RESYNC_ONE_BY_ONE:
            for session_id in owned:
                await self.refresh(session_id)
            return
        stored = {h.session_id: h for h in await self._call(self.repo.list)}
        for session_id in owned:
            self._apply(session_id, stored.get(session_id))

    def _apply(self, session_id: str, heartbeat: Heartbeat | None) -> None:
        if session_id not in self._targets:
            return
        if heartbeat is None:
            self._known.pop(session_id, None)
        else:
            self._known[session_id] = heartbeat
        if heartbeat is None or not heartbeat.active or heartbeat.next_due is None:
            self.engine.disarm(session_id)
        elif self._stopped:
            self._parked.add(session_id)
            self.engine.disarm(session_id)
        else:
            self.engine.arm(session_id, heartbeat.next_due)

    def _on_due(self, session_id: str, _due: float) -> None:
        target = self._targets.get(session_id)
        if target is None:
            return
        if self._stopped:
            self._parked.add(session_id)
            return
        target.heartbeat_due(session_id)

    # -- the claim protocol -------------------------------------------------------------------------
    async def claim(self, session_id: str) -> Reservation | None:
        """Reserve the due slot durably (step 1). ``None``: nothing to fire now; the
        heartbeat is re-armed from what the store says."""
        attempt = asyncio.ensure_future(self._call(self.repo.reserve, session_id))
        try:
            reservation = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # The reservation may be durable already even though nobody will use it.
            await self._refund_abandoned(attempt)
            raise
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot claim the heartbeat of %s: %s", session_id, exc)
            reservation = None
        if reservation is None:
            self.stats.not_due += 1
            await self.refresh(session_id)
            return None
        self.stats.claims += 1
        self._apply(session_id, reservation.heartbeat)
        return reservation

    async def confirm(self, reservation: Reservation) -> bool:
        """Step 3, just before the agent starts: refuse under the emergency stop, re-check
        that the heartbeat is still scheduled as reserved, and make the reservation final.
        On ``False`` the slot has already been refunded."""
        try:
            if await self._call(estop.engaged, self.store):
                self._stopped = True
                self.stats.stopped += 1
                await self.refund(reservation)
                return False
            if await self._call(self.repo.confirm, reservation):
                self.stats.confirmed += 1
                return True
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot confirm the heartbeat of %s: %s", reservation.session_id, exc)
        await self.refund(reservation)
        return False

    async def refund(self, reservation: Reservation) -> Heartbeat | None:
        """Give the slot back because the attempt ended before executing. Safe to call when
        the task is being cancelled: the refund itself is shielded."""
        try:
            after = await asyncio.shield(self._call(self.repo.refund, reservation))
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot refund the heartbeat of %s: %s", reservation.session_id, exc)
            after = None
        if after is not None:
            self.stats.refunded += 1
            self._apply(reservation.session_id, after)
        else:
            await asyncio.shield(self.refresh(reservation.session_id))
        return after

    async def _refund_abandoned(self, attempt: asyncio.Future[Reservation | None]) -> None:
        try:
            reservation = await attempt
        except Exception:
            return
        if reservation is not None:
            await self.refund(reservation)

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
        while True:
            await self.clock.sleep(self.poll_interval)
            try:
                await self.check_changes()
            except StoreError as exc:
                # A transient store error: keep the schedule we have and look again later.
                log.warning("cannot check for schedule changes: %s", exc)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        self._in_flight += 1
        try:
            return await self._offload(fn, *args)
        finally:
            self._in_flight -= 1


class DirectTarget:
    """A target that fires as soon as a heartbeat is due, running ``run(reservation)`` after
    the claim is confirmed. For headless runs, benchmarks and tests; conversations use
    :class:`vigil.runtime.conversation.Conversation` instead."""

    def __init__(
        self,
        scheduler: HeartbeatScheduler,
        run: Callable[[Reservation], Awaitable[None] | None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.run = run
        self.tasks: set[asyncio.Task[None]] = set()

    def heartbeat_due(self, session_id: str) -> None:
        task = asyncio.create_task(self._fire(session_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _fire(self, session_id: str) -> None:
        reservation = await self.scheduler.claim(session_id)
        if reservation is None or not await self.scheduler.confirm(reservation):
            return
        if self.run is not None:
            result = self.run(reservation)
            if inspect.isawaitable(result):
                await result
