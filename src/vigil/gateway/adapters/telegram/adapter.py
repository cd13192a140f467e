""":class:`TelegramAdapter`: Telegram behind the adapter protocol, on python-telegram-bot.

Updates come by long polling (:mod:`.polling`, the default) or by webhook (:mod:`.webhook`,
``telegram.mode: webhook``); each message becomes an :class:`Inbound` (:mod:`.inbound`), with
its file saved first (:mod:`.files`). Replies leave the outbox as plain text split at 4096
characters (:mod:`.outbound`), finishing the turn's streamed preview where there is one
(:mod:`.editing`, on the shared :mod:`vigil.gateway.adapters.streaming`), whose message id is kept in the store so that a restart does not show the
answer twice; approvals are inline buttons (:mod:`.buttons`). The token comes from the
environment variable ``telegram.token_env`` names; without it the adapter says it is
misconfigured and the gateway runs on.

With several workers on one store the gateway gives the adapter a poll lease
(:attr:`TelegramAdapter.poll_lease`): every worker sends, one polls (:mod:`.takeover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING, Any, Sequence

from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.gateway.adapters import health as states
from vigil.gateway.adapters.telegram.buttons import ApprovalButtons
from vigil.gateway.adapters.health import HealthState
from vigil.gateway.adapters.live import hand_on
from vigil.gateway.adapters.telegram.redaction import REDACT, install_redaction
from vigil.gateway.adapters.telegram.messages import MessageHandler
from vigil.backoff import Streak
from vigil.gateway.adapters.telegram.polling import Poller, StoredOffset, backoff_streak
from vigil.gateway.adapters.telegram.sending import Sender
from vigil.gateway.adapters.telegram.editing import streamer
from vigil.gateway.adapters.telegram.takeover import PollLease, give_back, poll_in_turn
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute
    from telegram import Bot

    from vigil.config.settings import Settings
    from vigil.platforms.telegram import TelegramSettings

log = logging.getLogger(__name__)

DEFAULT_API = "https://api.telegram.org"
START_TIMEOUT = 5.0
"""Seconds ``start`` waits for Telegram to answer ``getMe`` before it goes on retrying in the
background (the gateway's other adapters are not held up longer)."""


class TelegramAdapter:
    """See the module docstring. ``backoff`` and ``poll_timeout`` are for tests."""

    name = "telegram"

    def __init__(self, *, backoff: tuple[float, float] = (1.0, 60.0), poll_timeout: int = 25,
                 edit_interval: float = 1.0) -> None:
        self.gateway: GatewayPort | None = None
        self.bot: Bot | None = None
        self.state = HealthState()
        self.previews = DurablePreviews(self.name, lambda: self.gateway)
        self.streams = streamer(self._require_bot, self.previews, interval=edit_interval)
        self.buttons = ApprovalButtons(self._require_bot)
        self.sender = Sender(self._require_bot, self.streams)
        self.messages = MessageHandler(self)
        self._backoff = backoff
        self._poll_timeout = poll_timeout
        self._task: asyncio.Task[None] | None = None
        self.poller: Poller | None = None
        """The poller of the connection while this adapter polls (confirmed at stop)."""
        self._routes: list[BaseRoute] | None = None
        self.webhook_secret: str | None = None
        self.username: str | None = None
        self._settings: TelegramSettings | None = None
        self._token: str | None = None
        self.poll_lease: PollLease | None = None
        """Set by a gateway sharing its store with others: long polling runs only while
        this worker holds the lease (``None``: always, the one gateway of the profile)."""

    # -- configuration ----------------------------------------------------------------------
    @property
    def settings(self) -> "TelegramSettings":
        """The section in force: the gateway's at start, the reloaded one after SIGHUP."""
        if self._settings is not None:
            return self._settings
        assert self.gateway is not None
        return self.gateway.settings.telegram

    def _require_bot(self) -> "Bot":
        if self.bot is None:
            raise DeliveryError("the Telegram adapter is not running")
        return self.bot

    # -- life cycle -------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        self.gateway = gateway
        if self._task is not None and not self._task.done():
            return
        settings = self.settings
        await self.previews.load()  # before any event or reply can need them
        token = os.environ.get(settings.token_env, "").strip()
        if not token:
            self.state.set(states.MISCONFIGURED, f"the environment variable {settings.token_env} (the bot token) is not set")
            gateway_say(gateway, f"vigil gateway: telegram is misconfigured: {settings.token_env} is not set")
            return
        if settings.mode == "webhook":
            self.webhook_secret = os.environ.get(settings.webhook_secret_env, "").strip() or None
            if not settings.webhook_url or not self.webhook_secret:
                missing = "telegram.webhook_url" if not settings.webhook_url else settings.webhook_secret_env
                self.state.set(states.MISCONFIGURED, f"webhook mode needs {missing}")
                gateway_say(gateway, f"vigil gateway: telegram is misconfigured: webhook mode needs {missing}")
                return
        # python-telegram-bot's announced behaviour (durations as timedelta), which this adapter
        # reads either way; without it every 429 warns of the change
        os.environ.setdefault("PTB_TIMEDELTA", "1")
        try:
            from telegram import Bot
            from telegram.request import HTTPXRequest
        except ImportError:
            self.state.set(states.MISCONFIGURED, "python-telegram-bot is not installed: pip install 'vigil[telegram]'")
            return
        install_redaction(token)
        self._token = token
        api = (settings.api_url or DEFAULT_API).rstrip("/")
        self.bot = Bot(token, base_url=f"{api}/bot", base_file_url=f"{api}/file/bot",
                       request=HTTPXRequest(connection_pool_size=16),
                       get_updates_request=HTTPXRequest(connection_pool_size=1))
        self.state.set(states.RETRYING, "connecting")
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._run(ready), name="telegram")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ready.wait(), START_TIMEOUT)

    async def _run(self, ready: asyncio.Event) -> None:
        """Connect and receive; an unexpected error starts it over after a pause instead of
        leaving the adapter silently dead."""
        backoff = backoff_streak(*self._backoff)
        while True:
            try:
                await self._connect_and_receive(ready, backoff)
                return  # webhook mode: Telegram calls us from now on
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next()
                log.exception("telegram: the adapter failed; starting over in %.3g s", delay)
                self.state.set(states.RETRYING, f"retrying in {delay:.3g} s", REDACT.scrub(f"{type(exc).__name__}: {exc}"))
                ready.set()
                await asyncio.sleep(delay)

    async def _connect_and_receive(self, ready: asyncio.Event, backoff: Streak) -> None:
        bot = self._require_bot()
        while True:
            try:
                await bot.initialize()
                self.username = bot.username
                await self._register_commands(bot)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next()
                self.state.set(states.RETRYING, f"retrying in {delay:.3g} s", f"cannot reach Telegram: {REDACT.scrub(str(exc))}")
                ready.set()
                await asyncio.sleep(delay)
        backoff.reset()
        if self.settings.mode == "webhook":
            await self._set_webhook(bot, backoff, ready)
            return
        if self.poll_lease is not None:
            await poll_in_turn(self, self.poll_lease, bot, backoff, ready)
            return
        with contextlib.suppress(Exception):
            await bot.delete_webhook()
        self.state.set(states.CONNECTED, f"polling as @{self.username}")
        ready.set()
        await self.new_poller(bot, backoff).run()

    def new_poller(self, bot: "Bot", backoff: Streak, offsets: StoredOffset | None = None) -> Poller:
        """The poller of this connection (confirmed at stop)."""
        self.poller = Poller(bot, self.messages.handle, self.state.set, backoff=backoff,
                              poll_timeout=self._poll_timeout, offsets=offsets)
        return self.poller

    async def _set_webhook(self, bot: "Bot", backoff: Streak, ready: asyncio.Event) -> None:
        from vigil.gateway.adapters.telegram.polling import ALLOWED_UPDATES

        while True:
            try:
                await bot.set_webhook(self.settings.webhook_url or "", secret_token=self.webhook_secret,
                                      allowed_updates=ALLOWED_UPDATES)
                self.state.set(states.CONNECTED, f"webhook for @{self.username}")
                ready.set()
                return
            except Exception as exc:
                delay = backoff.next()
                self.state.set(states.RETRYING, f"retrying in {delay:.3g} s", f"setWebhook failed: {REDACT.scrub(str(exc))}")
                ready.set()
                await asyncio.sleep(delay)

    async def _register_commands(self, bot: "Bot") -> None:
        """The gateway's slash commands as the bot's command menu (best effort)."""
        from telegram import BotCommand

        from vigil.gateway.adapters.telegram.menu import bot_commands

        try:
            await bot.set_my_commands([BotCommand(name, text) for name, text in bot_commands()])
        except Exception as exc:
            log.warning("telegram: the command menu was not registered: %s", REDACT.scrub(str(exc)))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.streams.close()
        await self.previews.close()
        poller, self.poller = self.poller, None
        if poller is not None:
            await poller.confirm()
        await give_back(self.poll_lease)
        bot, self.bot = self.bot, None
        if bot is not None:
            with contextlib.suppress(Exception):
                await bot.shutdown()
        if self.state.state != states.MISCONFIGURED:
            self.state.set(states.STOPPED, "stopped")

    def http_routes(self) -> "Sequence[BaseRoute]":
        if self._routes is None:
            from vigil.gateway.adapters.telegram.webhook import webhook_routes

            self._routes = webhook_routes(self)
        return self._routes

    # -- outbound ---------------------------------------------------------------------------
    async def send(self, message: OutboxEntry) -> None:
        await self.sender.send(message)

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        if self.bot is None:
            return
        await hand_on(route, event, self.streams, self.buttons)

    def health(self) -> AdapterHealth:
        return self.state.view()

    async def reload(self, settings: "Settings") -> None:
        """New settings: allow-lists and group routing at once; a new token, API URL or mode
        restarts the connection."""
        old, new = self.settings if self.gateway is not None else None, settings.telegram
        self._settings = new
        if self.gateway is None or old is None:
            return
        token = os.environ.get(new.token_env, "").strip() or None
        connection = ("api_url", "mode", "token_env", "webhook_url", "webhook_secret_env")
        if token != self._token or any(getattr(old, f) != getattr(new, f) for f in connection):
            await self.stop()
            await self.start(self.gateway)


def gateway_say(gateway: GatewayPort, line: str) -> None:
    say = getattr(gateway, "say", None)
    if callable(say):
        say(line)
