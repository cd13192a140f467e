""":class:`WebAdapter`: the web chat behind the adapter protocol."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Sequence

from vigil.gateway.adapters.base import AdapterHealth, GatewayPort
from vigil.gateway.adapters.web.api import api_routes
from vigil.gateway.adapters.web.auth import SessionSigner
from vigil.gateway.adapters.web.conversation_api import conversation_routes
from vigil.gateway.adapters.web.events import OpenPages
from vigil.gateway.adapters.web.files import SentFiles, file_routes, link
from vigil.gateway.adapters.web.login import login_routes
from vigil.gateway.adapters.web.pages import page_routes
from vigil.gateway.adapters.web.state import WebState
from vigil.gateway.token import load_or_create_token
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings

log = logging.getLogger(__name__)

REPLY_EVENT = "reply"
"""The event an outbox reply becomes on the open pages: ``{type, session_id, kind, text,
outbox_id, inbox_id}`` (the page has usually streamed it already; it reloads the history
when it has not). A ``file`` adds ``name``, ``size`` and ``url`` (its download link); a
``cron`` answer adds ``job`` and goes to every open page (the others show a notice linking
to the run's conversation)."""


class WebAdapter:
    """The browser chat: a page, a JSON API and a live event stream served on the gateway's
    HTTP server, for one user who logs in with the profile's token."""

    name = "web"

    def __init__(self) -> None:
        self.state = WebState()
        self.files = SentFiles(self.state)
        self._routes: list[BaseRoute] | None = None

    async def start(self, gateway: GatewayPort) -> None:
        self.state.signer = SessionSigner(await asyncio.to_thread(load_or_create_token, gateway.profile))
        self.state.gateway = gateway

    async def stop(self) -> None:
        """End every open event stream (so the HTTP server can stop) and take no more requests."""
        self.state.pages.end_all()
        self.state.gateway = None

    def http_routes(self) -> Sequence[BaseRoute]:
        if self._routes is None:
            state = self.state
            self._routes = [*login_routes(state), *page_routes(state), *api_routes(state),
                            *conversation_routes(state), *file_routes(state, self.files)]
        return self._routes

    async def send(self, message: OutboxEntry) -> None:
        """Show the reply on the pages that have its conversation open. With none open it
        succeeds all the same: the conversation's history holds the answer."""
        event: dict[str, Any] = {
            "type": REPLY_EVENT, "session_id": message.session_id, "kind": message.kind,
            "text": message.text, "outbox_id": message.id, "inbox_id": message.inbox_id,
        }
        targets = {message.route.chat} | ({message.session_id} if message.session_id else set())
        if message.kind == "file":
            sent = self.files.remember(message)
            if sent is not None:
                event.update(name=sent.name, size=message.meta.get("size"), url=link(message.id))
        elif message.kind == "cron":
            event["job"] = message.meta.get("cron_job")
        self.state.pages.publish(targets, event, everyone=message.kind == "cron")

    @property
    def pages(self) -> OpenPages:
        """The open pages (shared with the other workers' by :mod:`vigil.gateway.cluster.relay`)."""
        return self.state.pages

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        """Nothing: each page subscribes to its conversation's events itself."""

    def health(self) -> AdapterHealth:
        if self.state.gateway is None:
            return AdapterHealth(False, "not started")
        return AdapterHealth(True, f"{self.state.pages.count()} page(s) open")

    async def reload(self, settings: Settings) -> None:
        """Re-read the login token: a new token logs every browser out."""
        gateway = self.state.gateway
        if gateway is not None:
            self.state.signer = SessionSigner(await asyncio.to_thread(load_or_create_token, gateway.profile))
