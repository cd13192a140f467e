"""The profile's schedule generation: one ``state_meta`` key that changes whenever any schedule
(or the emergency stop) changes, so that a running engine notices changes made by another
process by reading a single key instead of polling every schedule."""

from __future__ import annotations

import secrets

from vigil.store import SessionStore

GENERATION_KEY = "schedule:generation"


def bump_generation(store: SessionStore) -> str:
    """Mark that some schedule changed; returns the new generation token."""
    token = secrets.token_hex(8)
    store.set_meta(GENERATION_KEY, token)
    return token


def read_generation(store: SessionStore) -> str | None:
    """The current generation token (``None`` before the first change)."""
    entry = store.get_meta(GENERATION_KEY)
    return None if entry is None else str(entry.value)
