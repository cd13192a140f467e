""":class:`WebhooksAdapter`: named HTTP hooks behind the adapter protocol.

Requests come in at ``/hooks/NAME`` on the gateway's HTTP server (:mod:`.routes`); answers,
heartbeats and cron results go out to each hook's ``url`` (:mod:`.outbound`), through the
gateway's durable outbox; a command waiting for approval is told there too (:mod:`.approvals`).
A hook's conversations are routed as ``RouteKey("webhooks", NAME, <conversation key>)``; the
hook is the sender, allowed because its caller signed the request (:attr:`vigil.platforms.webhooks.WebhooksSettings.allow`). The
secrets are read from the environment variables the hooks name, at start and on reload.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import httpx

from vigil.gateway.adapters import health as states
from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.health import HealthState
from vigil.gateway.adapters.webhooks.approvals import announce
from vigil.gateway.adapters.webhooks.outbound import deliver
from vigil.gateway.adapters.webhooks.routes import routes
from vigil.gateway.adapters.webhooks.signing import key_of
from vigil.platforms.webhooks import WEBHOOKS, WebhooksSettings
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Hook:
    """One configured hook as the adapter uses it."""

    name: str
    secret_env: str
    url: str | None
    key: bytes | None
    """The HMAC key of its secret; ``None`` while the variable is not set."""


class WebhooksAdapter:
    """Every hook of one profile (see the module docstring)."""

    name = WEBHOOKS.name

    def __init__(self, settings: WebhooksSettings | None = None, *, environ: Mapping[str, str] | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self.settings = settings or WebhooksSettings()
        self.now = now
        self.gateway: GatewayPort | None = None
        self.hooks: dict[str, Hook] = {}
        self.state = HealthState(WEBHOOKS.name)
        self._environ = environ
        self._client: httpx.AsyncClient | None = None
        self._routes: list[BaseRoute] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- life cycle -----------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway
        self.settings = gateway.settings.webhooks
        self._load()
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.settings.timeout, follow_redirects=False)

    async def stop(self) -> None:
        self.gateway = None
        self.state.set(states.STOPPED, "stopped")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def reload(self, settings: "Settings") -> None:
        """New hooks, urls and secrets take effect at once (a removed hook is refused)."""
        self.settings = settings.webhooks
        self._load()

    def _load(self) -> None:
        env = self._environ if self._environ is not None else os.environ
        hooks = {}
        for name, hook in self.settings.hooks.items():
            secret = str(env.get(hook.secret_env, "")).strip()
            hooks[name] = Hook(name, hook.secret_env, hook.url, key_of(secret) if secret else None)
        self.hooks = hooks
        unset = [hook.secret_env for hook in hooks.values() if hook.key is None]
        if unset:
            problem = f"set the environment variable(s) {', '.join(dict.fromkeys(unset))}"
            self.state.last_error = problem
            log.warning("webhooks: %s", problem)
        if self.gateway is not None:
            if unset:
                self.state.set(states.MISCONFIGURED, problem)
            else:
                names = ", ".join(hooks) or "none"
                self.state.set(states.CONNECTED, f"{len(hooks)} hook(s) at /hooks/NAME: {names}")

    def hook(self, name: str) -> Hook | None:
        """The configured hook called ``name``."""
        return self.hooks.get(name)

    def http_routes(self) -> "Sequence[BaseRoute]":
        if self._routes is None:
            self._routes = list(routes(self))
        return self._routes

    def health(self) -> AdapterHealth:
        return self.state.view()

    # -- the gateway's side ---------------------------------------------------------------------
    async def send(self, message: OutboxEntry) -> None:
        client = self._client
        if self.gateway is None or client is None:
            raise DeliveryError("the webhooks adapter is not running")
        hook = self.hook(message.route.chat)
        if hook is None:
            raise DeliveryError(f"no hook named {message.route.chat!r} in webhooks.hooks", retryable=False)
        try:
            await deliver(self, client, hook, message)
        except DeliveryError as exc:
            self.state.last_error = str(exc)
            raise

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        """A command waiting for approval is told to the hook's url (:mod:`.approvals`);
        nothing else: a hook is sent each answer whole, once it is there."""
        hook, client = self.hook(route.chat), self._client
        if event.get("type") != "approval_request" or hook is None or client is None:
            return
        task = asyncio.ensure_future(announce(self, client, hook, route, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
