""":class:`SlackAdapter`: Slack behind the adapter protocol (``pip install 'vigil[slack]'``).

Events come over HTTP at ``/slack/events`` on the gateway's server (:mod:`.events`) or, with
``slack.socket_mode``, over a Socket Mode connection (:mod:`.socket`); which messages count and
where they route is :mod:`.inbound`. Answers go out through the Web API (:mod:`.web`) —
Markdown as mrkdwn, long ones split — into the conversation's thread; :mod:`.editing` shows
them as they stream, :mod:`.approvals` asks for approval with buttons. The secrets come from
the environment variables ``slack.*_env`` name; without them the adapter reports itself
``misconfigured`` and the gateway runs on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from vigil.backoff import Backoff, Streak
from vigil.gateway.adapters import health as states
from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.health import HealthState
from vigil.gateway.adapters.live import hand_on
from vigil.gateway.adapters.previews import DurablePreviews, Preview
from vigil.gateway.adapters.slack import inbound as routing
from vigil.gateway.adapters.slack.approvals import ApprovalButtons
from vigil.gateway.adapters.slack.editing import streamer
from vigil.gateway.adapters.slack.events import routes
from vigil.gateway.adapters.slack.intake import Refused
from vigil.gateway.adapters.slack.outgoing import deliver
from vigil.platforms.slack import SlackSettings
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings
    from vigil.gateway.adapters.slack.web import SlackApi

log = logging.getLogger(__name__)

REVOKED = ("invalid_auth", "not_authed", "token_revoked", "account_inactive", "token_expired")
"""Errors that mean the bot token no longer works."""

SEEN = 10_000
"""Event ids remembered as handled (so a redelivery downloads no file twice)."""


class SlackAdapter:
    """One Slack workspace (one bot token) for one profile."""

    name = routing.NAME

    def __init__(self, settings: SlackSettings | None = None, *, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings or SlackSettings()
        self._environ = environ
        self.gateway: GatewayPort | None = None
        self.api: SlackApi | None = None
        self.bot_user = ""
        self.signing_secret = ""
        self.bot_token = ""
        self.health_state = HealthState(routing.NAME, say=self._say)
        self.problem: str | None = "not started"
        self.streamer = streamer(lambda: self.api, DurablePreviews(self.name, lambda: self.gateway))
        self.approvals = ApprovalButtons(lambda: self.api, lambda: self.gateway)
        self.last_route: dict[tuple[str, str], RouteKey] = {}
        self.sending: dict[int, tuple[int, str | None, Preview | None]] = {}
        """Outbox entries part-way out: (parts posted, the placeholder they replace, its record)."""
        self.response_urls: dict[str, str] = {}
        """Slash command external id → its ``response_url`` (answers where the app is no member)."""
        self.seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.in_flight: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._socket: Any = None
        self._routes: list[BaseRoute] | None = None

    # -- life cycle -------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        if self.gateway is not None and self.api is not None:
            return
        self.gateway = gateway
        self.settings = gateway.settings.slack
        await self._connect()

    async def _connect(self) -> None:
        await self.streamer.previews.load()  # before any event or reply can need them
        env = self._environ if self._environ is not None else os.environ
        s = self.settings
        self.bot_token = env.get(s.bot_token_env, "")
        self.signing_secret = env.get(s.signing_secret_env, "")
        app_token = env.get(s.app_token_env, "") if s.socket_mode else ""
        missing = [name for name, value in (
            (s.bot_token_env, self.bot_token),
            (s.app_token_env if s.socket_mode else s.signing_secret_env, app_token if s.socket_mode else self.signing_secret),
        ) if not value]
        if missing:
            self.set_state("misconfigured", f"set the environment variable(s) {', '.join(missing)}")
            return
        try:
            from vigil.gateway.adapters.slack.web import SlackApi
        except ImportError:
            self.set_state("misconfigured", "slack_sdk is not installed: pip install 'vigil[slack]'")
            return
        self.api = SlackApi(self.bot_token, s.api_url, observe=self._observe)
        try:
            identity = await self.api.call("auth.test")
            self.bot_user = str(identity.get("user_id") or "")
        except DeliveryError as exc:
            state = "retrying" if exc.retryable else "misconfigured"
            self.set_state(state, f"auth.test failed: {exc}")
            if exc.retryable:
                self.spawn(self._identify())
        else:
            self.set_state("connected", None)
        if s.socket_mode:
            from vigil.gateway.adapters.slack.socket import SocketModeLink

            self._socket = SocketModeLink(self, app_token)
            await self._socket.start()

    async def _identify(self) -> None:
        """auth.test again with back-off until Slack answers (the bot's own user id)."""
        failures = Streak(Backoff(1.0, 300.0))
        while self.api is not None and not self.bot_user:
            await asyncio.sleep(failures.next())
            try:
                self.bot_user = str((await self.api.call("auth.test")).get("user_id") or "")
            except DeliveryError as exc:
                if not exc.retryable:
                    self.set_state("misconfigured", f"auth.test failed: {exc}")
                    return
            else:
                self.set_state("connected", None)

    async def stop(self) -> None:
        await self._release()
        self.gateway = None
        self.set_state("stopped", "stopped")

    async def _release(self) -> None:
        if self._socket is not None:
            await self._socket.stop()
            self._socket = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.streamer.close()
        await self.streamer.previews.close()
        if self.api is not None:
            self.api.close()
        self.api = None

    async def reload(self, settings: "Settings") -> None:
        """New settings and secrets (a changed token or signing secret takes effect now)."""
        self.settings = settings.slack
        if self.gateway is not None:
            await self._release()
            await self._connect()

    def http_routes(self) -> "Sequence[BaseRoute]":
        if self._routes is None:
            self._routes = list(routes(self))
        return self._routes

    def health(self) -> AdapterHealth:
        how = "Socket Mode" if self.settings.socket_mode else "events at /slack/events"
        view = self.health_state.view(self.problem or f"connected as {self.bot_user or '?'} ({how})")
        return replace(view, ok=view.ok and self.api is not None)

    # -- the platform's side --------------------------------------------------------------------
    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Raise :class:`Refused` unless the request is signed by Slack within 5 minutes."""
        if not self.signing_secret or self.gateway is None:
            raise Refused(503, "the Slack adapter is not configured (no signing secret)")
        from slack_sdk.signature import SignatureVerifier

        timestamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        if not timestamp or not signature or not timestamp.isdigit():
            raise Refused(401, "missing Slack signature")
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:  # Slack sends UTF-8 only (and the SDK cannot check other bytes)
            raise Refused(400, "the body is not UTF-8") from None
        if not SignatureVerifier(self.signing_secret).is_valid(body, timestamp, signature):
            log.warning("Slack: refused a request with a bad or stale signature")
            raise Refused(401, "invalid or stale Slack signature")

    # -- the gateway's side ---------------------------------------------------------------------
    async def send(self, message: OutboxEntry) -> None:
        if self.api is None:
            # retryable even when misconfigured: a SIGHUP with the secret set sends it after all
            raise DeliveryError(f"Slack is not available: {self.problem}")
        await deliver(self, self.api, message)

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        await hand_on(route, event, self.streamer, self.approvals)

    # -- helpers ---------------------------------------------------------------------------------
    def spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def remember(self, event_id: str) -> None:
        self.seen[event_id] = None
        while len(self.seen) > SEEN:
            self.seen.popitem(last=False)

    def set_state(self, state: str, problem: str | None) -> None:
        """Enter ``state`` (:mod:`vigil.gateway.adapters.health`); ``problem``: what is wrong."""
        self.problem = problem
        self.health_state.set(state, problem or "", None if state == states.STOPPED else problem)

    def _say(self, line: str) -> None:
        say = getattr(self.gateway, "say", None)
        if callable(say):
            say(line)

    def _observe(self, error: DeliveryError | None) -> None:
        """Every Web API call's outcome keeps the health current."""
        if error is None:
            if self.health_state.state in ("retrying", "misconfigured") and self.bot_user and self.api is not None:
                self.set_state("connected", None)
            return
        self.health_state.last_error = str(error)
        if error.retryable and self.health_state.state == "connected":
            self.set_state("retrying", str(error))
        elif any(word in str(error) for word in REVOKED):
            self.set_state("misconfigured", f"Slack refuses the bot token: {error}")
