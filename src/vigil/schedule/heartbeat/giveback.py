"""Giving a reserved heartbeat slot back, for :class:`~vigil.schedule.heartbeat.scheduler.HeartbeatScheduler`.

An attempt that ends before the agent begins executing gives its slot back: a refund while it
was only reserved, an undo once its confirmation may have been written. A failing store is
retried with back-off (``retry_delays``); both are shielded, so a cancelled caller still gives
the slot back. The scheduler mixes this in; it provides what is declared below.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError
from vigil.schedule.heartbeat.repo import HeartbeatRepo, Reservation
from vigil.schedule.heartbeat.targets import SchedulerStats
from vigil.schedule.polling import OffloadedCalls
from vigil.store import StoreError

log = logging.getLogger("vigil.schedule.heartbeat.scheduler")

T = TypeVar("T")


class GiveBack:
    """Refund and withdraw, mixed into the scheduler."""

    repo: HeartbeatRepo
    stats: SchedulerStats
    retry_delays: Sequence[float]
    _call: OffloadedCalls
    _apply: Callable[[str, Heartbeat | None], None]
    _refresh_quietly: Callable[[str], Awaitable[None]]
    _hold_off: Callable[[str], None]

    async def refund(self, reservation: Reservation, *, failed: bool = False) -> Heartbeat | None:
        """Give the slot back because the attempt ended before executing; returns the record
        after the refund, or ``None`` when there was nothing to refund.

        Count and last fire are restored; so is the timer unless the schedule changed
        meanwhile, in which case the new schedule's timer stays (the count still comes back:
        count = fires that reached execution). A failing store is retried with back-off.
        ``failed``: the attempt failed rather than being declined, so the heartbeat is tried
        again only after :attr:`hold_off`, not at once. Safe to call when the task is being
        cancelled: the refund itself is shielded.
        """
        return await asyncio.shield(self._give_back(reservation, failed=failed, undo=False))

    async def withdraw(self, reservation: Reservation, *, failed: bool = False) -> Heartbeat | None:
        """Give back the slot of an attempt that did not reach execution, whether or not its
        confirmation was written: a refund if it was not, an undo if it was. Shielded."""
        return await asyncio.shield(self._give_back(reservation, failed=failed, undo=True))

    async def _give_back(self, reservation: Reservation, *, failed: bool, undo: bool) -> Heartbeat | None:
        session_id = reservation.session_id
        after = None
        try:
            after = await self._retrying(self.repo.refund, reservation)
            if after is not None:
                self.stats.refunded += 1
            elif undo:
                after = await self._retrying(self.repo.unconfirm, reservation)
                if after is not None:
                    self.stats.withdrawn += 1
        except (HeartbeatError, StoreError) as exc:
            log.error(
                "cannot give the heartbeat slot of %s back: %s; it is reclaimed once stale",
                session_id, exc,
            )
            failed = True
        if after is not None:
            self._apply(session_id, after)
        else:
            await self._refresh_quietly(session_id)
        if failed:
            self._hold_off(session_id)
        return after

    async def _withdraw_after(self, attempt: asyncio.Future[bool], reservation: Reservation) -> None:
        try:
            await attempt
        except Exception:
            pass
        await self.withdraw(reservation)

    async def _refund_abandoned(self, attempt: asyncio.Future[Reservation | None]) -> None:
        try:
            reservation = await attempt
        except Exception:
            return
        if reservation is not None:
            await self.refund(reservation)

    async def _retrying(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the store, retried after a ``StoreError`` (see
        :data:`GIVE_BACK_RETRY_DELAYS`); the last error propagates."""
        for delay in self.retry_delays:
            try:
                return await self._call(fn, *args)
            except StoreError as exc:
                log.warning("store error (retrying in %.2f s): %s", delay, exc)
            await asyncio.sleep(delay)
        return await self._call(fn, *args)
