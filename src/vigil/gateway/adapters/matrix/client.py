"""matrix-nio's ``AsyncClient`` for the adapter: one logged-in client (an access token, no
password), with nio's own retrying turned off — a lost connection or a 429 comes back at once
as a :class:`DeliveryError` (retryable, with the server's ``retry_after``), and the adapter's
back-off (:mod:`vigil.backoff`) or the outbox decides when to try again.

With ``store`` (a directory) and matrix-nio's ``e2e`` extra installed, the client keeps its
encryption keys there and encrypts and decrypts in encrypted rooms
(:mod:`.crypto`); without, it reads and writes unencrypted rooms only.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from vigil.gateway.adapters.base import DeliveryError

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0
"""Seconds a request other than the long poll may take."""
REFUSED = ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN", "M_USER_DEACTIVATED")
"""Error codes no retry mends: the token is refused, or the room is not ours."""


class Homeserver:
    """The adapter's client of the homeserver (see the module docstring)."""

    def __init__(self, url: str, user_id: str, token: str, *, store: Path | None = None) -> None:
        from nio import AsyncClient, AsyncClientConfig

        encrypted = store is not None
        config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=REQUEST_TIMEOUT,
                                   encryption_enabled=encrypted, store_sync_tokens=False)
        self.nio = AsyncClient(url, user_id, store_path=str(store) if encrypted else "", config=config)
        self.user_id = user_id
        self.token = token
        self.store = store
        self.device_id = ""

    @property
    def encrypts(self) -> bool:
        """Whether this client reads and writes encrypted rooms."""
        return self.nio.olm is not None

    async def login(self) -> str:
        """Check the token (``whoami``) and take up the account; its user id."""
        from nio import WhoamiResponse

        self.nio.access_token = self.token
        answer = await self.call(self.nio.whoami())
        assert isinstance(answer, WhoamiResponse)
        self.device_id = answer.device_id or ""
        if self.store is not None and self.device_id:
            self.store.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.nio.restore_login(answer.user_id, self.device_id, self.token)
        else:
            self.nio.user_id = answer.user_id
        self.user_id = answer.user_id
        return answer.user_id

    async def call(self, request: Any) -> Any:
        """Await one nio request; its response, or :class:`DeliveryError` for an error answer
        or a connection that failed."""
        from nio import ErrorResponse

        try:
            answer = await request
        except asyncio.CancelledError:
            raise
        except (OSError, asyncio.TimeoutError) as exc:
            raise DeliveryError(f"the homeserver cannot be reached: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # aiohttp's client errors, nio's protocol errors
            name = type(exc).__name__
            if name in ("LocalProtocolError", "OlmUnverifiedDeviceError", "EncryptionError"):
                raise DeliveryError(f"matrix-nio: {exc}", retryable=False) from None
            raise DeliveryError(f"the homeserver cannot be reached: {name}: {exc}") from None
        if isinstance(answer, ErrorResponse):
            raise error(answer)
        return answer

    async def send(self, room: str, content: dict[str, Any], *, kind: str = "m.room.message",
                   txn: str | None = None) -> str:
        """Send one event (encrypted where the room is and this client can); its event id.
        The same ``txn`` sent again is the same event (the homeserver keeps transaction ids)."""
        answer = await self.call(self.nio.room_send(room, kind, content, tx_id=txn, ignore_unverified_devices=True))
        return str(answer.event_id)

    async def close(self) -> None:
        try:
            await self.nio.close()
        except Exception as exc:  # closing a session that failed half-way
            log.debug("matrix: closing the client: %s", exc)


def error(answer: Any) -> DeliveryError:
    """The :class:`DeliveryError` of a nio error response."""
    code = str(getattr(answer, "status_code", "") or "")
    message = str(getattr(answer, "message", "") or "")
    status = getattr(getattr(answer, "transport_response", None), "status", 0) or 0
    retry = getattr(answer, "retry_after_ms", None)
    text = f"{code or status}: {message}".strip(": ")
    if code == "M_LIMIT_EXCEEDED" or status == 429:
        return DeliveryError(f"rate limited: {text}", retry_after=(retry or 5000) / 1000)
    if code in REFUSED or status in (401, 403):
        return DeliveryError(text, retryable=False)
    if status and 400 <= status < 500 and status not in (404, 408):
        return DeliveryError(text, retryable=False)
    return DeliveryError(text)
