"""Long polling in exactly one of several workers sharing a store.

Telegram lets one client poll a bot (a second ``getUpdates`` is refused). With a poll lease
(:class:`PollLease`, given by the gateway when its store is shared) every worker's adapter
connects and can send, but only the worker holding the lease polls; the others try to take
it every third of its length and start polling once its holder stops renewing it (dead, or
stopped: a stopping worker releases it). A poller that cannot renew its lease (taken over
while it stalled) stops polling at once. The offset is committed in the store
(:class:`~.polling.StoredOffset`), so the next poller goes on from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

from vigil.gateway.adapters import health as states
from vigil.backoff import Streak
from vigil.gateway.adapters.telegram.polling import Poller, StoredOffset
from vigil.store import StoreError

if TYPE_CHECKING:
    from telegram import Bot

    from vigil.gateway.adapters.telegram.adapter import TelegramAdapter

log = logging.getLogger(__name__)


class PollLease(Protocol):
    """What the adapter needs of the lease (:class:`vigil.gateway.cluster.adapter_lease.AdapterLease`)."""

    renew_every: float

    def take(self) -> bool:
        """Take or renew the lease; whether it is ours now (blocking)."""

    def holds(self) -> bool:
        """Whether the lease as last taken has not expired yet (no store call)."""

    def release(self) -> bool:
        """Give it up if ours (blocking)."""


async def poll_in_turn(adapter: "TelegramAdapter", lease: PollLease, bot: "Bot", backoff: Streak,
                       ready: asyncio.Event) -> None:
    """Poll while holding ``lease``, wait for it otherwise; runs until cancelled."""
    while True:
        if not await _take(lease):
            holder = getattr(getattr(lease, "other", None), "token", None)
            who = f"worker {holder}" if holder else "another worker"
            adapter.state.set(states.CONNECTED, f"sending as @{adapter.username}; {who} polls")
            ready.set()
            await asyncio.sleep(lease.renew_every)
            continue
        with contextlib.suppress(Exception):
            await bot.delete_webhook()
        adapter.state.set(states.CONNECTED, f"polling as @{adapter.username}")
        ready.set()
        store = getattr(adapter.gateway, "store", None)
        poller = adapter.new_poller(bot, backoff, offsets=None if store is None else StoredOffset(store))
        await _poll_while_held(poller, lease)
        adapter.poller = None  # not confirmed at stop: another worker polls now
        log.warning("telegram: the poll lease was lost (taken over while this worker stalled); polling stops here")


async def _poll_while_held(poller: Poller, lease: PollLease) -> None:
    task = asyncio.create_task(poller.run(), name="telegram-poll")
    try:
        while True:
            await asyncio.wait({task}, timeout=lease.renew_every)
            if task.done():
                task.result()  # the poller ended: its error starts the adapter over
                return
            if not await _take(lease):
                return
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _take(lease: PollLease) -> bool:
    """Take or renew; a store error keeps a lease whose last renewal has not expired."""
    try:
        return await asyncio.to_thread(lease.take)
    except StoreError as exc:
        log.warning("telegram: cannot renew the poll lease: %s", exc)
        return lease.holds()


async def give_back(lease: PollLease | None) -> None:
    """Release the lease (a stopping adapter), so another worker polls at its next try."""
    if lease is None:
        return
    try:
        await asyncio.to_thread(lease.release)
    except Exception as exc:  # it lapses by itself
        log.warning("telegram: the poll lease was not released (it lapses): %s", exc)
