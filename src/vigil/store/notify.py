"""Notifications between the processes that share a store: a small publish/subscribe channel
(PostgreSQL ``LISTEN``/``NOTIFY``), for wake-ups that would otherwise be found by polling.

A notification is a hint, never the record: whatever it announces is in the store already, and
a reader that missed one (a lost connection, a process that started late) finds the same by
reading the store. Backends that serve a single process (SQLite) have none
(``SessionStore.notifications()`` returns ``None``) and callers poll.
"""

from __future__ import annotations

import re
from typing import Callable, Protocol, runtime_checkable

MAX_PAYLOAD = 7900
"""Bytes (UTF-8) a payload may have; PostgreSQL refuses more than 8000 per ``NOTIFY``."""

CHANNEL_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""What a channel name may be: lowercase letters, digits and ``_``, at most 32, starting with
a letter (the backend adds its own namespace, e.g. the PostgreSQL schema)."""


@runtime_checkable
class Notifications(Protocol):
    """Publish/subscribe between every process that uses one store (this one included).

    Delivery is at most once: a notification published while a subscriber's connection is
    down is lost. A subscriber that must not miss anything keeps reading the store now and
    then, and may give its callback an ``on_reconnect()`` method (no arguments), called in the
    listener thread after a lost connection has been re-established and every channel is
    listened to again, so it can read the store once for what it may have missed.
    """

    def publish(self, channel: str, payload: str) -> None:
        """Non-blocking and thread-safe: queued and sent in order by a background thread,
        several queued ones in one transaction. Payloads over MAX_PAYLOAD bytes raise ValueError."""
        ...

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(payload)`` (in the listener thread) for every notification on
        ``channel`` from any process, this one included; returns an unsubscribe function.
        The first subscribe starts the listener (LISTEN before it returns)."""
        ...

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything published so far is sent."""
        ...

    def close(self) -> None:
        """Stop the listener and the sender (sending what is queued first, briefly); idempotent."""
        ...


def check_channel(channel: str) -> str:
    """``channel`` if it is a valid channel name, else ``ValueError`` saying what is allowed."""
    if not isinstance(channel, str) or not CHANNEL_PATTERN.fullmatch(channel):
        raise ValueError(
            f"invalid notification channel {channel!r}: use lowercase letters, digits and _ "
            "(at most 32, starting with a letter)"
        )
    return channel


def check_payload(payload: str) -> str:
    """``payload`` if it can be sent, else ``ValueError`` (too long, not text, or a NUL)."""
    if not isinstance(payload, str):
        raise ValueError(f"a notification payload is text, not {type(payload).__name__}")
    try:
        size = len(payload.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("a notification payload must be valid Unicode text (it has a lone surrogate)") from None
    if size > MAX_PAYLOAD:
        raise ValueError(f"a notification payload is at most {MAX_PAYLOAD} bytes (this one has {size})")
    if "\x00" in payload:
        raise ValueError("a notification payload cannot contain a NUL character")
    return payload
