"""What a Telegram message means for the gateway: its route, its text and its id.

* A private chat is one conversation: ``RouteKey("telegram", chat_id)``.
* A group is one conversation per person by default (``telegram.group_per_user``): the
  route's ``user`` is the sender's id.
* A forum topic is its own conversation: the route's ``thread`` is ``message_thread_id``, and
  replies go to the topic.
* A bot command (``/hb@vigil_bot status``) loses its ``@botname``; one addressed to another
  bot is not for us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vigil.store.gateway.gateway_tables import RouteKey

ADAPTER = "telegram"
PRIVATE = "private"
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,64})(?:@([A-Za-z0-9_]{1,64}))?(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Place:
    """Where a message was written: its chat, its forum topic and its sender."""

    chat_id: int
    chat_type: str
    thread_id: int | None
    user_id: int | None


def route_for(place: Place, *, group_per_user: bool) -> RouteKey:
    """The gateway route of a message written at ``place``."""
    thread = str(place.thread_id) if place.thread_id is not None else ""
    user = ""
    if place.chat_type != PRIVATE and group_per_user and place.user_id is not None:
        user = str(place.user_id)
    return RouteKey(ADAPTER, str(place.chat_id), thread, user)


def target_of(route: RouteKey) -> tuple[int, int | None]:
    """The chat id and topic id a reply to ``route`` goes to; ``ValueError`` for a route that
    is not a Telegram chat (``chat`` not an integer)."""
    chat = int(route.chat)
    thread = int(route.thread) if route.thread else None
    return chat, thread


def normalize_command(text: str, bot_username: str | None) -> str | None:
    """``text`` with a leading ``/cmd@botname`` made ``/cmd``; ``None`` when the command is
    addressed to another bot (in a group several bots share the commands)."""
    match = _COMMAND.match(text)
    if match is None:
        return text
    addressee = match.group(2)
    if addressee is None:
        return text
    if bot_username is not None and addressee.lower() != bot_username.lower():
        return None
    return "/" + match.group(1) + text[match.end():]


def external_id(chat_id: int, message_id: int) -> str:
    """The inbox key of a message: message ids are unique per chat."""
    return f"{chat_id}:{message_id}"


def owner_of(route: RouteKey) -> str | None:
    """Who may answer an approval asked in ``route``'s conversation: the route's user in a
    group, the chat's user in a private chat (its chat id is the user id); ``None`` for a
    shared group conversation (then anyone on the allow-list may)."""
    if route.user:
        return route.user
    if route.chat and not route.chat.startswith("-"):
        return route.chat  # private chats have positive ids, groups negative ones
    return None
