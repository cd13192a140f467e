"""Start-up and take-over: answer, once, every inbound message a crash left unanswered.

An unfinished inbox entry is in one of three states, told apart by the conversation's history
(the user message of a gateway turn carries ``meta["inbox"]``): never started (no such
message: answer it now), answered but not marked (a final answer follows the message: finish
the entry with that answer, no new turn), or cut off mid-turn (the message is there without a
final answer: the turn continues after what was stored, without asking again).

A cut-off entry (found ``running``: the process died under its turn) is an interruption, not
a failed attempt (``inbox_interrupted``): it is answered again as often as it takes, unless it
was running at :data:`~vigil.store.gateway.gateway_tables.POISON_DEATHS` deaths in a row with nothing
else finished in between; then it is set aside as poison, the person told, so that it cannot
take the gateway down with it. An entry that was running at such a death (a "suspect") runs
again only once the process has stayed up for a few seconds, and the second time alone among
the suspects (:class:`SuspectGate`): at the next death the one running is the one the
evidence points at, and the others are not blamed with it. A crash loop that kills the process
sooner, as a failing host does, delays the suspects but is no evidence against them. Beyond
what can be told apart: a process that keeps dying a few seconds after a message starts, never
leaving it time to finish, sets that message aside as if it were the cause.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Sequence

from vigil.clock import Clock
from vigil.gateway.fanout import describe_route
from vigil.store import MessageRecord, SessionNotFound, StoreError
from vigil.gateway.live import LiveConversation
from vigil.gateway.cluster.ownership import Elsewhere
from vigil.store.gateway.gateway_tables import (
    ANSWERED,
    PENDING,
    POISON_DEATHS,
    RUNNING,
    SET_ASIDE,
    InboxEntry,
    NewOutbound,
    RouteKey,
)

if TYPE_CHECKING:
    from vigil.gateway.parts import RecoveryHost

log = logging.getLogger(__name__)

CATCH_UP_LIMIT = 500
"""Unfinished entries looked through when a conversation is taken over."""
PENDING_WATCH = 2.0
"""Seconds between looks for entries another process put back (see :class:`PendingWatch`)."""


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


def _history(gateway: "RecoveryHost", session_id: str) -> list[MessageRecord]:
    store = gateway.store
    messages: list[MessageRecord] = []
    for session in store.conversation_sessions(session_id):
        messages.extend(store.get_messages(session.id))
    return messages


async def recover(gateway: "RecoveryHost") -> int:
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


def stored_answer(gateway: "RecoveryHost", entry: InboxEntry) -> tuple[str | None, str | None]:
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


async def recover_entry(gateway: "RecoveryHost", entry: InboxEntry) -> int:
    """Answer one unfinished entry once (1), or leave it (0): to the worker that runs its
    conversation, when several share the store, or to the next try after a store error."""
    try:
        if gateway.ownership.shared:
            return await _recover_shared(gateway, entry)
        return await _recover_one(gateway, entry)
    except (StoreError, SessionNotFound) as exc:
        log.error("cannot recover inbox entry %d: %s", entry.id, exc)
        return 0


async def _recover_shared(gateway: "RecoveryHost", entry: InboxEntry) -> int:
    """With several workers: only for a conversation this worker runs or now takes over, and
    only while the entry is still unfinished and handled by nobody here (read again under the
    route's lock, which every hand-on of this worker holds)."""

    async with gateway.route_lock(entry.route):
        if entry.id in gateway.handling:
            return 0
        fresh = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry.id)
        if fresh is None or fresh.status not in (PENDING, RUNNING):
            return 0
        target = await gateway.live_for_route(fresh.route)  # a take-over catches up, this one too
        if isinstance(target, Elsewhere):
            return 0
        if fresh.id in gateway.handling:
            return 1
        return await answer_in(gateway, fresh, target)


async def catch_up(
    gateway: "RecoveryHost", live: LiveConversation, route: RouteKey | None, *, skip: int | None = None
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
        if entry.id in gateway.handling or entry.id == skip:
            continue
        if entry.route == route or (session_id is not None and entry.session_id == session_id):
            handled += await answer_in(gateway, entry, live)
    return handled


async def _recover_one(gateway: "RecoveryHost", entry: InboxEntry) -> int:
    if entry.id in gateway.handling:
        return 0
    if entry.status == RUNNING:
        entry = await _cut_off(gateway, entry)
    if await _settled_without_a_turn(gateway, entry):
        return 1
    async with gateway.route_lock(entry.route):
        if entry.id in gateway.handling:
            return 0
        live = await gateway.live_for_route(entry.route)
        if not isinstance(live, LiveConversation):  # taken by another worker meanwhile
            return 0
        if entry.id in gateway.handling:  # handed on by the take-over's catch-up
            return 1
        gateway.dispatch(entry, live, client_id=entry.external_id, resume=entry.attempts > 0)
    return 1


async def answer_in(gateway: "RecoveryHost", entry: InboxEntry, live: LiveConversation) -> int:
    """:func:`_recover_one` for a conversation already at hand (call under the route's lock).
    An entry never started (a message another worker stored and handed over) has no answer
    to look for in the history, which is not read then: that read grows with the conversation."""
    if entry.status == PENDING and entry.attempts == 0:
        if entry.id in gateway.handling:
            return 0
        gateway.dispatch(entry, live, client_id=entry.external_id)  # the page's bubble is accepted
        return 1
    if entry.id in gateway.handling:
        return 0
    if entry.status == RUNNING:  # its worker died under it, or let the conversation go
        entry = await _cut_off(gateway, entry)
    if await _settled_without_a_turn(gateway, entry):
        return 1
    if entry.id in gateway.handling:
        return 0
    gateway.dispatch(entry, live, client_id=entry.external_id, resume=entry.attempts > 0)
    return 1


async def _cut_off(gateway: "RecoveryHost", entry: InboxEntry) -> InboxEntry:
    """A ``running`` entry nobody here runs: the process that ran its turn died. Back to
    ``pending``, with the death counted when nothing else finished meanwhile."""
    return await asyncio.to_thread(gateway.store.gateway.inbox_interrupted, entry.id, died=True)


async def _settled_without_a_turn(gateway: "RecoveryHost", entry: InboxEntry) -> bool:
    """Finish ``entry`` with the answer its history already holds, or set it aside as poison
    after :data:`POISON_DEATHS`; ``False`` when it needs a turn."""
    answer, session_id = await asyncio.to_thread(stored_answer, gateway, entry)
    if answer is not None:
        reply = NewOutbound(entry.route, answer, kind="reply", session_id=session_id, inbox_id=entry.id)
        await gateway.finish(entry, ANSWERED, reply)
        return True
    if entry.deaths >= POISON_DEATHS:
        why = f"the process died {entry.deaths} times in a row while answering it, with nothing else answered in between"
        note = (f"⚠ vigil set this message aside without answering it: {why}, so the message itself may be "
                f"what brings vigil down. Send /retry {entry.id} to try it again (or run `vigil gateway retry {entry.id}`).")
        await gateway.finish(entry, SET_ASIDE, NewOutbound(entry.route, note, kind="notice", inbox_id=entry.id),
                             error=why)
        gateway.count("inbox_set_aside", reason="deaths")
        gateway.say(f"vigil gateway: error: message {entry.id} from {describe_route(entry.route)} set aside as "
                    f"poison: {why} (vigil gateway retry {entry.id} sends it again)")
        return True
    return False


class SuspectGate:
    """Holds back the turns of suspect entries (``deaths`` > 0: the process died under them
    with nothing else finished). A suspect runs only once the process has stayed up for
    ``hold`` seconds (a crash loop that kills it sooner, as a failing host does, is then no
    evidence against the suspects, which did not run); one that was already running at
    :data:`POISON_DEATHS` - 1 such deaths runs alone among those, in the order they reach the
    gate, so that the next death points at one entry. Other entries never wait here."""

    def __init__(self, clock: Clock, hold: float) -> None:
        self.clock = clock
        self.hold = hold
        self.ready_at = clock.now() + hold
        self._lock = asyncio.Lock()
        self._holder: int | None = None

    def started(self) -> None:
        """The process (re)starts now: suspects wait ``hold`` seconds from here."""
        self.ready_at = self.clock.now() + self.hold

    async def enter(self, entry: InboxEntry) -> None:
        """Wait until ``entry`` may run (at once when it is no suspect)."""
        if entry.deaths <= 0:
            return
        await self.clock.sleep_until(self.ready_at)
        if entry.deaths >= POISON_DEATHS - 1:
            await self._lock.acquire()
            self._holder = entry.id

    def leave(self, entry_id: int) -> None:
        """``entry_id``'s turn ended or waits for the model: the next suspect may run."""
        if self._holder == entry_id:
            self._holder = None
            self._lock.release()


async def requeue(gateway: "RecoveryHost", entry_id: int) -> InboxEntry:
    """Put a set-aside entry back to be answered (``vigil gateway retry``, ``/retry``) and
    hand it to its conversation now; the entry as it is now (``KeyError`` for an unknown id)."""
    entry = await asyncio.to_thread(gateway.store.gateway.inbox_requeue, entry_id)
    if entry.status == PENDING and entry.id not in gateway.handling:
        gateway.spawn(recover_entry(gateway, entry))
    return entry


class PendingWatch:
    """On a store only this gateway uses: hands on, every :data:`PENDING_WATCH` seconds,
    entries put back by another process (``vigil gateway retry``); with several workers
    the hand-over's sweep does it."""

    def __init__(self, gateway: "RecoveryHost", every: float | None = None) -> None:
        self.gateway = gateway
        self.every = PENDING_WATCH if every is None else every
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and not self.gateway.ownership.shared:
            self._task = asyncio.create_task(self._run(), name="gateway-pending-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        gateway = self.gateway
        while True:
            await asyncio.sleep(self.every)
            try:
                entries = await asyncio.to_thread(gateway.store.gateway.inbox_list, statuses=[PENDING], limit=100)
                for entry in sorted(entries, key=lambda e: e.id):
                    if entry.id not in gateway.handling and not gateway.closing:
                        await recover_entry(gateway, entry)
            except StoreError as exc:
                log.warning("cannot look for messages put back in the inbox (trying again): %s", exc)
            except Exception:  # one bad entry must not end the watch
                log.exception("the look for messages put back in the inbox failed")
