"""What the fake Discord holds: the bot's application and user, guilds with their text channels
and threads, DM channels, every message (the bot's with their edits, and the users'), the
typing indicators, interactions and their responses, the registered application commands, the
files users attached, the calls the REST API was sent and the faults it is told to inject.

Thread-safe: the test thread reads and sets it up while the server thread writes it. Ids are
snowflakes as Discord makes them (milliseconds since 2015 shifted left 22 bits, plus a counter),
so they sort by creation time like real ones.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

DISCORD_EPOCH_MS = 1_420_070_400_000
DM, TEXT, PUBLIC_THREAD = 1, 0, 11
"""Channel types (``type`` of a channel object)."""
EPHEMERAL = 1 << 6
"""The message flag of an ephemeral message (``flags: 64``)."""


def timestamp(when: float | None = None) -> str:
    """An ISO 8601 timestamp as Discord writes them."""
    return datetime.fromtimestamp(time.time() if when is None else when, timezone.utc).isoformat()


@dataclass
class Channel:
    """A text channel, DM channel or thread. ``members`` of a DM: its one recipient."""

    id: str
    type: int
    guild_id: str | None = None
    name: str = ""
    parent_id: str | None = None
    recipient: str | None = None
    owner_id: str | None = None
    can_thread: bool = True
    """Whether the bot may start threads here (``Create Public Threads``)."""

    def payload(self, state: "DiscordState") -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "type": self.type, "last_message_id": None, "flags": 0}
        if self.type == DM:
            data["recipients"] = [state.user(self.recipient or "")]
            return data
        data.update(guild_id=self.guild_id, name=self.name, position=0, permission_overwrites=[], nsfw=False,
                    rate_limit_per_user=0, parent_id=self.parent_id, topic=None)
        if self.type == PUBLIC_THREAD:
            data.update(owner_id=self.owner_id, message_count=0, member_count=1, total_message_sent=0,
                        thread_metadata={"archived": False, "auto_archive_duration": 1440, "locked": False,
                                         "archive_timestamp": timestamp()})
        return data


@dataclass
class Message:
    """A message in a channel, as it is now. ``author``: a user id (the bot's for its own)."""

    id: str
    channel_id: str
    author: str
    content: str
    guild_id: str | None = None
    flags: int = 0
    components: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)
    reference: str | None = None
    """The message this one replies to (``message_reference.message_id``)."""
    interaction: str | None = None
    """The interaction this message answers (a response or a follow-up)."""
    edits: list[str] = field(default_factory=list)
    """Every content it had after an edit, in order."""
    shown: list[tuple[float, str]] = field(default_factory=list)
    """(wall-clock time, content) of every version people saw: as sent, then each edit."""
    deleted: bool = False
    created: float = field(default_factory=time.time)

    def payload(self, state: "DiscordState") -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id, "channel_id": self.channel_id, "author": state.user(self.author), "content": self.content,
            "timestamp": timestamp(self.created), "edited_timestamp": timestamp() if self.edits else None,
            "tts": False, "mention_everyone": False, "mentions": [state.user(u) for u in self.mentions],
            "mention_roles": [], "attachments": self.attachments, "embeds": [], "pinned": False, "type": 0,
            "flags": self.flags, "components": self.components,
        }
        if self.guild_id:
            data["guild_id"] = self.guild_id
            data["member"] = {"roles": [], "joined_at": timestamp(), "deaf": False, "mute": False, "flags": 0}
        if self.reference:
            data["message_reference"] = {"message_id": self.reference, "channel_id": self.channel_id}
        return data


@dataclass
class Interaction:
    """An interaction a user made (``/vigil …`` or a button press) and what the bot answered."""

    id: str
    token: str
    type: int
    channel_id: str
    user: str
    data: dict[str, Any]
    guild_id: str | None = None
    message: str | None = None
    """The message whose button was pressed."""
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    """The interaction responses (``POST …/callback`` bodies), in order: one is allowed."""
    original: str | None = None
    """The id of the response's message (``@original``), once there is one."""
    created: float = field(default_factory=time.monotonic)


@dataclass
class Call:
    method: str
    path: str
    status: int
    body: Any
    at: float


class DiscordState:
    """The Discord of one fake (see the module docstring)."""

    def __init__(self, *, token: str | None = None) -> None:
        self.lock = threading.RLock()
        self._counter = itertools.count(1)
        self.token = token or f"{secrets.token_urlsafe(18)}.{secrets.token_urlsafe(5)}.{secrets.token_urlsafe(27)}"
        self.application_id = self.snowflake()
        self.bot_id = self.application_id
        self.names: dict[str, str] = {self.bot_id: "vigil"}
        self.channels: dict[str, Channel] = {}
        self.guilds: dict[str, str] = {}
        """Guild id → name."""
        self.messages: list[Message] = []
        self.typing: list[tuple[str, float]] = []
        """(channel id, monotonic time) of every typing indicator the bot triggered."""
        self.interactions: dict[str, Interaction] = {}
        self.commands: list[dict[str, Any]] = []
        """The global application commands, as the last bulk overwrite left them."""
        self.hosted: dict[str, bytes] = {}
        """Files users attached, by path under ``/attachments/``."""
        self.calls: list[Call] = []
        self.message_content_intent = True
        """Whether the Message Content intent is turned on in the Developer Portal: a bot
        identifying with it when it is off is closed with 4014 (disallowed intents)."""
        self.faults: list[dict[str, Any]] = []

    # -- ids and people -----------------------------------------------------------------------
    def snowflake(self) -> str:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return str((ms << 22) | (next(self._counter) & 0x3FFFFF))

    def user(self, user_id: str) -> dict[str, Any]:
        """The user object of ``user_id`` (the bot's is a bot)."""
        name = self.names.get(user_id, f"user{user_id[-4:]}")
        data: dict[str, Any] = {"id": user_id, "username": name, "discriminator": "0", "global_name": name,
                                "avatar": None, "public_flags": 0}
        if user_id == self.bot_id:
            data.update(bot=True, verified=True, mfa_enabled=False, flags=0)
        return data

    # -- what tests set up ------------------------------------------------------------------
    def guild(self, name: str = "vigil-test") -> str:
        """A new guild the bot is in; its id."""
        guild_id = self.snowflake()
        with self.lock:
            self.guilds[guild_id] = name
        return guild_id

    def text_channel(self, guild_id: str, name: str = "general", *, can_thread: bool = True) -> str:
        channel_id = self.snowflake()
        with self.lock:
            self.channels[channel_id] = Channel(channel_id, TEXT, guild_id, name, can_thread=can_thread)
        return channel_id

    def dm_channel(self, user_id: str) -> str:
        """The DM channel between the bot and ``user_id`` (made once)."""
        with self.lock:
            for channel in self.channels.values():
                if channel.type == DM and channel.recipient == user_id:
                    return channel.id
            channel_id = self.snowflake()
            self.channels[channel_id] = Channel(channel_id, DM, recipient=user_id)
            return channel_id

    def guild_payload(self, guild_id: str) -> dict[str, Any]:
        """A ``GUILD_CREATE``'s guild: its channels and active threads."""
        with self.lock:
            channels = [c for c in self.channels.values() if c.guild_id == guild_id]
            return {
                "id": guild_id, "name": self.guilds[guild_id], "icon": None, "owner_id": self.snowflake(),
                "roles": [{"id": guild_id, "name": "@everyone", "permissions": "2248473465835073", "position": 0,
                           "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}],
                "emojis": [], "stickers": [], "features": [], "member_count": 2, "large": False,
                "unavailable": False, "joined_at": timestamp(), "members": [], "voice_states": [],
                "presences": [], "stage_instances": [], "guild_scheduled_events": [], "soundboard_sounds": [],
                "channels": [c.payload(self) for c in channels if c.type != PUBLIC_THREAD],
                "threads": [c.payload(self) for c in channels if c.type == PUBLIC_THREAD],
            }

    def fault(self, status: int, *, count: int = 1, method: str | None = None, path: str = "",
              retry_after: float = 0.05) -> None:
        """Answer the next ``count`` REST calls (of ``method``, whose path contains ``path``)
        with ``status``: a 5xx, a 429 (``retry_after`` seconds) or a 403/404."""
        with self.lock:
            self.faults.append({"status": status, "count": count, "method": method, "path": path,
                                "retry_after": retry_after})

    def injected(self, method: str, path: str) -> dict[str, Any] | None:
        with self.lock:
            for fault in self.faults:
                if fault["count"] > 0 and fault["method"] in (None, method) and fault["path"] in path:
                    fault["count"] -= 1
                    return fault
            return None

    # -- what tests read --------------------------------------------------------------------
    def posted(self, channel_id: str | None = None, *, ephemeral: bool | None = False) -> list[Message]:
        """What the bot said (not deleted), oldest first, in ``channel_id`` if given;
        ``ephemeral``: only ephemeral ones (``None``: both)."""
        with self.lock:
            return [m for m in self.messages if m.author == self.bot_id and not m.deleted
                    and (channel_id is None or m.channel_id == channel_id)
                    and (ephemeral is None or bool(m.flags & EPHEMERAL) == ephemeral)]

    def texts(self, channel_id: str | None = None, *, ephemeral: bool | None = False) -> list[str]:
        return [m.content for m in self.posted(channel_id, ephemeral=ephemeral)]

    def find(self, message_id: str) -> Message | None:
        with self.lock:
            return next((m for m in self.messages if m.id == message_id), None)

    def typed(self, channel_id: str) -> int:
        with self.lock:
            return sum(1 for channel, _ in self.typing if channel == channel_id)

    def threads(self, parent_id: str | None = None) -> list[Channel]:
        with self.lock:
            return [c for c in self.channels.values() if c.type == PUBLIC_THREAD
                    and (parent_id is None or c.parent_id == parent_id)]

    def calls_of(self, method: str, path: str = "") -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method and path in c.path]

    def reset(self) -> None:
        """Forget messages, threads, interactions, calls and faults (guilds, their channels and
        DM channels stay)."""
        with self.lock:
            self.channels = {k: c for k, c in self.channels.items() if c.type != PUBLIC_THREAD}
            self.messages.clear()
            self.typing.clear()
            self.interactions.clear()
            self.calls.clear()
            self.faults.clear()
            self.message_content_intent = True
