"""What happens to an inbox entry once its conversation has handled it: the reply it is owed
is built from the outcome (an answer, a command's reply, or a notice of the error), the pages
hear where a command took the conversation, and the entry is finished with its reply queued."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from vigil.gateway import moves
from vigil.gateway.wire import event
from vigil.runtime.conversation_events import Outcome
from vigil.store.gateway_tables import ANSWERED, FAILED, InboxEntry, NewOutbound

if TYPE_CHECKING:
    from vigil.gateway.core import Gateway
    from vigil.gateway.live import LiveConversation


async def settle(
    gateway: "Gateway", entry: InboxEntry, live: "LiveConversation", future: asyncio.Future[Outcome],
    session_id: str | None,
) -> None:
    """Wait for the outcome of a dispatched entry and finish it (not when the gateway stops
    under it: then it stays unfinished and is answered at the next start)."""
    try:
        try:
            outcome = await asyncio.shield(future)
        except asyncio.CancelledError:
            return
        gateway.gauge_queue_depth()
        if gateway._closing and outcome.cancelled:
            return
        await _after_input(gateway, live, session_id, outcome)
        status, reply = reply_for(entry, outcome, live.session_id)
        await gateway.finish(entry, status, reply, error=None if outcome.error is None else str(outcome.error))
    finally:
        gateway._handling.discard(entry.id)


def reply_for(entry: InboxEntry, outcome: Outcome, current: str | None) -> tuple[str, NewOutbound | None]:
    """The entry's final status and the reply it is owed (``None``: a command that said nothing)."""
    route = entry.route
    if outcome.kind == "command" and outcome.reply is not None:
        if not outcome.reply.text:
            return ANSWERED, None
        return ANSWERED, NewOutbound(route, outcome.reply.text, kind="command", session_id=current,
                                     inbox_id=entry.id, meta={"is_error": outcome.reply.is_error})
    if outcome.error is not None:
        return FAILED, NewOutbound(route, f"⚠ {outcome.error}", kind="notice", session_id=current, inbox_id=entry.id)
    if outcome.result is not None:
        return ANSWERED, NewOutbound(route, outcome.result.answer, kind="reply",
                                     session_id=outcome.result.session_id, inbox_id=entry.id)
    return ANSWERED, None


async def _after_input(gateway: "Gateway", live: "LiveConversation", before: str | None, outcome: Outcome) -> None:
    """After a command: follow the conversation to another session (/new, /resume, /stop)
    and tell its pages what the command said and what its heartbeat is now."""
    after = live.session_id
    if after != before:
        reason = "switch"
        if before is not None and after is not None:
            if await asyncio.to_thread(gateway.store.newest_continuation, before) == after:
                reason = "compression"  # /compress
        await moves.moved(gateway, live, before, after, reason)
    if outcome.kind == "command" and outcome.reply is not None:
        gateway.bus.publish(after or before, event(
            "command_reply", after or before, text=outcome.reply.text, is_error=outcome.reply.is_error
        ))
        if after is not None:
            await gateway.publish_heartbeat(after)
