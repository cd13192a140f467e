"""Socket Mode (``slack.socket_mode``): for a gateway without a public URL, the app connects
out to Slack over a WebSocket (slack_sdk's built-in Socket Mode client, no extra dependency)
with the app-level token (``SLACK_APP_TOKEN``) and receives the same events, slash commands
and interactions as over HTTP. Each envelope is acknowledged only after the adapter handled it
(a message: stored), so one lost in a crash is sent again by Slack.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from vigil.backoff import Backoff, Streak
from vigil.gateway.adapters.base import GatewayClosed

if TYPE_CHECKING:
    from slack_sdk.socket_mode.builtin import SocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest

    from vigil.gateway.adapters.slack.adapter import SlackAdapter

log = logging.getLogger(__name__)

HANDLE_TIMEOUT = 30.0
RETRY_CAP = 300.0


class SocketModeLink:
    """The adapter's Socket Mode connection."""

    def __init__(self, adapter: "SlackAdapter", app_token: str) -> None:
        self.adapter = adapter
        self.app_token = app_token
        self.client: SocketModeClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect (in the background with back-off when Slack cannot be reached now)."""
        from slack_sdk.socket_mode.builtin import SocketModeClient

        api = self.adapter.api
        assert api is not None
        self._loop = asyncio.get_running_loop()
        self.client = SocketModeClient(app_token=self.app_token, web_client=api.client, auto_reconnect_enabled=True)
        self.client.socket_mode_request_listeners.append(self._on_request)  # type: ignore[arg-type]
        if not await self._connect():
            self._retry = asyncio.create_task(self._keep_trying(), name="slack-socket-mode")

    async def _connect(self) -> bool:
        client = self.client
        if client is None:
            return False
        try:
            await asyncio.to_thread(client.connect)
        except Exception as exc:  # the SDK raises its own, aiohttp-free errors and OSError
            self.adapter.set_state("retrying", f"Socket Mode cannot connect: {type(exc).__name__}: {exc}")
            return False
        if self.adapter.bot_user:
            self.adapter.set_state("connected", None)
        return True

    async def _keep_trying(self) -> None:
        failures = Streak(Backoff(1.0, RETRY_CAP))
        while self.client is not None:
            await asyncio.sleep(failures.next())
            if await self._connect():
                return

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        client, self.client = self.client, None
        if client is not None:
            # closing waits for the SDK's receive timeout (seconds): it runs in the background,
            # and nothing it still receives is handled (see _on_request)
            client.auto_reconnect_enabled = False
            threading.Thread(target=client.close, name="slack-socket-close", daemon=True).start()

    # -- envelopes (called on the SDK's threads) ---------------------------------------------------
    def _on_request(self, client: "SocketModeClient", request: "SocketModeRequest") -> None:
        from slack_sdk.socket_mode.response import SocketModeResponse

        loop = self._loop
        if client is not self.client or loop is None or loop.is_closed():
            return  # stopped: not acknowledged, so Slack sends it again
        future = asyncio.run_coroutine_threadsafe(self._handle(request.type, request.payload), loop)
        try:
            payload = future.result(HANDLE_TIMEOUT)
        except GatewayClosed:
            return  # not acknowledged: Slack sends it again
        except Exception:
            log.exception("Slack Socket Mode: an envelope of type %s failed", request.type)
            return
        client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id, payload=payload))

    async def _handle(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        from vigil.gateway.adapters.slack import intake

        adapter = self.adapter
        if kind == "events_api" and payload.get("type") == "event_callback":
            await intake.on_event(adapter, payload)
        elif kind == "slash_commands":
            note = await intake.on_command(adapter, {k: str(v) for k, v in payload.items()})
            return {"response_type": "ephemeral", "text": note} if note else None
        elif kind == "interactive":
            intake.on_interaction(adapter, payload)
        return None
