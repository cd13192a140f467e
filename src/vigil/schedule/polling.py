"""What the heartbeat and cron schedulers share: counted store calls off the event loop, the
loop that notices schedule changes made by other processes, and how often it looks."""

from __future__ import annotations

import asyncio
import logging
import math
import os
from typing import Any, Awaitable, Callable, TypeVar

from vigil.clock import Clock
from vigil.store import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Offload = Callable[..., Awaitable[Any]]
"""Runs a blocking store call without blocking the loop (``asyncio.to_thread`` by default)."""

TEST_POLL_ENV = "VIGIL_TEST_SCHEDULE_POLL_SECONDS"
"""Test-only: lowers the schedulers' poll interval (seconds, may be fractional) and with it
the heartbeat lease time (see :mod:`vigil.schedule.heartbeat.lease`), so an end-to-end test
can watch a heartbeat change hands between processes in seconds. Never set this in real use;
it goes with ``VIGIL_TEST_HEARTBEAT_MIN_SECONDS`` (:mod:`vigil.schedule.intervals`)."""


def poll_override() -> float | None:
    """The test-only poll interval, or ``None`` when it is not set (or not a positive number)."""
    raw = os.environ.get(TEST_POLL_ENV)
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def poll_seconds(default: float) -> float:
    """``default``, or the test-only interval when that is set and shorter. A ``default`` of 0
    or less (no polling) stays as it is."""
    override = poll_override()
    if default <= 0 or override is None:
        return default
    return min(default, override)


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
