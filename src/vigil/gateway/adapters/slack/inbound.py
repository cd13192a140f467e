"""Which Slack events are messages for the agent, and which conversation each belongs to.

Routes (``RouteKey("slack", channel, thread_ts, user)``): a DM's top level is one
conversation and each DM thread its own; in channels every thread is its own conversation,
one per person (so only the person who asked can approve what their agent wants to run). A
top-level mention starts a thread on that message. In a channel the app answers mentions
(``app_mention``; the ``message`` event of the same mention is ignored) and, without a
mention, messages in a thread where the person already has a conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vigil.gateway.adapters.slack.mrkdwn import from_slack
from vigil.store.gateway.gateway_tables import RouteKey

NAME = "slack"
_HANDLED_SUBTYPES = {None, "file_share", "thread_broadcast"}


@dataclass(frozen=True, slots=True)
class Candidate:
    """An event that is a message for the agent."""

    route: RouteKey
    text: str
    user: str
    ts: str
    files: list[dict[str, Any]] = field(default_factory=list)
    needs_route: bool = False
    """Only if ``route`` already leads to a conversation (a thread reply without a mention)."""


def is_dm(channel: str) -> bool:
    return channel.startswith("D")


def strip_mention(text: str, bot_user: str) -> str:
    return re.sub(rf"<@{re.escape(bot_user)}(\|[^>]*)?>", "", text).strip() if bot_user else text.strip()


def candidate(event: dict[str, Any], bot_user: str) -> Candidate | None:
    """The message ``event`` carries for the agent, or ``None`` (not for it, or the bot's own)."""
    kind = event.get("type")
    user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
    subtype = event.get("subtype")
    if kind not in ("message", "app_mention") or not (subtype is None or isinstance(subtype, str)):
        return None
    if subtype not in _HANDLED_SUBTYPES:
        return None
    if not isinstance(user, str) or not user or user == bot_user or event.get("bot_id"):
        return None
    if not isinstance(channel, str) or not channel or not isinstance(ts, str) or not ts:
        return None
    raw = event.get("text") if isinstance(event.get("text"), str) else ""
    listed = event.get("files")
    files = [f for f in listed if isinstance(f, dict)] if isinstance(listed, list) else []
    thread = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else ""
    mentioned = bool(bot_user) and f"<@{bot_user}" in raw
    text = from_slack(strip_mention(raw, bot_user))
    if kind == "app_mention":
        if is_dm(channel):
            return None  # DMs come as message events
        return Candidate(RouteKey(NAME, channel, thread or ts, user), text, user, ts, files)
    if event.get("channel_type") == "im" or is_dm(channel):
        return Candidate(RouteKey(NAME, channel, thread, user), text, user, ts, files)
    if mentioned or not thread:
        return None  # the app_mention event of the same message is the one answered
    return Candidate(RouteKey(NAME, channel, thread, user), text, user, ts, files, needs_route=True)


def command_text(text: str) -> str:
    """What the app's slash command carries, as vigil's own slash command:
    ``heartbeat every 10m …`` → ``/heartbeat every 10m …``; nothing → ``/help``."""
    text = from_slack(text).strip()
    if not text:
        return "/help"
    return text if text.startswith("/") else "/" + text
