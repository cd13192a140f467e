""":class:`ApiAdapter`: the OpenAI-compatible API behind the adapter protocol."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Sequence

from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.openai_api.matching import ADAPTER
from vigil.gateway.adapters.openai_api.routes import api_routes
from vigil.gateway.adapters.openai_api.state import ApiState
from vigil.gateway.token import load_or_create_token
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings

log = logging.getLogger(__name__)


class ApiAdapter:
    """``/v1/models``, ``/v1/chat/completions`` and ``/v1/responses`` on the gateway's HTTP
    server, for clients that hold the gateway token. Its conversations' source is ``api``."""

    name = ADAPTER

    def __init__(self) -> None:
        self.state = ApiState()
        self._routes: list[BaseRoute] | None = None

    async def start(self, gateway: GatewayPort) -> None:
        self.state.token = await asyncio.to_thread(load_or_create_token, gateway.profile)
        self.state.gateway_port = gateway

    async def stop(self) -> None:
        """Take no more requests; a request waiting for its answer is told the gateway stops
        (its message stays stored and is answered after the restart)."""
        self.state.gateway_port = None
        self.state.exchanges.end_all("the gateway is stopping")
        await self.state.exchanges.lookup.settle()

    def http_routes(self) -> Sequence[BaseRoute]:
        if self._routes is None:
            self._routes = list(api_routes(self.state))
        return self._routes

    async def send(self, message: OutboxEntry) -> None:
        """A reply to a request reaches the request that waits for it. Without one (the client
        went away, a heartbeat's answer) it succeeds all the same: the conversation holds it.
        Not running, it is tried again later (the exchange is remembered for matching then)."""
        gateway = self.state.gateway_port
        if gateway is None:
            raise DeliveryError("the OpenAI-compatible API is not running", retryable=True)
        await self.state.exchanges.replied(gateway, message)

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        """Nothing: each request follows its conversation's events itself."""

    def health(self) -> AdapterHealth:
        if self.state.gateway_port is None:
            return AdapterHealth(False, "not started")
        return AdapterHealth(True, f"{len(self.state.exchanges.waiting)} request(s) waiting for an answer")

    async def reload(self, settings: Settings) -> None:
        """Re-read the gateway token (a new token refuses the old key)."""
        gateway = self.state.gateway_port
        if gateway is not None:
            self.state.token = await asyncio.to_thread(load_or_create_token, gateway.profile)
