"""Start-up: answer, once, every inbound message a crash left unanswered.

An unfinished inbox entry is in one of three states, told apart by the conversation's history
(the user message of a gateway turn carries ``meta["inbox"]``): never started (no such
message: answer it now), answered but not marked (a final answer follows the message: finish
the entry with that answer, no new turn), or cut off mid-turn (the message is there without a
final answer: the turn continues after what was stored, without asking again). An entry started :data:`MAX_ATTEMPTS` times is given up on
rather than crashing the gateway forever.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Sequence

from vigil.store import MessageRecord, SessionNotFound, StoreError
from vigil.gateway.live import LiveConversation
from vigil.store.gateway_tables import ANSWERED, FAILED, PENDING, RUNNING, InboxEntry, NewOutbound, RouteKey

if TYPE_CHECKING:
    from vigil.gateway.core import Gateway

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
CATCH_UP_LIMIT = 500
"""Unfinished entries looked through when a conversation is taken over."""


def answer_in_history(messages: Sequence[MessageRecord], inbox_id: int) -> tuple[bool, str | None]:
    """(whether the entry's user message is in ``messages``, the final answer after it)."""
    found = False
    for message in messages:
        if not found:
            found = message.role == "user" and message.meta.get("inbox") == inbox_id
            continue
        if message.role == "user":
            break
        if message.role == "assistant" and not message.tool_calls and not message.meta.get("cut_off"):
            return True, message.content or ""
    return found, None


def _history(gateway: "Gateway", session_id: str) -> list[MessageRecord]:
    store = gateway.store
    messages: list[MessageRecord] = []
    for session in store.conversation_sessions(session_id):
        messages.extend(store.get_messages(session.id))
    return messages


async def recover(gateway: "Gateway") -> int:
    """Answer what is unfinished; returns how many entries were handed on or finished."""
    try:
        entries = await asyncio.to_thread(gateway.store.gateway.inbox_unfinished)
    except StoreError as exc:
        log.error("cannot read the inbox at start-up: %s", exc)
        return 0
    handled = 0
    for entry in entries:
        handled += await recover_entry(gateway, entry)
    if handled:
        gateway.say(f"vigil gateway: {handled} message(s) left unanswered by the last run are being answered")
    return handled


def stored_answer(gateway: "Gateway", entry: InboxEntry) -> tuple[str | None, str | None]:
    """(the answer stored for ``entry``, the session it is in), or ``(None, None)``.

    The entry's turn ran where its conversation was when the turn began, which need not be
    the session recorded when it was queued (a ``/new`` queued before it moved on; a crash
    before the start was recorded left none): look there and where its route leads now."""
    store = gateway.store
    seen: set[str] = set()
    for ref in (entry.session_id, store.gateway.route_get(entry.route)):
        if not ref:
            continue
        try:
            session_id = store.newest_continuation(ref)
            history = _history(gateway, session_id)
        except SessionNotFound:
            continue
        if session_id in seen:
            continue
        seen.add(session_id)
        _found, answer = answer_in_history(history, entry.id)
        if answer is not None:
            return answer, session_id
    return None, None


async def recover_entry(gateway: "Gateway", entry: InboxEntry) -> int:
    """Answer one unfinished entry once (1), or leave it (0): to the worker that runs its
    conversation, when several share the store, or to the next try after a store error."""
    try:
        if gateway.ownership.shared:
            return await _recover_shared(gateway, entry)
        return await _recover_one(gateway, entry)
    except (StoreError, SessionNotFound) as exc:
        log.error("cannot recover inbox entry %d: %s", entry.id, exc)
        return 0


async def _recover_shared(gateway: "Gateway", entry: InboxEntry) -> int:
    """With several workers: only for a conversation this worker runs or now takes over, and
    only while the entry is still unfinished and handled by nobody here (read again under the
    route's lock, which every hand-on of this worker holds)."""
    from vigil.gateway.handover import Elsewhere

    async with gateway.route_lock(entry.route):
        if entry.id in gateway._handling:
            return 0
        fresh = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry.id)
        if fresh is None or fresh.status not in (PENDING, RUNNING):
            return 0
        target = await gateway._live_for_route(fresh.route)  # a take-over catches up, this one too
        if isinstance(target, Elsewhere):
            return 0
        if fresh.id in gateway._handling:
            return 1
        return await answer_in(gateway, fresh, target)


async def catch_up(
    gateway: "Gateway", live: LiveConversation, route: RouteKey | None, *, skip: int | None = None
) -> int:
    """This worker has just taken ``live`` over (another worker died or let it go): answer
    what that one left unfinished in it first, oldest first, before anything new runs there
    (a turn it was cut off in continues only while it is still the last thing asked). Call
    under the route's lock."""
    try:
        entries = await asyncio.to_thread(gateway.store.gateway.inbox_unfinished, limit=CATCH_UP_LIMIT)
    except StoreError as exc:
        log.warning("cannot read what a taken-over conversation left unanswered (the sweep retries): %s", exc)
        return 0
    session_id = live.session_id
    handled = 0
    for entry in entries:
        if entry.id in gateway._handling or entry.id == skip:
            continue
        if entry.route == route or (session_id is not None and entry.session_id == session_id):
            handled += await answer_in(gateway, entry, live)
    return handled


async def _recover_one(gateway: "Gateway", entry: InboxEntry) -> int:
    if entry.id in gateway._handling:
        return 0
    if await _settled_without_a_turn(gateway, entry):
        return 1
    async with gateway.route_lock(entry.route):
        if entry.id in gateway._handling:
            return 0
        live = await gateway._live_for_route(entry.route)
        if not isinstance(live, LiveConversation):  # taken by another worker meanwhile
            return 0
        gateway.dispatch(entry, live, resume=True)
    return 1


async def answer_in(gateway: "Gateway", entry: InboxEntry, live: LiveConversation) -> int:
    """:func:`_recover_one` for a conversation already at hand (call under the route's lock).
    An entry never started (a message another worker stored and handed over) has no answer
    to look for in the history, which is not read then: that read grows with the conversation."""
    if entry.status == PENDING and entry.attempts == 0:
        if entry.id in gateway._handling:
            return 0
        gateway.dispatch(entry, live, client_id=entry.external_id)  # the page's bubble is accepted
        return 1
    if await _settled_without_a_turn(gateway, entry):
        return 1
    if entry.id in gateway._handling:
        return 0
    gateway.dispatch(entry, live, client_id=entry.external_id, resume=entry.status == RUNNING)
    return 1


async def _settled_without_a_turn(gateway: "Gateway", entry: InboxEntry) -> bool:
    """Finish ``entry`` with the answer its history already holds, or give up on it after
    :data:`MAX_ATTEMPTS`; ``False`` when it needs a turn."""
    answer, session_id = await asyncio.to_thread(stored_answer, gateway, entry)
    if answer is not None:
        reply = NewOutbound(entry.route, answer, kind="reply", session_id=session_id, inbox_id=entry.id)
        await gateway.finish(entry, ANSWERED, reply)
        return True
    if entry.attempts >= MAX_ATTEMPTS:
        note = f"⚠ vigil gave up on this message after {entry.attempts} attempts that did not finish"
        await gateway.finish(entry, FAILED, NewOutbound(entry.route, note, kind="notice", inbox_id=entry.id),
                             error="gave up after repeated attempts")
        return True
    return False
