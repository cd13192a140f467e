"""The fake's REST API (``/api/v10``): the endpoints discord.py calls for a bot that logs in,
registers its slash command, sends, edits and deletes messages (JSON or multipart with files),
shows typing, starts threads, opens DMs, answers interactions and their follow-ups — plus the
"CDN" serving the files users attached (``/attachments/…``).

Shapes follow Discord's documentation and what discord.py reads (``discord/http.py``,
``discord/webhook/async_.py``): errors are ``{"message", "code"}`` with Discord's codes (10003
unknown channel, 10008 unknown message, 10062 unknown interaction, 40060 already acknowledged,
50013 missing permissions, 50035 invalid form body, 160004 thread exists), a 429 carries
``retry_after`` and a ``Via`` header (without it discord.py takes it for a ban), and the bot
token is checked on every call but the interaction ones (their token is in the path).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from aiohttp import web

from vigil.testing.discord_api.state import (
    DM, EPHEMERAL, PUBLIC_THREAD, Call, Channel, DiscordState, Interaction, Message,
)

if TYPE_CHECKING:
    from vigil.testing.discord_api.gateway import GatewayHub

MAX_CONTENT = 2000
INTERACTION_WINDOW = 3.0
"""Seconds an interaction may wait for its response."""
FOLLOW_UP_WINDOW = 15 * 60.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer typed exactly ``application/json`` (discord.py reads no other as JSON)."""
    return web.Response(body=json.dumps(data).encode(), status=status,
                        headers={"Content-Type": "application/json", **(headers or {})})


class Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _channel(state: DiscordState, channel_id: str) -> Channel:
    channel = state.channels.get(channel_id)
    if channel is None:
        raise Refused(404, 10003, "Unknown Channel")
    return channel


def _content(payload: dict[str, Any], *, files: int = 0, needed: bool = True) -> str:
    content = payload.get("content") or ""
    if not isinstance(content, str) or len(content) > MAX_CONTENT:
        raise Refused(400, 50035, "Invalid Form Body (content: Must be 2000 or fewer in length.)")
    if needed and not content and not files and not payload.get("components") and not payload.get("embeds"):
        raise Refused(400, 50006, "Cannot send an empty message")
    return content


class Rest:
    """The REST handlers over one :class:`DiscordState`; ``hub`` dispatches what they cause."""

    def __init__(self, state: DiscordState, hub: "GatewayHub", base: Callable[[], str]) -> None:
        self.state, self.hub, self.base = state, hub, base
        self._bodies: dict[int, Any] = {}
        """What each request in flight sent, for its :class:`Call` record."""

    def routes(self) -> list[web.RouteDef]:
        api = "/api/v{version}"
        table = [
            ("GET", "/users/@me", self.me), ("GET", "/oauth2/applications/@me", self.application),
            ("GET", "/gateway/bot", self.gateway), ("GET", "/gateway", self.gateway),
            ("PUT", "/applications/{app}/commands", self.put_commands),
            ("GET", "/applications/{app}/commands", self.get_commands),
            ("POST", "/channels/{channel}/messages", self.create_message),
            ("GET", "/channels/{channel}/messages", self.history),
            ("PATCH", "/channels/{channel}/messages/{message}", self.edit_message),
            ("DELETE", "/channels/{channel}/messages/{message}", self.delete_message),
            ("POST", "/channels/{channel}/messages/{message}/threads", self.start_thread),
            ("POST", "/channels/{channel}/typing", self.typing),
            ("GET", "/channels/{channel}", self.get_channel),
            ("POST", "/users/@me/channels", self.open_dm),
            ("POST", "/interactions/{interaction}/{token}/callback", self.callback),
            ("PATCH", "/webhooks/{app}/{token}/messages/@original", self.edit_original),
            ("POST", "/webhooks/{app}/{token}", self.follow_up),
        ]
        routes = [web.route(method, api + path, self._wrap(handler, auth="/interactions/" not in path
                                                                and "/webhooks/" not in path))
                  for method, path, handler in table]
        routes.append(web.get("/attachments/{path:.+}", self.download))
        return routes

    def _wrap(self, handler: Callable[[web.Request], Awaitable[Any]], *, auth: bool) -> Handler:
        async def endpoint(request: web.Request) -> web.StreamResponse:
            state = self.state
            try:
                if auth and request.headers.get("Authorization") != f"Bot {state.token}":
                    raise Refused(401, 0, "401: Unauthorized")
                fault = state.injected(request.method, request.path)
                if fault is not None:
                    return self._fault(request, fault)
                result = await handler(request)
                status = 200
                if isinstance(result, web.StreamResponse):
                    response = result
                    status = result.status
                else:
                    response = _json(result)
            except Refused as exc:
                status = exc.status
                response = _json({"message": str(exc), "code": exc.code}, status=exc.status)
            with state.lock:
                body = self._bodies.pop(id(request), None)
                state.calls.append(Call(request.method, request.path, status, body, time.time()))
            return response

        return endpoint

    def _fault(self, request: web.Request, fault: dict[str, Any]) -> web.Response:
        status = fault["status"]
        with self.state.lock:
            self.state.calls.append(Call(request.method, request.path, status, None, time.time()))
        if status == 429:
            return _json({"message": "You are being rate limited.", "retry_after": fault["retry_after"],
                                      "global": False}, status=429,
                                     headers={"Via": "1.1 google", "Retry-After": str(fault["retry_after"])})
        return _json({"message": f"{status}: injected", "code": 0}, status=status)

    async def _body(self, request: web.Request) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
        """The JSON payload (or a multipart's ``payload_json``) and the files sent with it."""
        files: list[tuple[str, bytes]] = []
        if request.content_type.startswith("multipart/"):
            payload: Any = {}
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":  # type: ignore[union-attr]
                    payload = json.loads(await part.text())  # type: ignore[union-attr]
                elif part.filename:  # type: ignore[union-attr]
                    files.append((part.filename, bytes(await part.read())))  # type: ignore[union-attr]
        else:
            raw = await request.read()
            payload = json.loads(raw) if raw else {}
        if not isinstance(payload, dict) and not isinstance(payload, list):
            raise Refused(400, 50109, "The request body contains invalid JSON.")
        self._bodies[id(request)] = payload
        return payload, files  # type: ignore[return-value]

    # -- the bot --------------------------------------------------------------------------------
    async def me(self, request: web.Request) -> Any:
        return self.state.user(self.state.bot_id)

    async def application(self, request: web.Request) -> Any:
        state = self.state
        return {"id": state.application_id, "name": "vigil", "description": "", "icon": None, "bot_public": False,
                "bot_require_code_grant": False, "owner": state.user(state.snowflake()), "verify_key": "0" * 64,
                "flags": 1 << 19, "team": None, "summary": "", "interactions_endpoint_url": None,
                "bot": state.user(state.bot_id)}

    async def gateway(self, request: web.Request) -> Any:
        url = self.base().replace("http://", "ws://", 1) + "/gateway"
        return {"url": url, "shards": 1, "session_start_limit": {"total": 1000, "remaining": 999,
                                                                 "reset_after": 86_400_000, "max_concurrency": 1}}

    async def put_commands(self, request: web.Request) -> Any:
        payload, _ = await self._body(request)
        if not isinstance(payload, list):
            raise Refused(400, 50035, "Invalid Form Body")
        state = self.state
        commands = []
        for command in payload:
            commands.append({**command, "id": state.snowflake(), "application_id": state.application_id,
                             "version": state.snowflake(), "type": command.get("type", 1),
                             "default_member_permissions": command.get("default_member_permissions"),
                             "options": command.get("options", []), "nsfw": False})
        with state.lock:
            state.commands = commands
        return commands

    async def get_commands(self, request: web.Request) -> Any:
        with self.state.lock:
            return list(self.state.commands)

    # -- messages -------------------------------------------------------------------------------
    def _stored(self, channel: Channel, author: str, content: str, payload: dict[str, Any],
                files: list[tuple[str, bytes]], *, interaction: str | None = None, flags: int = 0) -> Message:
        state = self.state
        message = Message(state.snowflake(), channel.id, author, content, guild_id=channel.guild_id,
                          flags=flags | int(payload.get("flags") or 0) & EPHEMERAL,
                          components=list(payload.get("components") or []), interaction=interaction)
        reference = payload.get("message_reference")
        if isinstance(reference, dict) and reference.get("message_id"):
            message.reference = str(reference["message_id"])
        message.attachments = [self.host(channel.id, name, data) for name, data in files]
        message.shown.append((time.time(), content))
        with state.lock:
            state.messages.append(message)
        return message

    def host(self, channel_id: str, name: str, data: bytes, *, content_type: str = "text/plain") -> dict[str, Any]:
        """Keep ``data`` on the "CDN"; its attachment object."""
        state = self.state
        attachment_id = state.snowflake()
        path = f"{channel_id}/{attachment_id}/{name}"
        with state.lock:
            state.hosted[path] = data
        url = f"{self.base()}/attachments/{path}"
        return {"id": attachment_id, "filename": name, "size": len(data), "url": url, "proxy_url": url,
                "content_type": content_type}

    async def create_message(self, request: web.Request) -> Any:
        channel = _channel(self.state, request.match_info["channel"])
        payload, files = await self._body(request)
        message = self._stored(channel, self.state.bot_id, _content(payload, files=len(files)), payload, files)
        data = message.payload(self.state)
        self.hub.dispatch("MESSAGE_CREATE", data)
        return data

    async def history(self, request: web.Request) -> Any:
        channel = _channel(self.state, request.match_info["channel"])
        after = int(request.query.get("after") or 0)
        limit = min(100, int(request.query.get("limit") or 50))
        with self.state.lock:
            found = [m for m in self.state.messages if m.channel_id == channel.id and not m.deleted
                     and not m.flags & EPHEMERAL and int(m.id) > after]
        found = found[:limit] if after else found[-limit:]
        return [m.payload(self.state) for m in reversed(found)]  # newest first, as Discord answers

    def _message(self, request: web.Request) -> Message:
        channel = _channel(self.state, request.match_info["channel"])
        message = self.state.find(request.match_info["message"])
        if message is None or message.channel_id != channel.id or message.deleted:
            raise Refused(404, 10008, "Unknown Message")
        return message

    async def edit_message(self, request: web.Request) -> Any:
        message = self._message(request)
        payload, _ = await self._body(request)
        if message.author != self.state.bot_id:
            raise Refused(403, 50005, "Cannot edit a message authored by another user")
        self._edit(message, payload)
        return message.payload(self.state)

    def _edit(self, message: Message, payload: dict[str, Any]) -> None:
        with self.state.lock:
            if "content" in payload:
                message.content = _content(payload, needed=False)
                message.edits.append(message.content)
                message.shown.append((time.time(), message.content))
            if "components" in payload:
                message.components = list(payload.get("components") or [])

    async def delete_message(self, request: web.Request) -> web.Response:
        message = self._message(request)
        with self.state.lock:
            message.deleted = True
        return web.Response(status=204)

    async def start_thread(self, request: web.Request) -> Any:
        message = self._message(request)
        channel = _channel(self.state, message.channel_id)
        payload, _ = await self._body(request)
        state = self.state
        if channel.type != 0 or not channel.can_thread:
            raise Refused(403, 50013, "Missing Permissions")
        with state.lock:
            if message.id in state.channels:
                raise Refused(400, 160004, "A thread has already been created for this message")
            name = str(payload.get("name") or "thread")[:100]
            thread = Channel(message.id, PUBLIC_THREAD, channel.guild_id, name, parent_id=channel.id,
                             owner_id=state.bot_id)
            state.channels[thread.id] = thread
        data = thread.payload(state)
        self.hub.dispatch("THREAD_CREATE", {**data, "newly_created": True})
        return data

    async def typing(self, request: web.Request) -> web.Response:
        channel = _channel(self.state, request.match_info["channel"])
        with self.state.lock:
            self.state.typing.append((channel.id, time.monotonic()))
        return web.Response(status=204)

    async def get_channel(self, request: web.Request) -> Any:
        return _channel(self.state, request.match_info["channel"]).payload(self.state)

    async def open_dm(self, request: web.Request) -> Any:
        payload, _ = await self._body(request)
        user = str(payload.get("recipient_id") or "")
        if not user.isdigit():
            raise Refused(400, 50035, "Invalid Form Body (recipient_id)")
        return self.state.channels[self.state.dm_channel(user)].payload(self.state)

    async def download(self, request: web.Request) -> web.Response:
        with self.state.lock:
            data = self.state.hosted.get(request.match_info["path"])
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    # -- interactions -------------------------------------------------------------------------
    def _interaction(self, token: str, *, window: float) -> Interaction:
        with self.state.lock:
            found = next((i for i in self.state.interactions.values() if i.token == token), None)
        if found is None or time.monotonic() - found.created > window:
            raise Refused(404, 10062, "Unknown interaction")
        return found

    async def callback(self, request: web.Request) -> Any:
        interaction = self._interaction(request.match_info["token"], window=INTERACTION_WINDOW)
        if interaction.id != request.match_info["interaction"]:
            raise Refused(404, 10062, "Unknown interaction")
        payload, files = await self._body(request)
        if interaction.callbacks:
            raise Refused(400, 40060, "Interaction has already been acknowledged.")
        kind, data = int(payload.get("type") or 0), payload.get("data") or {}
        state = self.state
        channel = state.channels.get(interaction.channel_id) or Channel(interaction.channel_id, DM)
        message: Message | None = None
        if kind == 4:  # a message answering it
            message = self._stored(channel, state.bot_id, _content(data, files=len(files)), data, files,
                                   interaction=interaction.id)
        elif kind == 5:  # "thinking…": a loading message, its content comes with an edit
            message = self._stored(channel, state.bot_id, "", data, [], interaction=interaction.id,
                                   flags=int(data.get("flags") or 0) & EPHEMERAL)
        elif kind == 7 and interaction.message:  # a button's message edited
            message = state.find(interaction.message)
            if message is not None:
                self._edit(message, data)
        elif kind != 6:
            raise Refused(400, 50035, f"Invalid Form Body (type {kind})")
        with state.lock:
            interaction.callbacks.append(payload)
            if message is not None and kind in (4, 5):
                interaction.original = message.id
        answer: dict[str, Any] = {"interaction": {
            "id": interaction.id, "type": interaction.type, "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(message is not None and message.flags & EPHEMERAL),
        }}
        if message is not None:
            answer["interaction"]["response_message_id"] = message.id
            answer["resource"] = {"type": kind, "message": message.payload(state)}
        return answer

    async def edit_original(self, request: web.Request) -> Any:
        interaction = self._interaction(request.match_info["token"], window=FOLLOW_UP_WINDOW)
        payload, _ = await self._body(request)
        message = self.state.find(interaction.original or "")
        if message is None:
            raise Refused(404, 10008, "Unknown Message")
        self._edit(message, payload)
        return message.payload(self.state)

    async def follow_up(self, request: web.Request) -> Any:
        interaction = self._interaction(request.match_info["token"], window=FOLLOW_UP_WINDOW)
        if not interaction.callbacks:
            raise Refused(404, 10015, "Unknown Webhook")
        payload, files = await self._body(request)
        channel = self.state.channels.get(interaction.channel_id) or Channel(interaction.channel_id, DM)
        message = self._stored(channel, self.state.bot_id, _content(payload, files=len(files)), payload, files,
                               interaction=interaction.id)
        return message.payload(self.state)

