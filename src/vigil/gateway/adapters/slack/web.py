"""The Slack Web API as the adapter uses it: slack_sdk's ``WebClient`` (standard library HTTP,
no extra dependency) run in a small thread pool, with Slack's errors turned into
:class:`~vigil.gateway.adapters.base.DeliveryError` — retryable for network errors, 5xx and
rate limits (429 with its ``Retry-After``), permanent for what retrying cannot fix
(``invalid_auth``, ``channel_not_found`` …).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from vigil.gateway.adapters.base import DeliveryError

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api"
TIMEOUT = 15

TRANSIENT = frozenset({
    "fatal_error", "internal_error", "service_unavailable", "request_timeout", "ratelimited",
    "team_added_to_org", "rate_limited",
})
"""``ok: false`` errors that may go away by themselves; every other one is permanent."""

Observer = Callable[[DeliveryError | None], None]
"""Told the outcome of every call: ``None`` for success, else the error."""


class SlackApi:
    """Asynchronous calls of the Web API methods the adapter needs."""

    def __init__(self, token: str, api_url: str | None, *, observe: Observer = lambda error: None) -> None:
        base = (api_url or DEFAULT_API_URL).rstrip("/") + "/"
        # no SDK retries: the gateway's outbox retries with back-off and honours Retry-After
        self.client = WebClient(token=token, base_url=base, timeout=TIMEOUT, retry_handlers=[])
        self._pool = ThreadPoolExecutor(max_workers=6, thread_name_prefix="slack-api")
        self._observe = observe

    async def call(self, method: str, **arguments: Any) -> dict[str, Any]:
        """``method`` (``chat.postMessage`` …) with ``arguments``; its answer's data.
        Raises ``DeliveryError``."""
        name = method.replace(".", "_")
        return await self._run(functools.partial(getattr(self.client, name), **arguments), method)

    async def upload(self, path: Path, *, name: str, channel: str, thread_ts: str | None,
                     comment: str | None) -> dict[str, Any]:
        """Upload a file into the channel (thread): files.getUploadURLExternal, the upload,
        files.completeUploadExternal (slack_sdk's ``files_upload_v2``)."""
        data = await asyncio.to_thread(path.read_bytes)
        upload = functools.partial(
            self.client.files_upload_v2, file=data, filename=name, title=name, channel=channel,
            thread_ts=thread_ts, initial_comment=comment or None,
        )
        return await self._run(upload, "files_upload_v2")

    async def _run(self, work: Callable[[], Any], method: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            response = await loop.run_in_executor(self._pool, work)
        except SlackApiError as exc:
            error = delivery_error(exc, method)
        except (SlackClientError, OSError, TimeoutError) as exc:  # connection refused, reset, timeout
            error = DeliveryError(f"Slack {method}: cannot reach the Web API ({type(exc).__name__}: {exc})")
        else:
            self._observe(None)
            data = response.data
            return data if isinstance(data, dict) else {}
        self._observe(error)
        raise error
    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def delivery_error(exc: SlackApiError, method: str) -> DeliveryError:
    """The :class:`DeliveryError` a Web API error means."""
    response = exc.response
    status = getattr(response, "status_code", 0) or 0
    data = getattr(response, "data", None)
    error = data.get("error", "") if isinstance(data, dict) else ""
    if status == 429:
        headers = getattr(response, "headers", {}) or {}
        raw = headers.get("Retry-After") or headers.get("retry-after")
        if isinstance(raw, list):
            raw = raw[0] if raw else None
        try:
            after = float(raw) if raw is not None else None
        except ValueError:
            after = None
        return DeliveryError(f"Slack {method}: rate limited (retry after {after} s)", retry_after=after)
    if status >= 500 or status == 408:
        return DeliveryError(f"Slack {method}: HTTP {status} {error}".rstrip())
    if error in TRANSIENT:
        return DeliveryError(f"Slack {method}: {error}")
    return DeliveryError(f"Slack {method}: {error or f'HTTP {status}'}", retryable=False)
