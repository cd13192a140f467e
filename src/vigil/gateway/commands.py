"""Slash commands that only make sense in a gateway conversation.

Every other command comes from the shared registry (:func:`vigil.runtime.commands.build_registry`),
so it behaves as in the REPL. ``/status`` says what this conversation is doing; ``/quit`` has
no window to close here, so it says what to use instead rather than pretending to leave.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from vigil.runtime.commands import build_registry
from vigil.runtime.slash import CommandRegistry, CommandReply, SlashCommand
from vigil.schedule.cron.format import relative
from vigil.schedule.heartbeat.record import HeartbeatError
from vigil.schedule.intervals import format_interval
from vigil.store import SessionNotFound

if TYPE_CHECKING:
    from vigil.gateway.live import LiveConversation

QUIT_WORDS = frozenset({"quit", "exit", "q"})
QUIT_REPLY = ("There is nothing to leave here: the conversation stays open for your next message. "
              "/suspend puts it aside, /new starts another, /stop ends a running answer.")


def gateway_registry(live: "LiveConversation") -> CommandRegistry:
    """The shared commands plus ``/status`` of ``live``."""
    registry = build_registry()

    async def status(_control: object, _args: str) -> CommandReply:
        return CommandReply(await asyncio.to_thread(status_text, live))

    registry.register(SlashCommand("status", "what this conversation is doing: session, queue, heartbeat", status))
    return registry


def status_text(live: "LiveConversation") -> str:
    """The ``/status`` reply (store calls: run it in a thread)."""
    gateway = live.gateway
    session_id = live.session_id
    if session_id is None:
        return "No conversation yet: the next message starts one."
    try:
        session = gateway.store.get_session(session_id)
    except SessionNotFound:
        return f"Conversation {session_id[:8]} is no longer stored."
    waiting = live.conversation.queued
    lines = [
        f"Conversation {session_id[:8]} — {session.title or 'untitled'} "
        f"({session.message_count} messages, model {session.model or '-'})",
        "Waiting: " + (f"{waiting} message(s) queued behind this command" if waiting else "nothing queued"),
    ]
    try:
        heartbeat = gateway.heartbeat_repo.get(session_id)
    except HeartbeatError as exc:
        lines.append(f"Heartbeat: damaged record ({exc})")
        return "\n".join(lines)
    if heartbeat is None:
        lines.append("Heartbeat: none")
    else:
        when, now = "", gateway.clock.now()
        fire = heartbeat.fire_at()
        if heartbeat.active and fire is not None:
            when = f", next fire {relative(fire - now)}"
        if heartbeat.ends_at is not None:
            when += f", ends {relative(heartbeat.ends_at - now)}" if heartbeat.ends_at > now else ", ended"
        lines.append(f"Heartbeat: every {format_interval(heartbeat.interval)} ({heartbeat.status}{when}), "
                     f"fired {heartbeat.fire_count} time(s); /heartbeat status tells more")
    return "\n".join(lines)


def is_quit(text: str) -> bool:
    words = text.strip()[1:].split(maxsplit=1)
    return bool(words) and words[0].lower() in QUIT_WORDS
