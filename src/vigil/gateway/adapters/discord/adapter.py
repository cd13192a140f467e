""":class:`DiscordAdapter`: Discord behind the adapter protocol, on discord.py.

The bot logs in and holds a Gateway session (:mod:`.link`: reconnected with back-off, resumed
across restarts); messages, ``/vigil …`` and button presses are handed to the gateway by
:mod:`.intake` after :mod:`.inbound` decided which messages are for the agent and where they
belong. Answers stream into one message edited as they are written, with the typing indicator
on while the turn runs (:mod:`vigil.gateway.adapters.streaming`), and leave the outbox through
:mod:`.send`; approvals are buttons (:mod:`.approvals`), files go both ways (:mod:`.files`).
The token comes from the environment variable ``discord.token_env`` names; without it, or
with one Discord refuses, the adapter says it is misconfigured and the gateway runs on. With
several workers on one store every worker sends, and only the one holding the adapter's lease
holds the Gateway session (:attr:`DiscordAdapter.poll_lease`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import aiohttp
import discord

from vigil.gateway.adapters.base import AdapterHealth, DeliveryError, GatewayPort
from vigil.gateway.adapters.discord import intake
from vigil.gateway.adapters.discord.approvals import ApprovalButtons
from vigil.gateway.adapters.discord.inbound import NAME
from vigil.gateway.adapters.discord.link import Link, configure
from vigil.gateway.adapters.discord.send import SUFFIX, Messages, deliver
from vigil.gateway.adapters.health import HealthState
from vigil.gateway.adapters.live import hand_on
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.gateway.adapters.streaming import StreamStyle, Streamer
from vigil.platforms.discord import DISCORD, DiscordSettings
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings

log = logging.getLogger(__name__)

READY_WAIT = 5.0
"""Seconds ``start`` waits for the Gateway's READY before it returns (the session then goes on
connecting in the background, shown as ``retrying``)."""
SEEN = 10_000
"""Message ids remembered as handled (a replay fetches no file twice)."""
TYPING_EVERY = 8.0
"""Seconds between typing indicators while a turn runs (Discord shows one for 10 s)."""


class DiscordAdapter:
    """One bot (one token) for one profile."""

    name = NAME

    def __init__(self, settings: DiscordSettings | None = None, *, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings or DiscordSettings()
        self._environ = environ
        self.gateway: GatewayPort | None = None
        self.link: Link | None = None
        self.health_state = HealthState(NAME, say=self._say)
        self.problem: str | None = "not started"
        self._ready = asyncio.Event()
        self.previews = DurablePreviews(NAME, lambda: self.gateway)
        self.messages = Messages(lambda: self.bot)
        self.streamer = Streamer(self.messages, self.previews,
                                 StreamStyle.of(DISCORD, suffix=SUFFIX, typing_every=TYPING_EVERY))
        self.approvals = ApprovalButtons(self.messages, lambda: self.gateway)
        self.sending: dict[int, tuple[int, Any]] = {}
        """Outbox entries part-way out: (parts sent, the stream whose message the first replaced)."""
        self.interactions: dict[str, tuple[discord.Interaction, float]] = {}
        """``/vigil …`` still answerable through its interaction, by inbox external id."""
        self.last_route: dict[tuple[str, str], RouteKey] = {}
        self.seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.in_flight: set[str] = set()
        self.poll_lease: Any = None
        """Set by a gateway sharing its store with other workers
        (:class:`vigil.gateway.cluster.adapter_lease.AdapterLease`): the Gateway session is held
        only while this worker holds the lease; every worker logs in and sends."""
        self.receiver: str | None = None
        """Who holds the session when another worker does."""
        self._turns: asyncio.Task[None] | None = None

    @property
    def state(self) -> str:
        return self.health_state.state

    @property
    def bot(self) -> discord.Client | None:
        return None if self.link is None else self.link.bot

    # -- life cycle -------------------------------------------------------------------------
    async def start(self, gateway: GatewayPort) -> None:
        if self.gateway is not None and self.link is not None:
            return
        self.gateway = gateway
        self.settings = gateway.settings.discord
        await self._connect()

    async def _connect(self) -> None:
        await self.previews.load()  # before any event or reply can need them
        settings, gateway = self.settings, self.gateway
        assert gateway is not None
        token = (self._environ if self._environ is not None else os.environ).get(settings.token_env, "").strip()
        if not token:
            self.set_state("misconfigured", f"set the environment variable {settings.token_env} (the bot token)")
            return
        configure(settings.api_url)
        link = Link(token, settings.command, self, gateway.store)
        self._ready.clear()
        try:
            await link.login()
        except discord.LoginFailure:
            await link.bot.close()
            self.set_state("misconfigured", f"Discord refuses the bot token in {settings.token_env}")
            return
        except (discord.HTTPException, aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            await link.bot.close()
            raise ConnectionError(f"cannot log in to Discord: {type(exc).__name__}: {exc}") from None
        self.link = link
        if self.poll_lease is None:
            link.connect()
        else:
            self._turns = asyncio.create_task(self._in_turn(link, self.poll_lease), name="discord-lease")
        try:
            await asyncio.wait_for(self._ready.wait(), READY_WAIT)
        except asyncio.TimeoutError:
            self.set_state("retrying", "the Gateway has not said READY yet")

    async def stop(self) -> None:
        await self._release()
        self.gateway = None
        self.set_state("stopped", "stopped")

    async def _release(self) -> None:
        link, self.link = self.link, None
        turns, self._turns = self._turns, None
        if turns is not None:
            turns.cancel()
            await asyncio.gather(turns, return_exceptions=True)
        await self.streamer.close()
        if link is not None:
            await link.close()
        if turns is not None:
            await self._lease_call("release")
        await self.previews.close()
        self.interactions.clear()

    async def reload(self, settings: "Settings") -> None:
        """New settings; a changed token, command or API URL reconnects (resuming the session)."""
        new, old = settings.discord, self.settings
        env = self._environ if self._environ is not None else os.environ
        token = env.get(new.token_env, "").strip()
        self.settings = new
        changed = (new.command, new.api_url) != (old.command, old.api_url) or self.link is None \
            or token != self.link.token
        if self.gateway is not None and changed:
            await self._release()
            await self._connect()

    async def _in_turn(self, link: Link, lease: Any) -> None:
        """Hold the Gateway session while this worker holds ``lease``; send only otherwise (the
        holder's session is resumed by whoever takes the lease next)."""
        while True:
            if not await self._lease_call("take"):
                holder = getattr(getattr(lease, "other", None), "token", None)
                self.receiver = f"worker {holder}" if holder else "another worker"
                if link.receiving:
                    await link.disconnect()
                self.state_changed("connected", None)
            else:
                self.receiver = None
                if not link.receiving and self.state != "misconfigured":
                    link.connect()
            await asyncio.sleep(lease.renew_every)

    async def _lease_call(self, what: str) -> bool:
        """``take`` (a store error keeps a lease whose last renewal has not expired) or ``release``."""
        lease = self.poll_lease
        try:
            return bool(await asyncio.to_thread(getattr(lease, what)))
        except Exception as exc:
            log.warning("Discord: the adapter lease could not %s: %s", what, exc)
            return what == "take" and bool(lease.holds())

    def http_routes(self) -> "Sequence[BaseRoute]":
        return []

    def health(self) -> AdapterHealth:
        user = self.link.user if self.link is not None else None
        view = self.health_state.view(self.problem or f"connected as {user} ({user.id if user else '?'})" + (
            f"; sending only, {self.receiver} receives" if self.receiver else ""))
        return replace(view, ok=view.ok and self.link is not None)

    # -- the link's events (:class:`.link.Events`) --------------------------------------------
    def state_changed(self, state: str, problem: str | None) -> None:
        self.set_state(state, problem)
        if state in ("connected", "misconfigured"):
            self._ready.set()

    async def message(self, message: discord.Message) -> None:
        try:
            await intake.on_message(self, message)
        except Exception:  # one message must not stop the others
            log.exception("Discord: message %s was not handled", message.id)

    async def command(self, interaction: discord.Interaction, text: str | None) -> None:
        await intake.on_command(self, interaction, text)

    async def component(self, interaction: discord.Interaction) -> None:
        await self.approvals.press(interaction)

    # -- the gateway's side ---------------------------------------------------------------------
    async def send(self, message: OutboxEntry) -> None:
        if self.link is None:
            # retryable even when misconfigured: a SIGHUP with the token set sends it after all
            raise DeliveryError(f"Discord is not available: {self.problem}")
        try:
            await deliver(self, message)
        except DeliveryError as exc:
            if "HTTP 401" in str(exc):
                self.set_state("misconfigured", f"Discord refuses the bot token: {exc}")
            raise

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        await hand_on(route, event, self.streamer, self.approvals)

    async def interaction_of(self, entry: OutboxEntry) -> discord.Interaction | None:
        """The ``/vigil …`` interaction ``entry`` answers, while Discord still takes answers to it."""
        gateway = self.gateway
        if not self.interactions or entry.inbox_id is None or gateway is None:
            return None
        inbound = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry.inbox_id)
        found = self.interactions.get(inbound.external_id) if inbound is not None else None
        if found is None or time.monotonic() - found[1] > intake.INTERACTION_LIFE:
            return None
        return found[0]

    # -- helpers ---------------------------------------------------------------------------------
    def remember(self, message_id: str) -> None:
        self.seen[message_id] = None
        while len(self.seen) > SEEN:
            self.seen.popitem(last=False)

    def set_state(self, state: str, problem: str | None) -> None:
        """Enter ``state`` (:mod:`vigil.gateway.adapters.health`); ``problem``: what is wrong."""
        self.problem = problem
        self.health_state.set(state, problem or "", None if state == "stopped" else problem)

    def _say(self, line: str) -> None:
        say = getattr(self.gateway, "say", None)
        if callable(say):
            say(line)
