"""What the heartbeat and cron schedulers share: counted store calls off the event loop, and
the loop that notices schedule changes made by other processes."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, TypeVar

from vigil.clock import Clock
from vigil.store import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Offload = Callable[..., Awaitable[Any]]
"""Runs a blocking store call without blocking the loop (``asyncio.to_thread`` by default)."""


class OffloadedCalls:
    """Calls blocking functions through ``offload`` and counts those still running, so a
    scheduler can tell when it is quiet."""

    def __init__(self, offload: Offload | None = None) -> None:
        self._offload: Offload = offload or asyncio.to_thread
        self.in_flight = 0

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        self.in_flight += 1
        try:
            return await self._offload(fn, *args)
        finally:
            self.in_flight -= 1


async def watch_changes(
    clock: Clock, interval: float, check: Callable[[], Awaitable[Any]], what: str
) -> None:
    """Every ``interval`` seconds, run ``check``. A store error is transient: keep the schedule
    we have, log it, and look again next time."""
    while True:
        await clock.sleep(interval)
        try:
            await check()
        except StoreError as exc:
            log.warning("cannot check for %s changes: %s", what, exc)
