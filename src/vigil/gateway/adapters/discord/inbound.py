"""Which Discord messages are for the agent, and which conversation each belongs to.

Routes (``RouteKey("discord", channel, thread, user)``): a DM is one conversation (its channel
id, no thread). In a server the bot answers a mention; a mention in a channel starts a thread on
that message (Discord gives the thread the message's id), which is its conversation — one per
person, so only the one who asked can approve what their agent wants to run — and in that thread
the person is answered without a mention. A mention in any other thread makes that thread their
conversation. Other bots (the agent itself included) are never answered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vigil.store.gateway.gateway_tables import RouteKey

NAME = "discord"
_ANSWERED_TYPES = (0, 19)
"""Message types answered: a plain message and a reply."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message for the agent."""

    route: RouteKey
    text: str
    user: str
    attachments: list[Any] = field(default_factory=list)
    needs_route: bool = False
    """Only if ``route`` already leads to a conversation (a thread reply without a mention)."""
    start_thread: bool = False
    """A mention in a channel: its conversation is a new thread on the message."""
    dm: bool = False


def mentions(content: str, bot_id: int) -> bool:
    return re.search(rf"<@!?{bot_id}>", content) is not None


def plain_text(message: Any, bot_id: int) -> str:
    """The message's text without the bot's mention, other people's mentions as ``@name``."""
    text = re.sub(rf"<@!?{bot_id}>", "", message.content or "")
    for user in getattr(message, "mentions", []) or []:
        if user.id != bot_id:
            text = re.sub(rf"<@!?{user.id}>", "@" + user.display_name, text)
    return text.strip()


def candidate(message: Any, bot_id: int, *, parent: int | None, is_thread: bool, threads: bool) -> Candidate | None:
    """The message ``message`` carries for the agent, or ``None``. ``parent``: the channel a
    thread belongs to; ``is_thread``: the message was written in a thread; ``threads``: a
    mention in a channel starts a thread (``discord.threads``)."""
    author = message.author
    if author.bot or author.id == bot_id or getattr(message.type, "value", message.type) not in _ANSWERED_TYPES:
        return None
    user, channel = str(author.id), str(message.channel.id)
    text, files = plain_text(message, bot_id), list(message.attachments)
    if message.guild is None and getattr(message.channel, "guild_id", None) is None:  # a DM
        return Candidate(RouteKey(NAME, channel, "", user), text, user, files, dm=True)
    mentioned = mentions(message.content or "", bot_id)
    if is_thread and parent is not None:
        return Candidate(RouteKey(NAME, str(parent), channel, user), text, user, files, needs_route=not mentioned)
    if not mentioned:
        return None
    if threads:
        return Candidate(RouteKey(NAME, channel, str(message.id), user), text, user, files, start_thread=True)
    return Candidate(RouteKey(NAME, channel, "", user), text, user, files)


def thread_name(text: str) -> str:
    """A thread's name from the message that starts it (Discord allows 1 to 100 characters)."""
    line = " ".join(text.split())[:80].strip()
    return line or "vigil"


def command_text(text: str | None) -> str:
    """What ``/vigil …`` carries, as vigil's own slash command:
    ``heartbeat every 10m …`` → ``/heartbeat every 10m …``; nothing → ``/help``."""
    text = (text or "").strip()
    if not text:
        return "/help"
    return text if text.startswith("/") else "/" + text
