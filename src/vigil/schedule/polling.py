"""What the heartbeat and cron schedulers share: counted store calls off the event loop, the
loop that notices schedule changes made by other processes (woken at once by a notification
where the store has them), and how often it looks."""

from __future__ import annotations

import asyncio
import logging
import math
import os
from typing import Any, Awaitable, Callable, TypeVar

from vigil.clock import Clock
from vigil.schedule.changes import on_change
from vigil.store import SessionStore, StoreError

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
    clock: Clock,
    interval: float,
    check: Callable[[], Awaitable[Any]],
    what: str,
    *,
    store: SessionStore | None = None,
) -> None:
    """Every ``interval`` seconds, run ``check``. With a ``store`` that has notifications
    (PostgreSQL), also run it as soon as any process announces a schedule change, and once
    when listening starts or resumes after a lost connection (what was announced meanwhile is
    lost); the poll stays, so a lost notification only costs time. A store error is
    transient: keep the schedule we have, log it, and look again next time."""
    # Asked before anything is awaited: without notifications this is the plain poll.
    if store is None or store.notifications() is None:
        while True:
            await clock.sleep(interval)
            await _check(check, what)
    woken = asyncio.Event()
    stop_listening = await _listen(store, woken, what)
    if stop_listening is None:
        return await watch_changes(clock, interval, check, what)
    timer: asyncio.Future[None] | None = None
    waiter: asyncio.Future[Any] | None = None
    try:
        await _check(check, what)  # a change made before the LISTEN took effect
        while True:
            if timer is None:
                timer = asyncio.ensure_future(clock.sleep(interval))
            if not woken.is_set():
                waiter = asyncio.ensure_future(woken.wait())
                await asyncio.wait({timer, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
            woken.clear()
            if timer.done():
                timer = None  # the poll keeps its cadence whatever notifications come
            await _check(check, what)
    finally:
        stop_listening()
        for future in (timer, waiter):
            if future is not None:
                future.cancel()


class _Wake:
    """Sets ``woken`` in the event loop from the listener thread."""

    def __init__(self, woken: asyncio.Event) -> None:
        self._woken = woken
        self._loop = asyncio.get_running_loop()

    def __call__(self, _generation: str = "") -> None:
        try:
            self._loop.call_soon_threadsafe(self._woken.set)
        except RuntimeError:  # the loop is closed: nobody is watching any more
            pass

    def on_reconnect(self) -> None:
        self()


async def _listen(store: SessionStore, woken: asyncio.Event, what: str) -> Callable[[], None] | None:
    subscribing = asyncio.ensure_future(asyncio.to_thread(on_change, store, _Wake(woken)))
    try:
        return await asyncio.shield(subscribing)
    except asyncio.CancelledError:  # stopped while subscribing: undo it once it is done
        subscribing.add_done_callback(_undo)
        raise
    except StoreError as exc:
        log.warning("cannot listen for %s changes (polling only): %s", what, exc)
        return None


def _undo(subscribing: asyncio.Future[Callable[[], None] | None]) -> None:
    if not subscribing.cancelled() and subscribing.exception() is None:
        stop = subscribing.result()
        if stop is not None:
            stop()


async def _check(check: Callable[[], Awaitable[Any]], what: str) -> None:
    try:
        await check()
    except StoreError as exc:
        log.warning("cannot check for %s changes: %s", what, exc)
