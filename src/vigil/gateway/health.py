"""What ``/healthz`` asks of the session store: that it answers, and that it can be written."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from vigil.store.base import SessionStore

StoreCheck = Callable[[], Awaitable[bool]]


def store_check(store: SessionStore) -> StoreCheck:
    """A ``store_ok`` for ``metrics.http_routes``: in a worker thread, one cheap read of
    ``store`` and its write check. ``True``, or the store's error, whose message is the reason
    ``/healthz`` gives: the server unreachable, or ``StoreUnwritable`` while a full disk or a
    read-only file refuses writes (answered 503 until a write passes again)."""

    def probe() -> bool:
        store.schema_version()
        store.check_writable()
        return True

    async def check() -> bool:
        return await asyncio.to_thread(probe)

    return check
