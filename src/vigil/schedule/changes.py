"""The profile's schedule generation: one ``state_meta`` key that changes whenever any schedule
(or the emergency stop) changes, so that a running engine notices changes made by another
process by reading a single key instead of polling every schedule. On a store with
notifications (PostgreSQL) each change is also announced on :data:`CHANNEL`, so the engines of
other processes look at once instead of at their next poll."""

from __future__ import annotations

import secrets
from typing import Callable

from vigil.store import SessionStore

GENERATION_KEY = "schedule:generation"
CHANNEL = "schedule"
"""The notification channel a change is announced on; the payload is the new generation."""


def bump_generation(store: SessionStore) -> str:
    """Mark that some schedule changed (and announce it); returns the new generation token."""
    token = secrets.token_hex(8)
    store.set_meta(GENERATION_KEY, token)
    notifications = store.notifications()
    if notifications is not None:
        notifications.publish(CHANNEL, token)
    return token


def read_generation(store: SessionStore) -> str | None:
    """The current generation token (``None`` before the first change)."""
    entry = store.get_meta(GENERATION_KEY)
    return None if entry is None else str(entry.value)


def on_change(store: SessionStore, wake: Callable[[str], None]) -> Callable[[], None] | None:
    """Have ``wake(generation)`` called (in another thread) whenever any process, this one
    included, bumps the generation; returns the function that stops it, or ``None`` when the
    store has no notifications (the caller polls). Blocks until listening; ``StoreError`` if
    it cannot. ``wake`` may have an ``on_reconnect()`` (see ``store.notify``)."""
    notifications = store.notifications()
    return None if notifications is None else notifications.subscribe(CHANNEL, wake)
