"""Keeping the gateway's own tables small over months: answered messages and sent replies older
than ``gateway.keep_days`` leave the inbox and the outbox, at start and every few hours.

Only the gateway's delivery records go (:meth:`GatewayTables.prune`): the conversations, their
messages and everything still pending, running, set aside or failed stay. An entry is kept that
long because a platform may deliver a message again (some retry for hours) and an API client
may resend a request with its idempotency key; after ``keep_days`` such a redelivery is taken as
new, and the key is answered with a clear 409.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.gateway.parts import Services

log = logging.getLogger(__name__)

DAY = 86_400.0
PRUNE_EVERY = 6 * 3_600.0
"""Seconds between two prunes of a running gateway."""


async def prune_once(gateway: Services) -> int:
    """Delete what is older than ``gateway.keep_days``; how many entries went (logged when any)."""
    before = gateway.clock.now() - gateway.settings.gateway.keep_days * DAY
    gone = await asyncio.to_thread(gateway.store.gateway.prune, before)
    if gone:
        gateway.say(f"vigil gateway: {gone} answered message(s) and sent reply(ies) older than "
                    f"{gateway.settings.gateway.keep_days} day(s) left the inbox and outbox")
    return gone


class Pruner:
    """:func:`prune_once` at start and every ``every`` seconds while the gateway runs; a failing
    store is logged and tried again at the next round (nothing depends on it being on time)."""

    def __init__(self, gateway: Services, every: float = PRUNE_EVERY) -> None:
        self.gateway = gateway
        self.every = every
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                await prune_once(self.gateway)
            except (StoreError, OSError) as exc:
                log.warning("cannot prune the gateway's inbox and outbox (tried again later): %s", exc)
            await asyncio.sleep(self.every)
