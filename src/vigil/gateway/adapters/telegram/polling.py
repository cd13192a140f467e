"""Long polling: ``getUpdates`` in a loop, each update handed to the gateway, and the offset
moved past an update only once the gateway has it.

Telegram forgets the updates below the ``offset`` of the next ``getUpdates`` call, so the
offset is the commit: it moves past an update after :meth:`GatewayPort.receive` returned
(the message is in the store). An update whose hand-over failed for a passing reason (the
gateway is starting or stopping, the store is down) is fetched again; a crash before the next
call re-fetches it too, and the inbox's uniqueness answers it once. Network errors, 5xx, 429
and a refused token are retried with back-off; nothing here ends the gateway.

With several workers on one store (:mod:`.takeover`) the offset is also committed to the
store (:class:`StoredOffset`) after every batch handed over, so the worker that polls next
starts where this one stopped.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from vigil.backoff import Backoff, Streak
from vigil.gateway.adapters.base import GatewayClosed
from vigil.gateway.adapters.telegram.redaction import REDACT
from vigil.gateway.adapters.telegram.outbound import seconds
from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.store import SessionStore

log = logging.getLogger(__name__)

POLL_TIMEOUT = 25
"""Seconds one ``getUpdates`` call waits for an update (Telegram allows up to 50)."""
ALLOWED_UPDATES = ["message", "callback_query"]
POISON_TRIES = 3
"""Tries to hand over an update that fails for no passing reason before it is skipped."""

Report = Callable[[str, str, str | None], None]
"""``(state, detail, error)`` for the adapter's health."""


def backoff_streak(base: float, cap: float) -> Streak:
    """Telegram's reconnect and poll failures in a row, paused by the shared jittered formula."""
    return Streak(Backoff(base, cap))


class StoredOffset:
    """The polling offset in the store (``state_meta['<key>']``): every update below it is in
    the inbox. It only moves forward (compare-and-set), whichever worker writes it."""

    def __init__(self, store: "SessionStore", key: str = "telegram.offset") -> None:
        self.store = store
        self.key = key

    def load(self) -> int | None:
        entry = self.store.get_meta(self.key)
        value = None if entry is None else entry.value
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def save(self, offset: int) -> None:
        for _ in range(10):
            entry = self.store.get_meta(self.key)
            raw = None if entry is None else entry.value
            if isinstance(raw, int) and not isinstance(raw, bool) and raw >= offset:
                return
            if self.store.compare_and_set_meta(self.key, raw, offset):
                return


class Poller:
    """Fetches updates and hands each to ``handle`` until cancelled; ``offsets``: start from
    the offset in the store and commit it there after each batch."""

    def __init__(self, bot: Any, handle: Callable[[Any], Awaitable[None]], report: Report, *,
                 backoff: Streak, poll_timeout: int = POLL_TIMEOUT, offsets: StoredOffset | None = None) -> None:
        self.bot = bot
        self.handle = handle
        self.report = report
        self.backoff = backoff
        self.poll_timeout = poll_timeout
        self.offsets = offsets
        self.offset: int | None = None
        """The next ``getUpdates`` offset: every update below it is in the gateway."""
        self._tries: dict[int, int] = {}

    async def run(self) -> None:
        from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

        if self.offsets is not None:
            try:
                self.offset = await asyncio.to_thread(self.offsets.load) or self.offset
            except StoreError as exc:  # Telegram's own offset then: at worst updates come twice
                log.warning("telegram: the stored polling offset cannot be read: %s", exc)
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=self.offset, timeout=self.poll_timeout, allowed_updates=ALLOWED_UPDATES,
                    read_timeout=self.poll_timeout + 10,
                )
            except RetryAfter as exc:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    delay = seconds(exc.retry_after)
                await self._failed(f"rate limited: retry after {delay:g} s", delay)
                continue
            except InvalidToken:
                await self._failed("Telegram refused the bot token (401): check it", None)
                continue
            except Conflict:
                await self._failed("another client polls this bot, or a webhook is set: removing the webhook", None)
                await self._quietly(self.bot.delete_webhook())
                continue
            except TelegramError as exc:
                await self._failed(f"polling failed: {REDACT.scrub(str(exc))}", None)
                continue
            self.backoff.reset()
            self.report("connected", "polling", None)
            before = self.offset
            await self._hand_over(updates)
            if self.offsets is not None and self.offset is not None and self.offset != before:
                await self._commit(self.offset)

    async def _commit(self, offset: int) -> None:
        assert self.offsets is not None
        try:
            await asyncio.to_thread(self.offsets.save, offset)
        except StoreError as exc:  # the inbox still answers a re-fetched update once
            log.warning("telegram: the polling offset is not stored: %s", exc)

    async def _hand_over(self, updates: Any) -> None:
        for update in updates:
            try:
                await self.handle(update)
            except (GatewayClosed, StoreError, OSError) as exc:
                # not in the gateway: fetched again from this offset after a pause
                await self._failed(f"could not hand an update to the gateway: {exc}", None, connected=True)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                tries = self._tries.get(update.update_id, 0) + 1
                self._tries[update.update_id] = tries
                log.exception("telegram: update %s could not be handled (try %d)", update.update_id, tries)
                if tries < POISON_TRIES:
                    await asyncio.sleep(self.backoff.next())
                    return
                log.error("telegram: update %s skipped after %d tries", update.update_id, tries)
            self._tries.pop(update.update_id, None)
            self.offset = update.update_id + 1

    async def _failed(self, error: str, delay: float | None, *, connected: bool = False) -> None:
        pause = self.backoff.next() if delay is None else delay
        self.report("connected" if connected else "retrying", f"retrying in {pause:.3g} s", error)
        log.warning("telegram: %s (retrying in %.3g s)", error, pause)
        await asyncio.sleep(pause)

    async def confirm(self, timeout: float = 2.0) -> None:
        """Tell Telegram every handed-over update is done (a ``getUpdates`` with the offset
        that returns at once), so a restart does not fetch them again."""
        if self.offset is None:
            return
        await self._quietly(asyncio.wait_for(
            self.bot.get_updates(offset=self.offset, timeout=0, limit=1, allowed_updates=ALLOWED_UPDATES), timeout))

    @staticmethod
    async def _quietly(call: Awaitable[Any]) -> None:
        try:
            await call
        except Exception as exc:  # best effort
            log.info("telegram: %s", REDACT.scrub(str(exc)) or type(exc).__name__)
