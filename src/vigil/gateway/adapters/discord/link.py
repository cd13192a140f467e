"""The bot's connection to Discord: discord.py's ``Client`` logged in over REST, and its Gateway
session kept open — reconnected with vigil's back-off (:mod:`vigil.backoff`) and resumed, so
that what Discord dispatched meanwhile still arrives.

The session outlives the process as well. Discord keeps a dropped session for a while and
replays, on RESUME, every event after the sequence number the bot names. The link names the
last one whose message is *stored* (a message still being handled holds the number back), and
keeps it in the store's ``state_meta`` (:data:`SESSION_KEY`) — the bot's acknowledgement, in
effect: a gateway killed before it stored a message, or down while people wrote, resumes after
its restart and is sent those messages again (a message stored twice is one inbox entry). A
stop closes with code 4000, which keeps the session resumable; past Discord's window the resume
is refused (INVALID_SESSION) and the bot identifies anew.

``discord.api_url`` (tests) moves discord.py's REST base (``discord.http.Route.BASE``, a
process-wide setting the SDK itself sets for its API version); the Gateway's URL always comes
from ``GET /gateway/bot``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket, ReconnectWebSocket

from vigil.backoff import Backoff, Streak
from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.store import SessionStore

log = logging.getLogger(__name__)

DEFAULT_API = "https://discord.com/api/v10"
SESSION_KEY = "discord.session"
RETRY = Backoff(1.0, 120.0)
SAVE_DELAY = 0.2
"""Seconds the session's sequence waits before it is written (a burst is one write)."""
FATAL = {4004: "Discord refuses the bot token (authentication failed)",
         4010: "Discord refused the shard", 4011: "the bot needs sharding (it is in too many servers)",
         4012: "Discord refused the gateway version", 4013: "Discord refused the intents",
         4014: "the Message Content intent is off: turn it on for the bot in the Developer Portal "
               "(Bot → Privileged Gateway Intents)"}


class Events(Protocol):
    """What the link tells the adapter."""

    def state_changed(self, state: str, problem: str | None) -> None: ...

    async def message(self, message: discord.Message) -> None: ...

    async def command(self, interaction: discord.Interaction, text: str | None) -> None: ...

    async def component(self, interaction: discord.Interaction) -> None: ...


def configure(api_url: str | None) -> None:
    """Point discord.py's REST calls at ``api_url`` (``None``: discord.com)."""
    discord.http.Route.BASE = (api_url or DEFAULT_API).rstrip("/")


class Bot(discord.Client):
    """discord.py's client with vigil's slash command, its events handed to :class:`Events`,
    and the sequence number of each message noted for the session's acknowledgement."""

    def __init__(self, link: "Link", command: str) -> None:
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = intents.message_content = True
        super().__init__(intents=intents, max_ratelimit_timeout=30.0, chunk_guilds_at_startup=False,
                         member_cache_flags=discord.MemberCacheFlags.none(), max_messages=None,
                         allowed_mentions=discord.AllowedMentions.none())  # an answer pings nobody
        self.link = link
        self.tree = app_commands.CommandTree(self)

        @app_commands.describe(command="a vigil command such as: heartbeat every 1h check the deploy")
        @app_commands.allowed_contexts(guilds=True, dms=True)
        async def carried(interaction: discord.Interaction, command: str | None = None) -> None:
            await link.events.command(interaction, command)

        self.tree.add_command(app_commands.Command(name=command, description="Run a vigil command (/help lists them)",
                                                   callback=carried))

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        if event == "message" and self.ws is not None and args:
            self.link.arrived(args[0].id, self.ws.sequence)
        super().dispatch(event, *args, **kwargs)

    async def on_connect(self) -> None:
        self.link.up()

    async def on_resumed(self) -> None:
        self.link.up()

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self.link.events.message(message)
        finally:
            self.link.handled(message.id)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is discord.InteractionType.component:
            await self.link.events.component(interaction)


class Link:
    """One bot token's login and Gateway session (see the module docstring)."""

    def __init__(self, token: str, command: str, events: Events, store: "SessionStore | None") -> None:
        self.token = token
        self.events = events
        self.store = store
        self.bot = Bot(self, command)
        self.gateway_url: yarl.URL | None = None
        self.failures = Streak(RETRY)
        self._pending: dict[int, int] = {}
        """Message id → the sequence number it came with, while it is being handled."""
        self._saved: tuple[Any, ...] | None = None
        self._saving: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.closing = False

    @property
    def user(self) -> discord.ClientUser | None:
        return self.bot.user

    async def login(self) -> None:
        """Log in over REST and register the slash command. Raises ``discord.LoginFailure``
        for a refused token and ``discord.HTTPException``/``OSError`` when Discord is not reached."""
        await self.bot.login(self.token)
        _shards, url, _limits = await self.bot.http.get_bot_gateway()
        self.gateway_url = yarl.URL(url)
        try:
            await self.bot.tree.sync()
        except discord.HTTPException as exc:
            log.warning("Discord: the slash command was not registered: %s", exc)

    def connect(self) -> None:
        """Hold the Gateway session open in the background (until :meth:`disconnect`)."""
        self.closing = False
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="discord-gateway")

    @property
    def receiving(self) -> bool:
        return self._task is not None and not self._task.done()

    async def disconnect(self) -> None:
        """Leave the Gateway (the session stays resumable, its sequence saved); the bot stays
        logged in, so it can still send."""
        self.closing = True
        if self._saving is not None:
            self._saving.cancel()
            self._saving = None
        ws = self.bot.ws
        if ws is not None and ws.open:
            await ws.close(code=4000)  # not 1000, which would end the session: the next start resumes it
        await self._save()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def close(self) -> None:
        await self.disconnect()
        await self.bot.close()

    # -- the session ----------------------------------------------------------------------------
    async def _run(self) -> None:
        params: dict[str, Any] = {"initial": True, "gateway": self.gateway_url}
        stored = await self._load()
        if stored is not None:
            params.update(resume=True, session=stored["session"], sequence=stored["seq"],
                          gateway=yarl.URL(stored["gateway"]))
        self.bot.ws = None  # a session left before is resumed from what was saved
        while not self.closing:
            try:
                ws = await asyncio.wait_for(DiscordWebSocket.from_client(self.bot, **params), 60.0)
                self.bot.ws = ws
                params["initial"] = False
                while True:
                    await ws.poll_event()
            except ReconnectWebSocket as exc:  # asked to reconnect, or the session was invalidated
                self.bot.dispatch("disconnect")
                params.update(self._resume() if exc.resume else {"resume": False, "session": None, "sequence": None,
                                                                  "gateway": self.gateway_url})
            except discord.ConnectionClosed as exc:
                if self.closing:
                    return
                if exc.code in FATAL:
                    self.events.state_changed("misconfigured", f"{FATAL[exc.code]} (close code {exc.code})")
                    return
                await self._pause(f"the Gateway closed the connection (code {exc.code})")
                params.update(self._resume())
            except (OSError, discord.HTTPException, discord.GatewayNotFound, aiohttp.ClientError,
                    asyncio.TimeoutError) as exc:
                if self.closing:
                    return
                await self._pause(f"cannot reach the Gateway ({type(exc).__name__}: {exc})".replace(": )", ")"))
                params.update(self._resume())

    def _resume(self) -> dict[str, Any]:
        ws = self.bot.ws
        if ws is None or ws.session_id is None:
            return {"resume": False, "gateway": self.gateway_url}
        return {"resume": True, "session": ws.session_id, "sequence": ws.sequence, "gateway": ws.gateway}

    async def _pause(self, problem: str) -> None:
        self.bot.dispatch("disconnect")
        pause = self.failures.next()
        self.events.state_changed("retrying", f"{problem}; trying again in {pause:.1f} s")
        await asyncio.sleep(pause)

    def up(self) -> None:
        self.failures.reset()
        self.events.state_changed("connected", None)
        self._schedule()

    # -- the acknowledgement --------------------------------------------------------------------
    def arrived(self, message_id: int, sequence: int | None) -> None:
        if sequence is not None:
            self._pending.setdefault(message_id, sequence)

    def handled(self, message_id: int) -> None:
        if self._pending.pop(message_id, None) is not None:
            self._schedule()

    def _acknowledged(self) -> tuple[Any, ...] | None:
        ws = self.bot.ws
        if ws is None or ws.session_id is None or ws.sequence is None:
            return None
        sequence = min(self._pending.values()) - 1 if self._pending else ws.sequence
        return ws.session_id, sequence, str(ws.gateway)

    def _schedule(self) -> None:
        if self._saving is None and not self.closing:
            loop = asyncio.get_running_loop()
            self._saving = loop.call_later(SAVE_DELAY, lambda: asyncio.ensure_future(self._save()))

    async def _save(self) -> None:
        self._saving = None
        current = self._acknowledged()
        if current is None or current == self._saved or self.store is None:
            return
        session, sequence, gateway = current
        try:
            await asyncio.to_thread(self.store.set_meta, SESSION_KEY,
                                    {"session": session, "seq": sequence, "gateway": gateway})
        except StoreError as exc:  # the next save writes it; a restart meanwhile replays a little more
            log.warning("Discord: the session's sequence was not saved: %s", exc)
            return
        self._saved = current

    async def _load(self) -> dict[str, Any] | None:
        if self.store is None:
            return None
        try:
            entry = await asyncio.to_thread(self.store.get_meta, SESSION_KEY)
        except StoreError as exc:
            log.warning("Discord: the last session is not known (identifying anew): %s", exc)
            return None
        value = entry.value if entry is not None else None
        if not isinstance(value, dict) or not isinstance(value.get("session"), str) \
                or not isinstance(value.get("seq"), int) or not isinstance(value.get("gateway"), str):
            return None
        return value
