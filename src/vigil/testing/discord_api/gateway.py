"""The fake's Gateway: the WebSocket a bot holds open to receive events (``/gateway``).

As Discord does it (and as discord.py's ``discord/gateway.py`` expects): the server says HELLO
with a heartbeat interval; the client heartbeats (op 1, answered with op 11) and IDENTIFYs (op
2) with its token and intents — a wrong token is closed with 4004, a privileged intent the
Developer Portal has not turned on with 4014 — and gets READY (a session id, a
``resume_gateway_url``, its guilds as unavailable) followed by a GUILD_CREATE per guild. Every
dispatch (op 0) carries the session's next sequence number and is kept: a client that lost its
connection RESUMEs (op 6) with the last sequence it saw and gets what it missed, then RESUMED;
an unknown (expired) session is told INVALID_SESSION (op 9) and identifies anew.

Events for a session keep piling up while it is disconnected, as Discord keeps a resumable
session for a while; tests make it go away (:meth:`GatewayHub.expire`), ask the client to
reconnect (op 7), invalidate its session, or cut the connection.

Frames are sent as JSON text, uncompressed: discord.py asks for ``zlib-stream`` but reads text
frames as they are.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import WSMsgType, web

from vigil.testing.discord_api.state import DiscordState

log = logging.getLogger(__name__)

MESSAGE_CONTENT = 1 << 15
"""The privileged Message Content intent."""
HEARTBEAT_MS = 41_250


@dataclass
class Session:
    id: str
    intents: int
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    socket: web.WebSocketResponse | None = None
    queue: asyncio.Queue[dict[str, Any] | None] | None = None


class GatewayHub:
    """The gateway sessions of one fake (runs on the server's loop)."""

    def __init__(self, state: DiscordState, base: Callable[[], str]) -> None:
        self.state, self.base = state, base
        self.sessions: dict[str, Session] = {}
        self.identifies = 0
        self.resumes = 0
        self.heartbeats = 0
        self.closed: list[int] = []
        """Close codes the fake ended connections with (4004, 4014 …)."""
        self._sockets: set[web.WebSocketResponse] = set()

    @property
    def url(self) -> str:
        return self.base().replace("http://", "ws://", 1) + "/gateway"

    def connected(self) -> int:
        return sum(1 for s in self.sessions.values() if s.socket is not None and not s.socket.closed)

    # -- dispatching --------------------------------------------------------------------------
    def dispatch(self, event: str, data: dict[str, Any]) -> int:
        """Send ``event`` to every session (kept for a resume where one is disconnected);
        the highest sequence number it was given (0: there was no session)."""
        return max((self._send(session, event, data) for session in list(self.sessions.values())), default=0)

    def _send(self, session: Session, event: str, data: dict[str, Any]) -> int:
        session.seq += 1
        frame = {"op": 0, "s": session.seq, "t": event, "d": data}
        session.events.append(frame)
        if session.queue is not None:
            session.queue.put_nowait(frame)
        return session.seq

    def control(self, op: int, data: Any = None) -> None:
        """Send a non-dispatch op (7 RECONNECT, 9 INVALID_SESSION) to every connection."""
        for session in self.sessions.values():
            if session.queue is not None:
                session.queue.put_nowait({"op": op, "d": data, "s": None, "t": None})
        if op == 9 and not data:
            self.sessions.clear()

    async def drop(self) -> None:
        """Cut every connection as a network failure would (no close frame)."""
        for socket in list(self._sockets):
            transport = socket._req.transport if socket._req is not None else None  # noqa: SLF001
            if transport is not None:
                transport.abort()

    def expire(self) -> None:
        """Forget every session: a RESUME is answered INVALID_SESSION."""
        self.sessions.clear()

    async def close(self) -> None:
        for socket in list(self._sockets):
            await socket.close(code=1001)

    # -- one connection -----------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await socket.prepare(request)
        self._sockets.add(socket)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        writer = asyncio.create_task(self._write(socket, queue))
        session: Session | None = None
        queue.put_nowait({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_MS}, "s": None, "t": None})
        try:
            async for message in socket:
                if message.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(message.data)
                op, data = frame.get("op"), frame.get("d")
                if op == 1:
                    self.heartbeats += 1
                    queue.put_nowait({"op": 11, "d": None, "s": None, "t": None})
                elif op == 2:
                    session = await self._identify(socket, queue, data or {})
                elif op == 6:
                    session = self._resume(socket, queue, data or {})
        finally:
            if session is not None and session.socket is socket:
                session.socket, session.queue = None, None
            queue.put_nowait(None)
            await asyncio.gather(writer, return_exceptions=True)
            self._sockets.discard(socket)
        return socket

    async def _write(self, socket: web.WebSocketResponse, queue: "asyncio.Queue[dict[str, Any] | None]") -> None:
        while True:
            frame = await queue.get()
            if frame is None or socket.closed:
                return
            if frame.get("op") == "close":
                self.closed.append(frame["d"])
                await socket.close(code=frame["d"], message=frame["t"].encode())
                return
            try:
                await socket.send_str(json.dumps(frame))
            except (ConnectionError, RuntimeError):
                return

    async def _identify(self, socket: web.WebSocketResponse, queue: "asyncio.Queue[dict[str, Any] | None]",
                        data: dict[str, Any]) -> Session | None:
        state = self.state
        if data.get("token") != state.token:
            queue.put_nowait({"op": "close", "d": 4004, "t": "Authentication failed."})
            return None
        intents = int(data.get("intents") or 0)
        if intents & MESSAGE_CONTENT and not state.message_content_intent:
            queue.put_nowait({"op": "close", "d": 4014, "t": "Disallowed intent(s)."})
            return None
        self.identifies += 1
        session = Session(secrets.token_hex(16), intents, socket=socket, queue=queue)
        self.sessions[session.id] = session
        with state.lock:
            guilds = list(state.guilds)
        self._send(session, "READY", {
            "v": 10, "user": state.user(state.bot_id), "session_id": session.id, "resume_gateway_url": self.url,
            "guilds": [{"id": g, "unavailable": True} for g in guilds], "private_channels": [],
            "relationships": [], "presences": [], "user_settings": {}, "session_type": "normal",
            "application": {"id": state.application_id, "flags": 1 << 19}, "shard": [0, 1],
        })
        for guild in guilds:
            self._send(session, "GUILD_CREATE", state.guild_payload(guild))
        return session

    def _resume(self, socket: web.WebSocketResponse, queue: "asyncio.Queue[dict[str, Any] | None]",
                data: dict[str, Any]) -> Session | None:
        session = self.sessions.get(str(data.get("session_id") or ""))
        if session is None or data.get("token") != self.state.token:
            queue.put_nowait({"op": 9, "d": False, "s": None, "t": None})
            return None
        self.resumes += 1
        seen = int(data.get("seq") or 0)
        if session.queue is not None:  # an older connection of it is replaced
            session.queue.put_nowait(None)
        session.socket, session.queue = socket, queue
        for frame in session.events:
            if frame["s"] > seen:
                queue.put_nowait(frame)
        session.seq += 1
        resumed = {"op": 0, "s": session.seq, "t": "RESUMED", "d": {}}
        session.events.append(resumed)
        queue.put_nowait(resumed)
        return session
