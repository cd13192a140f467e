"""The heartbeat scheduler's side of the ownership leases (:mod:`vigil.schedule.heartbeat.lease`):
which owned sessions it holds the lease of, which it still has to take, and — in the gateway —
which heartbeats it adopts because nobody else runs them.

A session the scheduler owns holds its lease while it has a heartbeat (a conversation without
one costs no lease and no renewals) and is armed only once the lease is held. A lease taken over by
another process makes the scheduler give the session up (a REPL gives way to another REPL,
but takes back what a gateway took while the REPL was stalled). Renewal is one write per
tick whatever the number of leases; checking that every lease is still held happens when
the schedule generation changes (taking a lease over bumps it), and on every tick as well
while only a few leases are held.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable

from vigil.schedule.heartbeat.lease import GATEWAY, LeaseBook
from vigil.schedule.heartbeat.record import Heartbeat
from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler, HeartbeatTarget

log = logging.getLogger(__name__)

CHECK_EVERY_TICK = 32
"""Up to this many held leases are checked on every renewal tick (one small read); more are
checked only when the schedule generation changes, so that 100,000 of them cost one write
per tick."""


class LeaseKeeper:
    """Lease bookkeeping for one :class:`~vigil.schedule.heartbeat.scheduler.HeartbeatScheduler`."""

    def __init__(self, scheduler: HeartbeatScheduler, book: LeaseBook) -> None:
        self.scheduler = scheduler
        self.book = book
        self.pending: set[str] = set()
        """Owned sessions whose lease is not held: not taken yet, or no heartbeat (not armed)."""
        self.held: set[str] = set()
        self.adopted: set[str] = set()
        """Held sessions owned through :meth:`adopt` (their target came from ``target_for``)."""
        self.elsewhere: dict[str, float] = {}
        """Active heartbeats another process holds, with their lease's expiry (gateway)."""
        self.target_for: Callable[[str], HeartbeatTarget] | None = None
        self.adoptable: Callable[[list[str]], list[str]] | None = None
        """Which of some free heartbeats this process may adopt (blocking; ``None``: all).
        Several gateways on one store adopt only the heartbeats of conversations they run or
        nobody runs; the others are looked at again on every tick."""
        self.lock = asyncio.Lock()  # lease changes of this scheduler, one at a time
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def adopting(self) -> bool:
        return self.target_for is not None

    # -- what the scheduler reports -------------------------------------------------------------
    def wanted(self, session_id: str) -> None:
        """The scheduler owns ``session_id`` now: take its lease at the next refresh/resync
        that finds a heartbeat there."""
        if session_id not in self.held:
            self.pending.add(session_id)
        self.elsewhere.pop(session_id, None)

    def dropped(self, session_id: str) -> None:
        """The scheduler gave ``session_id`` up: release its lease (in the background)."""
        self.pending.discard(session_id)
        self.adopted.discard(session_id)
        if session_id in self.held:
            self.held.discard(session_id)
            self.spawn(self._release(session_id))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- taking and checking ----------------------------------------------------------------------
    async def settle(self, session_ids: Iterable[str], has_heartbeat: Callable[[str], bool]) -> None:
        """Hold the leases of the owned sessions that have a heartbeat, and only of those: take
        the missing ones, release those whose heartbeat is gone (cleared, moved)."""
        ids = list(session_ids)
        await self.take_pending([sid for sid in ids if sid in self.pending and has_heartbeat(sid)])
        for sid in ids:
            if sid in self.held and not has_heartbeat(sid):
                self.held.discard(sid)
                self.pending.add(sid)
                self.spawn(self._release(sid))

    async def take_pending(self, session_ids: Iterable[str] | None = None) -> None:
        """Take the leases of pending sessions (a REPL forcibly); those another process keeps
        are given up (the target is told)."""
        ids = [sid for sid in (self.pending if session_ids is None else session_ids) if sid in self.pending]
        if not ids:
            return
        async with self.lock:
            result = await self._call(partial(self.book.take_many, ids, force=self.book.forceful))
        for sid in ids:
            if sid not in self.pending:  # disowned meanwhile
                if sid in result.taken and sid not in self.held:
                    self.spawn(self._release(sid))
                continue
            self.pending.discard(sid)
            if sid in result.taken:
                self.held.add(sid)
            else:
                lease = result.elsewhere.get(sid)
                if lease is not None:
                    self.elsewhere[sid] = lease.expires_at
                self.scheduler.lose(sid)

    async def verify(self) -> None:
        """Renew the leases and find those taken over meanwhile: give them up, or (a REPL,
        from a gateway) take them back."""
        held = list(self.held)
        if not held:
            return
        async with self.lock:
            still = await self._call(self.book.renew, held)
        lost = [sid for sid in held if sid not in still and sid in self.held]
        if not lost:
            return
        holders = await self._call(self.book.holders, lost) if self.book.forceful else {}
        retake = []
        for sid in lost:
            self.held.discard(sid)
            holder = holders.get(sid)
            if self.book.forceful and (holder is None or holder.kind == GATEWAY):
                log.info("the heartbeat lease of %s was taken while this REPL stalled: taking it back", sid)
                self.pending.add(sid)
                retake.append(sid)
            else:
                log.info("the heartbeat of %s is now run by another process", sid)
                self.scheduler.lose(sid)
        await self.take_pending(retake)

    async def tick(self) -> None:
        """A renewal tick with no generation change: keep the leases alive (one write), and
        adopt what another process stopped holding without telling (it died)."""
        if len(self.held) <= CHECK_EVERY_TICK:
            await self.verify()
        else:
            async with self.lock:
                await self._call(self.book.keep_alive)
        if not self.adopting or not self.elsewhere:
            return
        now = self.scheduler.clock.now()
        recheck = [
            sid for sid, expires in self.elsewhere.items()
            if len(self.elsewhere) <= CHECK_EVERY_TICK or expires <= now
        ]
        for session_id in await self._adopt(recheck):
            if await self.scheduler.refresh(session_id) is None:
                self.scheduler.disown(session_id)

    # -- adoption (the gateway) -------------------------------------------------------------------
    async def adopt_free(self, listed: list[Heartbeat]) -> None:
        """Own every active heartbeat of ``listed`` whose lease is free; give up adopted
        sessions whose heartbeat is gone."""
        present = {h.session_id for h in listed}
        for sid in [sid for sid in self.adopted if sid not in present]:
            self.scheduler.disown(sid)
        owned = self.scheduler.owned()
        await self._adopt([h.session_id for h in listed if h.active and h.session_id not in owned])

    async def _adopt(self, candidates: list[str]) -> list[str]:
        """Take the free leases among ``candidates`` and own those sessions; returns them."""
        target_for = self.target_for
        if target_for is None or not candidates:
            return []
        for sid in candidates:
            self.elsewhere.pop(sid, None)
        if self.adoptable is not None:
            allowed = set(await self._call(self.adoptable, candidates))
            now = self.scheduler.clock.now()
            self.elsewhere.update({sid: now for sid in candidates if sid not in allowed})
            candidates = [sid for sid in candidates if sid in allowed]
            if not candidates:
                return []
        async with self.lock:
            result = await self._call(self.book.take_many, candidates)
        adopted = []
        for sid in candidates:
            lease = result.elsewhere.get(sid)
            if lease is not None:
                self.elsewhere[sid] = lease.expires_at
            if sid not in result.taken or sid in self.held or sid in self.pending:
                continue
            if self.scheduler.owns(sid):
                continue
            try:
                target = target_for(sid)
            except Exception:
                log.exception("no target for the heartbeat of %s; not adopted", sid)
                self.spawn(self._release(sid))
                continue
            self.held.add(sid)
            self.adopted.add(sid)
            self.scheduler.own_leased(sid, target)
            adopted.append(sid)
        return adopted

    # -- the end ---------------------------------------------------------------------------------
    async def close(self) -> None:
        """Release every held lease and the holder record (the scheduler stops). The owned
        sessions take their leases again if the scheduler starts again."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        held, owned = list(self.held), self.scheduler.owned()
        self.pending.update(sid for sid in held if sid in owned)
        self.held.clear()
        self.adopted.clear()
        self.elsewhere.clear()
        async with self.lock:
            try:
                await self._call(self.book.release_many, held)
                await self._call(self.book.retire)
            except StoreError as exc:
                log.warning("cannot release the heartbeat leases (they lapse by themselves): %s", exc)

    async def _release(self, session_id: str) -> None:
        async with self.lock:
            if session_id in self.held:
                return  # taken again meanwhile
            try:
                await self._call(self.book.release, session_id)
            except StoreError as exc:
                log.warning("cannot release the heartbeat lease of %s (it lapses): %s", session_id, exc)

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.scheduler.offloaded(fn, *args)


def tick_seconds(poll_interval: float, keeper: LeaseKeeper | None) -> float:
    """How often the scheduler's watcher wakes: its poll interval, or more often when it must
    renew leases (0: no watcher)."""
    if keeper is None:
        return poll_interval
    renew = keeper.book.renew_every
    return renew if poll_interval <= 0 else min(poll_interval, renew)

