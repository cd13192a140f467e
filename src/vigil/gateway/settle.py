"""What happens to an inbox entry once its conversation has handled it: the reply it is owed
is built from the outcome (an answer, a command's reply, or a notice in words of why it could
not be answered), the pages hear where a command took the conversation, and the entry is
finished with its reply queued. Every give-up and set-aside is logged and counted.

By the time an outcome carries an error, :mod:`vigil.gateway.patience` has waited as long as it
may: a transient error means the retry window ran out, an internal one that it came again and
again (the message is set aside as poison), any other is permanent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vigil.gateway import moves, waiting
from vigil.gateway.fanout import describe_route
from vigil.gateway.patience import INTERNAL, TRANSIENT, classify, one_line
from vigil.gateway.wire import event
from vigil.models.base import ModelAuthError
from vigil.models.retry import RetryPolicy, http_status_of
from vigil.runtime.conversation_events import Outcome
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import ANSWERED, FAILED, SET_ASIDE, InboxEntry, NewOutbound

if TYPE_CHECKING:
    from vigil.gateway.parts import SettleHost
    from vigil.gateway.live import LiveConversation

log = logging.getLogger(__name__)

FINISH_TRIES = 10
FINISH_BACKOFF = RetryPolicy(base_delay=0.1, max_delay=60.0)
"""Real-time pauses between tries to finish an answered inbox entry while the store fails
(about 0.1, 0.2, 0.4 … s, under a minute in all; then it is left to the next start)."""


async def settle(
    gateway: "SettleHost", entry: InboxEntry, live: "LiveConversation", future: asyncio.Future[Outcome],
    session_id: str | None,
) -> None:
    """Wait for the outcome of a dispatched entry and finish it (not when the gateway stops
    under it: then it stays unfinished and is answered at the next start)."""
    try:
        waiting.publish_soon(gateway.bus, live)  # it joined the queue (or went past it)
        try:
            outcome = await asyncio.shield(future)
        except asyncio.CancelledError:
            return
        gateway.gauge_queue_depth()
        if gateway.closing and outcome.cancelled:
            await _stopped_under(gateway, entry)
            return
        await _after_input(gateway, live, session_id, outcome)
        if outcome.withdrawn:  # /queue drop, /queue clear, a page's Remove button
            gateway.bus.publish(session_id, event(waiting.WITHDRAWN_EVENT, session_id, inbox_id=entry.id, text=entry.text))
        waiting.publish_soon(gateway.bus, live)
        verdict = verdict_for(entry, outcome, live.session_id, gateway.settings.gateway.retry_window)
        await gateway.finish(entry, verdict.status, verdict.reply, error=verdict.error)
        if verdict.counter is not None:
            name, reason = verdict.counter
            gateway.count(name, reason=reason)
            gateway.say(f"vigil gateway: error: message {entry.id} from {describe_route(entry.route)} "
                        f"{verdict.log}: {verdict.error}")
    finally:
        gateway.handling.discard(entry.id)
        gateway.patience.forget(entry.id)
        gateway.suspects.leave(entry.id)


async def finish(
    gateway: "SettleHost", entry: InboxEntry, status: str, reply: NewOutbound | None, *, error: str | None = None
) -> bool:
    """Finish ``entry`` and queue ``reply``, in one transaction; a store error is tried again
    (:data:`FINISH_BACKOFF`) before the entry is left to the next start. Whether the store
    took it."""
    for attempt in range(FINISH_TRIES):
        try:
            await asyncio.to_thread(
                gateway.store.gateway.inbox_finish, entry.id, status, now=gateway.clock.now(), error=error, reply=reply
            )
            return True
        except StoreError as exc:
            if attempt == FINISH_TRIES - 1 or gateway.closing:
                log.error("cannot finish inbox entry %d (it is answered at the next start): %s", entry.id, exc)
                return False
            delay = FINISH_BACKOFF.delay(attempt)
            log.warning("cannot finish inbox entry %d (retrying in %.2g s): %s", entry.id, delay, exc)
            await asyncio.sleep(delay)
    return False


@dataclass(frozen=True, slots=True)
class Verdict:
    """How an entry finishes, what the person is told, and how a give-up is logged and counted."""

    status: str
    reply: NewOutbound | None
    error: str | None = None
    counter: tuple[str, str] | None = None
    """The metric and its ``reason`` label, for a give-up or a set-aside."""
    log: str = ""


def verdict_for(entry: InboxEntry, outcome: Outcome, current: str | None, window: float) -> Verdict:
    """The entry's final status and the reply it is owed (``None``: a command that said
    nothing, or a turn the person stopped)."""
    route = entry.route
    if outcome.withdrawn:  # /queue drop: never handled, and recorded so
        return Verdict(ANSWERED, None, "withdrawn with /queue before it was handled")
    if outcome.kind == "command" and outcome.reply is not None:
        if not outcome.reply.text:
            return Verdict(ANSWERED, None)
        return Verdict(ANSWERED, NewOutbound(route, outcome.reply.text, kind="command", session_id=current,
                                             inbox_id=entry.id, meta={"is_error": outcome.reply.is_error}))
    error = outcome.error
    if error is not None:
        kind = classify(error)

        def notice(text: str) -> NewOutbound:
            return NewOutbound(route, text, kind="notice", session_id=current, inbox_id=entry.id)

        if kind == INTERNAL:
            text = (f"⚠ vigil set this message aside without answering it: answering it failed again and again "
                    f"with the same error ({type(error).__name__}). Send /retry {entry.id} to try it again "
                    f"(or run `vigil gateway retry {entry.id}`).")
            return Verdict(SET_ASIDE, notice(text), one_line(error), ("inbox_set_aside", "error"),
                           "set aside as poison: its turn failed again and again with")
        if kind == TRANSIENT:
            text = (f"⚠ vigil stopped trying to answer this message: {_waited(window)}, "
                    f"the last try failed with: {one_line(error)}. Send it again when the problem is solved.")
            return Verdict(FAILED, notice(text), one_line(error), ("inbox_given_up", "retry_window"),
                           f"failed: the retry window ({window:g} s) ran out")
        return Verdict(FAILED, notice(permanent_notice(error)), one_line(error), ("inbox_given_up", "permanent"),
                       "failed for good")
    if outcome.result is not None:
        return Verdict(ANSWERED, NewOutbound(route, outcome.result.answer, kind="reply",
                                             session_id=outcome.result.session_id, inbox_id=entry.id))
    return Verdict(ANSWERED, None)


def permanent_notice(error: BaseException) -> str:
    """In words, why a message cannot be answered, with the provider's own short message."""
    status, detail = http_status_of(error)
    said = f" (HTTP {status}: {detail})" if status is not None and detail else ""
    if isinstance(error, ModelAuthError):
        return (f"⚠ The model provider refused vigil's API key{said}, so this message was not answered. "
                "Check the key (model.api_key_env names where it comes from), then send the message again.")
    if status is not None:
        return (f"⚠ The model refused this message{said}, so vigil cannot answer it. Trying again will not "
                "help unless the message or the model settings change.")
    return f"⚠ vigil cannot answer this message: {one_line(error)}"


def _waited(window: float) -> str:
    if window >= 120:
        return f"the model or the store could not be used for {window / 60:g} minutes"
    return f"the model or the store could not be used for {window:g} seconds"


async def _stopped_under(gateway: "SettleHost", entry: InboxEntry) -> None:
    """The gateway stops and interrupted the entry's turn: a stop is not a death of the
    process under it, so it does not count towards setting the entry aside."""
    try:
        await asyncio.to_thread(gateway.store.gateway.inbox_interrupted, entry.id, died=False)
    except (StoreError, KeyError) as exc:
        log.warning("cannot mark inbox entry %d interrupted (it is answered at the next start): %s", entry.id, exc)


async def _after_input(gateway: "SettleHost", live: "LiveConversation", before: str | None, outcome: Outcome) -> None:
    """After a command: follow the conversation to another session (/new, /resume, /suspend)
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
