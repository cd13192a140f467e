"""``FakeDiscordServer``: a local Discord for vigil's tests and benchmarks.

One aiohttp server on loopback, in a background thread, serving the REST API under
``/api/v10`` (:mod:`.rest`), the Gateway WebSocket at ``/gateway`` (:mod:`.gateway`) and the
attachment "CDN". Point the bot at it with ``discord.api_url`` (:attr:`FakeDiscordServer.api_url`);
the gateway URL comes from its ``GET /gateway/bot``.

What people do goes the other way, through the methods here: a DM or a channel message (with a
mention, in a thread, with attachments), ``/vigil …``, a button press. The fake can also ask the
bot to reconnect, invalidate or expire its session, cut its connection, refuse calls
(:meth:`DiscordState.fault`) or disappear (``stop()``; ``start()`` brings it back on the same port).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Awaitable, Callable, TypeVar

from aiohttp import web

from vigil.testing.discord_api.gateway import GatewayHub
from vigil.testing.discord_api.rest import Rest
from vigil.testing.discord_api.state import DM, EPHEMERAL, DiscordState, Interaction, Message
from vigil.testing.serving import bind

T = TypeVar("T")
_START_TIMEOUT = 10.0


class FakeDiscordServer:
    """A fake Discord; ``token`` is what the bot's environment variable must hold."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = DiscordState()
        self._host, self._port = host, port
        self.hub = GatewayHub(self.state, lambda: self.base_url)
        self.rest = Rest(self.state, self.hub, lambda: self.base_url)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.sequence = 0
        """The sequence number of the last event sent to the bot."""
        self.guild_id = self.state.guild("vigil-test")
        self.channel_id = self.state.text_channel(self.guild_id, "general")

    # -- serving ------------------------------------------------------------------------------
    @property
    def token(self) -> str:
        return self.state.token

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def api_url(self) -> str:
        """What ``discord.api_url`` points at."""
        return self.base_url + "/api/v10"

    @property
    def bot_id(self) -> str:
        return self.state.bot_id

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "FakeDiscordServer":
        """Serve (again, on the same port after ``stop``); returns once it accepts."""
        if self.running:
            return self
        sock = bind(self._host, self._port)
        self._port = sock.getsockname()[1]
        ready = threading.Event()
        loop = asyncio.new_event_loop()

        async def serve() -> None:
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.add_routes([web.get("/gateway", self.hub.handle), *self.rest.routes()])
            runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.1)
            await runner.setup()
            await web.SockSite(runner, sock).start()
            self._runner = runner
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="fake-discord", daemon=True)
        self._thread.start()
        if not ready.wait(_START_TIMEOUT):
            raise RuntimeError("the fake Discord server did not start")
        return self

    def stop(self) -> None:
        """Disappear: connections are cut and the port refuses new ones (sessions are kept,
        as Discord keeps them, so a bot that comes back in time can resume)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def down() -> None:
            await self.hub.drop()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(down(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> "FakeDiscordServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def call(self, work: Callable[[], Awaitable[T]] | Callable[[], T]) -> T:
        """Run ``work`` on the server's loop (a coroutine function or a plain one); its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the fake Discord server is not running")

        async def run() -> Any:
            result = work()
            return await result if asyncio.iscoroutine(result) else result

        future: Future[T] = asyncio.run_coroutine_threadsafe(run(), loop)
        return future.result(10)

    def reset(self) -> None:
        """Forget what was said, every gateway session and the counts of connections."""
        self.state.reset()
        if self.running:
            self.call(self.hub.expire)
        self.hub.identifies = self.hub.resumes = self.hub.heartbeats = 0
        self.hub.closed.clear()

    # -- the connection -----------------------------------------------------------------------
    def connected(self) -> int:
        """Gateway connections open now."""
        return self.call(self.hub.connected) if self.running else 0

    def wait_connected(self, count: int = 1, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.connected() < count:
            if time.monotonic() > deadline:
                raise TimeoutError("the bot did not connect to the fake Discord gateway")
            time.sleep(0.02)

    def reconnect(self) -> None:
        """Ask the bot to reconnect and resume (op 7 RECONNECT)."""
        self.call(lambda: self.hub.control(7))

    def invalidate(self, resumable: bool = False) -> None:
        """Invalidate its session (op 9): it identifies anew (or resumes when ``resumable``)."""
        self.call(lambda: self.hub.control(9, resumable))

    def drop(self) -> None:
        """Cut the connection without a close frame (a network failure)."""
        self.call(self.hub.drop)

    # -- what people do -----------------------------------------------------------------------
    def name(self, user_id: str, name: str) -> None:
        with self.state.lock:
            self.state.names[user_id] = name

    def dm_channel(self, user_id: str) -> str:
        return self.state.dm_channel(user_id)

    def attachment(self, channel_id: str, name: str, data: bytes) -> dict[str, Any]:
        """A file a user attaches (hosted on the fake's CDN)."""
        return self.rest.host(channel_id, name, data)

    def dm(self, user_id: str, text: str, *, attachments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``user_id`` writes to the bot in their DM; the ``MESSAGE_CREATE`` payload sent."""
        return self.say(self.dm_channel(user_id), user_id, text, attachments=attachments)

    def say(self, channel_id: str, user_id: str, text: str, *, mention: bool = False,
            attachments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``user_id`` writes ``text`` in a channel, thread or DM (``mention``: starting with
        ``<@bot>``); the ``MESSAGE_CREATE`` payload sent."""
        state = self.state
        channel = state.channels[channel_id]
        content = f"<@{state.bot_id}> {text}" if mention else text
        message = Message(state.snowflake(), channel_id, user_id, content, guild_id=channel.guild_id,
                          attachments=list(attachments or []), mentions=[state.bot_id] if mention else [])
        with state.lock:
            state.messages.append(message)
        payload = message.payload(state)
        self.send("MESSAGE_CREATE", payload)
        return payload

    def send(self, event: str, data: dict[str, Any]) -> int:
        """Dispatch ``event`` to the bot (again, for a redelivery of the same payload); its
        sequence number (also kept in :attr:`sequence`)."""
        self.sequence = self.call(lambda: self.hub.dispatch(event, data))
        return self.sequence

    def command(self, channel_id: str, user_id: str, text: str | None, *, name: str = "vigil") -> Interaction:
        """``/vigil text`` by ``user_id`` in a channel, thread or DM."""
        options = [] if text is None else [{"name": "command", "type": 3, "value": text}]
        with self.state.lock:
            command_id = next((c["id"] for c in self.state.commands if c.get("name") == name), self.state.snowflake())
        return self._interact(2, channel_id, user_id, {"id": command_id, "name": name, "type": 1, "options": options})

    def press(self, message_id: str, custom_id: str, user_id: str) -> Interaction:
        """``user_id`` presses the button ``custom_id`` of the bot's message."""
        message = self.state.find(message_id)
        if message is None:
            raise KeyError(message_id)
        return self._interact(3, message.channel_id, user_id, {"custom_id": custom_id, "component_type": 2},
                              message=message)

    def buttons(self, message_id: str, *, labels: bool = False) -> list[str]:
        """The custom ids of a message's buttons (``labels``: what they say)."""
        message = self.state.find(message_id)
        rows = message.components if message is not None else []
        return [c.get("label" if labels else "custom_id", "") for row in rows for c in row.get("components", [])]

    def ephemeral(self, interaction: Interaction) -> list[str]:
        """What only the interaction's user saw: its response and follow-ups, as they are now."""
        with self.state.lock:
            return [m.content for m in self.state.messages
                    if m.interaction == interaction.id and m.flags & EPHEMERAL and not m.deleted]

    def _interact(self, kind: int, channel_id: str, user_id: str, data: dict[str, Any],
                  message: Message | None = None) -> Interaction:
        state = self.state
        channel = state.channels[channel_id]
        interaction = Interaction(state.snowflake(), "aW50ZXJhY3Rpb24" + state.snowflake(), kind, channel_id,
                                  user_id, data, channel.guild_id, message.id if message else None)
        with state.lock:
            state.interactions[interaction.id] = interaction
        payload: dict[str, Any] = {
            "id": interaction.id, "application_id": state.application_id, "type": kind, "data": data,
            "channel_id": channel_id, "channel": channel.payload(state), "token": interaction.token, "version": 1,
            "app_permissions": "2248473465835073", "locale": "en-US", "entitlements": [],
            "attachment_size_limit": 26_214_400, "authorizing_integration_owners": {"0": channel.guild_id or "0"},
            "context": 1 if channel.type == DM else 0,
        }
        if channel.guild_id:
            payload["guild_id"] = channel.guild_id
            payload["guild_locale"] = "en-US"
            payload["member"] = {"user": state.user(user_id), "roles": [], "joined_at": "2024-01-01T00:00:00+00:00",
                                 "deaf": False, "mute": False, "flags": 0, "permissions": "2248473465835073"}
        else:
            payload["user"] = state.user(user_id)
        if message is not None:
            payload["message"] = message.payload(state)
        self.send("INTERACTION_CREATE", payload)
        return interaction
