"""The outbox sender: every reply the gateway owes goes out from the store, retried with back-off.

A reply is queued durably (``store.gateway``) before anything tries to send it, so a crash or
a platform outage delays it but never loses it. A failed try is repeated after
:func:`backoff` (or the platform's ``retry_after``); after ``attempts`` tries, or at once for
an error the platform says is permanent, the entry is marked failed, logged and counted.
Replies to one chat go out in the order they were queued: while one waits for its retry,
the later ones wait behind it; different chats are served at the same time. A reply the
platform took is not sent again because the store failed to record that.

Gateways sharing one store ("workers") each send only the entries they claimed
(``outbox_claim``): a reply is sent by one of them, and a chat's replies by one at a time, in
order. A worker whose process is found gone (on the same machine as a live worker) has its
claims released by that worker at once (:mod:`vigil.gateway.cluster.workers`); one that only went
silent (another machine, a stall) leaves its claims to lapse after :attr:`OutboxSender.hold`.
Then another sends those replies (so a reply the dead worker had handed over may go twice, as
after a crash of a lone gateway).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, Callable, Mapping, TypeVar

from vigil.clock import Clock
from vigil.gateway.adapters.base import Adapter, DeliveryError
from vigil.models.retry import RetryPolicy
from vigil.store import SessionStore, StoreError
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

log = logging.getLogger(__name__)

BACKOFF_BASE = 1.0
BACKOFF_CAP = 300.0
BACKOFF = RetryPolicy(base_delay=BACKOFF_BASE, max_delay=BACKOFF_CAP)
"""The outbox's pauses: vigil's one back-off formula, with its own base and cap."""
SEND_TIMEOUT = 60.0
"""Seconds one try to hand a reply to its platform may take; a hung call counts as a failed
try (retried) instead of holding up its chat's replies."""

CLAIM_HOLD = 2.0
"""A claim on entries to send holds for this many send timeouts (2 minutes by default): the
longest a silent worker's unsent replies wait for another worker."""
TRY_NEEDS = 1.25
"""Send timeouts of its claim an entry must have left for a try to start: the try ends, or
is given up, with a quarter of a timeout to spare for marking it sent and for clocks of
workers' machines that disagree a little, before another worker may take the entry. With
less left, the chat's task ends and the next pass claims its entries again (renewed)."""

CONCURRENT_CHATS = 16
"""Chats whose replies are handed to their platforms at the same time."""
DUE_BATCH = 500
"""Due entries read at a time."""

IDLE_RECHECK = 30.0
"""Seconds between looks at the outbox when nothing wakes the sender (another process may
have queued something; a clock jump may have made something due)."""

T = TypeVar("T")

Report = Callable[[str, OutboxEntry, str | None], None]
"""Called with ``sent``, ``retry`` or ``failed``, the entry and the error text."""


def backoff(attempt: int) -> float:
    """Seconds before try ``attempt + 1``: about 1, 2, 4 … capped at 5 minutes, each scaled by
    a random factor in [0.5, 1) so that chats failing together do not retry together."""
    return BACKOFF.delay(max(0, attempt - 1))


class OutboxSender:
    """Sends due outbox entries through their adapters until stopped."""

    def __init__(
        self,
        store: SessionStore,
        adapters: Mapping[str, Adapter],
        clock: Clock,
        *,
        attempts: int,
        report: Report,
        send_timeout: float = SEND_TIMEOUT,
        worker: str | None = None,
        claim_hold: float | None = None,
    ) -> None:
        """``worker`` names this sender's claims among the workers sharing the store (a new
        random id by default); ``claim_hold`` is how long they hold (default
        :data:`CLAIM_HOLD` send timeouts), more than :data:`TRY_NEEDS` send timeouts."""
        if claim_hold is not None and not claim_hold > TRY_NEEDS * send_timeout:
            raise ValueError(f"an outbox claim must hold longer than {TRY_NEEDS:g} send timeouts, not {claim_hold!r} s")
        self.store = store
        self.adapters = adapters
        self.clock = clock
        self.attempts = attempts
        self.report = report
        self.send_timeout = send_timeout
        self.worker = worker or secrets.token_hex(8)
        self.claim_hold = claim_hold
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sending = asyncio.Lock()
        """One pass at a time: a drain beside the running sender would send an entry twice."""
        self._held: dict[RouteKey, tuple[int, float]] = {}
        """Chats whose oldest reply waits for a retry (its id, when): later replies wait too."""
        self._unmarked: set[int] = set()
        """Entries the platform took whose ``sent`` mark the store refused (not sent again)."""
        self._chats: dict[RouteKey, asyncio.Task[None]] = {}
        """Chats being served now, by the task serving them."""
        self._finished: dict[int, float] = {}
        """Entries sent or failed lately (when): a due list read before that is stale for them."""
        self._limit = asyncio.Semaphore(CONCURRENT_CHATS)

    @property
    def hold(self) -> float:
        """Seconds a claim on entries to send holds."""
        return self.claim_hold if self.claim_hold is not None else CLAIM_HOLD * self.send_timeout

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="outbox")

    def wake(self) -> None:
        """Something was queued: look now."""
        self._wake.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:  # first: the chat tasks wake it as they end
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        chats = list(self._chats.values())
        for running in chats:
            running.cancel()
        await asyncio.gather(*chats, return_exceptions=True)

    async def drain(self) -> None:
        """Send everything due now, and wait until it is sent or waits for a retry (shutdown
        and tests)."""
        while True:
            await self._send_due()
            if not self._chats:
                return
            await asyncio.wait(list(self._chats.values()))

    async def _run(self) -> None:
        failures = 0
        while True:
            self._wake.clear()
            try:
                await self._send_due()
                next_due = await self._store(self.store.gateway.outbox_next_due, worker=self.worker)
                if next_due is not None and next_due <= self.clock.now():
                    if self._held or self._chats:
                        # what is due waits behind a chat being served (its end wakes this
                        # loop) or behind a held chat: look again when its retry is due
                        next_due = min((retry_at for _id, retry_at in self._held.values()), default=None)
                    else:  # due, yet not claimed: another worker is claiming it this instant
                        next_due = self.clock.now() + BACKOFF_BASE
                failures = 0
            except StoreError as exc:
                failures += 1
                log.warning("outbox: store error (retrying): %s", exc)
                next_due = self.clock.now() + backoff(failures)
            now = self.clock.now()
            wait = IDLE_RECHECK if next_due is None else min(IDLE_RECHECK, max(0.0, next_due - now))
            # not wait_for: on Python 3.11 it swallows a cancel that meets the wake-up (a chat
            # task ending as the gateway stops), and the loop would run on
            waiter = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({waiter}, timeout=wait)
            finally:
                waiter.cancel()

    async def _store(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` in a worker thread. Cancelled meanwhile (the gateway stops), it still waits
        for the thread: the caller closes the store next, under a query that still runs."""
        call = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            await asyncio.wait([call])
            raise

    async def _send_due(self) -> None:
        async with self._sending:
            await self._send_due_now()

    async def _send_due_now(self) -> None:
        """Claim the due replies and hand each chat's to a task of its own (one per chat at a
        time, at most :data:`CONCURRENT_CHATS` sending at once): a slow platform call delays
        its own chat only. Entries claimed again while their chat is being served are left to
        that chat's next task (the claim renewed meanwhile)."""
        while True:
            now = self.clock.now()
            due = await self._store(self.store.gateway.outbox_claim, self.worker, now, limit=DUE_BATCH, hold=self.hold)
            self._release_stale_holds({entry.id for entry in due}, now)
            by_route: dict[RouteKey, list[OutboxEntry]] = {}
            for entry in due:
                if entry.id in self._finished or entry.route in self._chats:
                    continue  # finished while the query ran, or its chat is being served
                held = self._held.get(entry.route)
                if held is not None and (held[0] != entry.id or held[1] > now):
                    continue  # an older reply to this chat waits for its retry: keep the order
                by_route.setdefault(entry.route, []).append(entry)
            for route, entries in by_route.items():
                self._chats[route] = asyncio.create_task(self._send_chat(route, entries), name=f"outbox {route.adapter}")
            self._forget_finished(now)
            if len(due) < DUE_BATCH or not by_route:
                return

    async def _send_chat(self, route: RouteKey, entries: list[OutboxEntry]) -> None:
        """One chat's due replies, in order, stopping at one that must wait for a retry or
        whose claim has too little left for a try (the next pass claims it again)."""
        try:
            async with self._limit:
                for entry in entries:
                    if entry.id not in self._unmarked and not self._claim_allows_a_try(entry):
                        break
                    try:
                        await self._send(entry)
                    except StoreError as exc:
                        log.warning("outbox: store error (retrying): %s", exc)
                        self._held[route] = (entry.id, self.clock.now() + BACKOFF_BASE)
                    if route in self._held:
                        break
        finally:
            if self._chats.get(route) is asyncio.current_task():
                del self._chats[route]
            self._wake.set()  # what was queued for this chat meanwhile is due now

    def _claim_allows_a_try(self, entry: OutboxEntry) -> bool:
        until = entry.claim_until if entry.claim_until is not None else self.clock.now() + self.hold
        return self.clock.now() + TRY_NEEDS * self.send_timeout <= until

    def _forget_finished(self, now: float) -> None:
        for entry_id, at in list(self._finished.items()):
            if now - at > IDLE_RECHECK:
                del self._finished[entry_id]

    def _release_stale_holds(self, due_ids: set[int], now: float) -> None:
        """A held entry that should be due long since but is not among the claimed ones was
        finished or claimed elsewhere: its chat is no longer held here."""
        for route, (entry_id, retry_at) in list(self._held.items()):
            if entry_id not in due_ids and now > retry_at + IDLE_RECHECK:
                del self._held[route]

    async def _send(self, entry: OutboxEntry) -> None:
        tables = self.store.gateway
        if entry.id not in self._unmarked:
            adapter = self.adapters.get(entry.route.adapter)
            try:
                if adapter is None:
                    raise DeliveryError(f"no '{entry.route.adapter}' adapter is running")
                await asyncio.wait_for(adapter.send(entry), self.send_timeout)
            except asyncio.TimeoutError:
                await self._failed(entry, DeliveryError(f"the platform did not answer within {self.send_timeout:g} s"))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an adapter bug must not stop the outbox
                await self._failed(entry, exc)
                return
            self._unmarked.add(entry.id)
        # Taken by the platform: a store error marking it is retried without sending again.
        await self._store(tables.outbox_sent, entry.id, now=self.clock.now())
        self._finished[entry.id] = self.clock.now()
        self._unmarked.discard(entry.id)
        self._unhold(entry)
        self.report("sent", entry, None)

    async def _failed(self, entry: OutboxEntry, exc: Exception) -> None:
        tables = self.store.gateway
        error = str(exc) or type(exc).__name__
        retryable = getattr(exc, "retryable", True)
        tries = entry.attempts + 1
        if not retryable or tries >= self.attempts:
            await self._store(tables.outbox_fail, entry.id, error=error, now=self.clock.now())
            self._finished[entry.id] = self.clock.now()
            log.error("outbox: reply %d to %s failed for good after %d tries: %s",
                      entry.id, entry.route.adapter, tries, error)
            self._unhold(entry)
            self.report("failed", entry, error)
            return
        retry_at = self.clock.now() + (getattr(exc, "retry_after", None) or backoff(tries))
        await self._store(tables.outbox_retry, entry.id, error=error, next_attempt_at=retry_at)
        self._held[entry.route] = (entry.id, retry_at)
        self.report("retry", entry, error)

    def _unhold(self, entry: OutboxEntry) -> None:
        if self._held.get(entry.route, (None, 0.0))[0] == entry.id:
            del self._held[entry.route]
