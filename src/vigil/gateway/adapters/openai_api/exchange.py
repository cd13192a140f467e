"""One request's message through the gateway: stored in the durable inbox before the model is
called, then answered like any other message; the answer streams back from the conversation's
live events and ends with the reply the outbox hands to the adapter.

The reply the outbox sends (kind ``reply``, ``command`` or ``notice``, carrying the message's
inbox id) is the answer's final text; it is delivered whether or not the client is still
connected, and the exchange is remembered for matching (:mod:`.matching`) from what was stored
with the message. So a client that disconnects mid-stream, or a gateway that dies under the
turn, loses nothing: the answer is in the conversation, and the chat's next request finds it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from vigil.gateway.adapters.base import GatewayClosed, GatewayPort, Inbound
from vigil.gateway.adapters.openai_api import matching
from vigil.gateway.adapters.openai_api.context import is_command, system_hash, title_of, turn_text
from vigil.gateway.adapters.openai_api.errors import ApiError
from vigil.gateway.adapters.openai_api.lookup import Bounded, Lookup
from vigil.gateway.adapters.openai_api.parsing import ClientTurn, Message
from vigil.store import SessionNotFound, StoreError
from vigil.store.gateway.gateway_tables import FINISHED_STATUSES, OutboxEntry

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
REMEMBERED = 10_000
"""Requests waiting for their replies that the adapter keeps at most (the oldest are
forgotten first)."""
ASKED = "api_asked"
"""Inbox meta: the hash of the chat up to the message (:func:`asked_hash`)."""
RESPONSE = "api_response"
"""Inbox meta: the id of the response (``/v1/responses``)."""
_ANSWER = "answer"
_EVENT = "event"
_END = "end"


@dataclass(frozen=True, slots=True)
class Answer:
    """How a request was answered."""

    text: str
    session_id: str | None
    usage: dict[str, int] = field(default_factory=dict)
    kind: str = "reply"
    """``reply``, ``command``, ``notice`` (the gateway says why it could not answer) or
    ``stopped`` (the turn was stopped in the web chat)."""


def approval_note(request: dict[str, Any], session_id: str | None, *, first: bool) -> str:
    """What a stream says while the agent waits for a person to approve a command (an API
    client cannot answer; the web chat can)."""
    what = " ".join(str(request.get("description") or request.get("tool") or "a tool call").split())
    what = what if len(what) <= 200 else what[:199] + "…"
    where = f" (conversation {session_id[:12]})" if session_id else ""
    note = (f"[waiting for approval: {what} — approve or deny it in vigil's web chat{where}; "
            "without an answer it is denied]\n\n")
    return note if first else "\n\n" + note


def asked_hash(turn: ClientTurn) -> str:
    """The hash of the chat up to and including the new message, as its client sent it."""
    return matching.exchange_hash([*turn.prior, Message("user", turn.text)])


class Exchange:
    """A stored message waiting for its answer (see the module docstring)."""

    def __init__(self, gateway: GatewayPort, lookup: Lookup, turn: ClientTurn, inbox_id: int,
                 session_id: str | None, stored_text: str, response_id: str | None) -> None:
        self.gateway = gateway
        self.lookup = lookup
        self.asked = asked_hash(turn)
        self.turn = turn
        self.inbox_id = inbox_id
        self.session_id = session_id
        self.stored_text = stored_text
        self.response_id = response_id
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.usage: dict[str, int] = {}
        self._pump: asyncio.Task[None] | None = None
        self._watch: Any = None
        self.new = False
        """The message started a new conversation."""
        self.forget: Callable[[], None] = lambda: None
        """Set by :class:`Exchanges`: the request no longer waits."""
        self.settled: Callable[[], None] = lambda: None
        """Set by :class:`Exchanges`: the request has its answer (the outbox's reply is not needed)."""

    # -- what the gateway tells it -----------------------------------------------------------
    def watch(self) -> None:
        """Follow the conversation's live events (call at once after ``receive``: its turn
        cannot have begun before this coroutine awaits again)."""
        if self.session_id is None:
            return
        self._watch = self.gateway.subscribe(self.session_id)
        self._pump = asyncio.ensure_future(self._follow(self._watch))

    async def _follow(self, watch: Any) -> None:
        async for item in watch:
            self.queue.put_nowait((_EVENT, item))

    def replied(self, entry: OutboxEntry) -> None:
        self.queue.put_nowait((_ANSWER, entry))

    def end(self, why: str) -> None:
        self.queue.put_nowait((_END, why))

    def close(self) -> None:
        """The request is done with it (answered, or its client went away)."""
        self.forget()
        if self._watch is not None:
            self._watch.close()
        if self._pump is not None:
            self._pump.cancel()

    # -- what the client hears ---------------------------------------------------------------
    async def pieces(self, keepalive: float = KEEPALIVE_SECONDS) -> AsyncIterator[str | Answer | None]:
        """The answer's text as it streams (``str``), ``None`` while nothing happens for
        ``keepalive`` seconds, and finally the :class:`Answer`. ``GatewayClosed`` when the
        gateway stops first (the message is answered after its restart)."""
        ours = False  # our turn is running: its deltas are the answer
        began = False
        after_tool = False
        streamed = ""
        command = is_command(self.turn)
        while True:
            try:
                what, item = await asyncio.wait_for(self.queue.get(), keepalive)
            except asyncio.TimeoutError:
                yield None
                continue
            if what == _END:
                raise GatewayClosed(item)
            if what == _ANSWER:
                yield await self._finish(item.text, item.session_id, item.kind)
                return
            kind = item.get("type")
            if kind == "session_moved" and item.get("new_session_id"):
                self.session_id = item["new_session_id"]
            elif kind == "turn_began" and not began and item.get("kind") == "user" \
                    and item.get("text") == self.stored_text:
                ours = began = True
            elif kind == "delta" and ours and item.get("text"):
                text = item["text"]
                if after_tool and streamed and not streamed.endswith("\n\n"):
                    text = ("\n" if streamed.endswith("\n") else "\n\n") + text
                after_tool = False
                streamed += text
                yield text
            elif kind == "tool_started" and ours:
                after_tool = True
            elif kind == "approval_request" and ours:
                note = approval_note(item, self.session_id, first=not streamed)
                streamed += note
                yield note
            elif kind == "turn_ended" and ours:
                # The answer, as the outbox will carry it (a failed turn waits for the notice that
                # says why). Taken from the event, which reaches this process wherever the turn
                # ran (gateway workers share events), and before the outbox sends it.
                ours = False
                self.usage = item.get("usage") or {}
                if item.get("cancelled"):  # stopped from the web chat: no reply will come
                    yield await self._finish(streamed, self.session_id, "stopped")
                    return
                if item.get("error") is None and isinstance(item.get("content"), str):
                    yield await self._finish(item["content"], self.session_id, "reply")
                    return
            elif kind == "command_reply" and command:
                yield await self._finish(item.get("text") or "", self.session_id, "command")
                return

    async def _finish(self, text: str, session_id: str | None, kind: str) -> Answer:
        """The answer: remembered for matching (first: the client may come back at once), the
        conversation titled by the client's message if it is new."""
        answer = Answer(text, session_id or self.session_id, dict(self.usage), kind)
        self.remember([text], answer.session_id)
        if self.new and self.stored_text != self.turn.text and answer.session_id is not None:
            await _retitle(self.gateway, answer.session_id, self.stored_text, self.turn.text)
        self.settled()
        return answer

    def remember(self, answers: list[str], session_id: str | None) -> None:
        """Let the chat's next request find this conversation, by each form of the answer."""
        self.lookup.remember(self.gateway, self.inbox_id, self.asked, self.response_id, answers,
                             session_id or self.session_id)


class Exchanges:
    """The requests of this process waiting for their replies, by inbox id, and the client
    system text each conversation was last shown."""

    def __init__(self) -> None:
        self.waiting: OrderedDict[int, Exchange] = OrderedDict()
        self.answered = Bounded()
        """Inbox ids (as text) whose requests had their answers from the live events."""
        self.systems = Bounded()
        """The hash of the client system text each conversation was last shown."""
        self.lookup = Lookup()

    def add(self, exchange: Exchange) -> None:
        """Keep ``exchange`` until its answer comes or its request is done with it."""
        self.waiting[exchange.inbox_id] = exchange

        def forget() -> None:
            if self.waiting.get(exchange.inbox_id) is exchange:
                del self.waiting[exchange.inbox_id]

        def settled() -> None:
            self.answered.put(str(exchange.inbox_id), "")
            forget()

        exchange.forget, exchange.settled = forget, settled
        while len(self.waiting) > REMEMBERED:
            self.waiting.popitem(last=False)

    async def replied(self, gateway: GatewayPort, entry: OutboxEntry) -> None:
        """The outbox hands over a reply: the request waiting for it hears it (a failed turn's
        notice; usually a request has its answer from the live events already). Without one,
        the exchange is remembered for matching from the message's stored meta: the client went
        away, or the answer came after a restart."""
        if entry.inbox_id is None or entry.kind not in ("reply", "command", "notice"):
            return
        if str(entry.inbox_id) in self.answered:
            return
        exchange = self.waiting.get(entry.inbox_id)
        if exchange is not None:
            exchange.replied(entry)
            return
        stored = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry.inbox_id)
        meta = stored.meta if stored is not None else {}
        asked, response_id = meta.get(ASKED), meta.get(RESPONSE)
        self.lookup.remember(gateway, entry.inbox_id, asked if isinstance(asked, str) else None,
                             response_id if isinstance(response_id, str) else None, [entry.text],
                             entry.session_id or (stored.session_id if stored is not None else None))

    def end_all(self, why: str) -> None:
        for exchange in self.waiting.values():
            exchange.end(why)
        self.waiting.clear()


async def submit(
    gateway: GatewayPort, exchanges: Exchanges, turn: ClientTurn, *, idempotency_key: str | None,
    response_id: str | None = None,
) -> Exchange:
    """Store the request's message (durably, before the model is called) in the conversation
    it belongs to, and return the exchange that waits for its answer."""
    route, session_id, known = await exchanges.lookup.route(gateway, turn)
    shown = system_hash(turn)
    show_system = shown is not None and (session_id is None or exchanges.systems.get(session_id) != shown)
    text = turn_text(turn, show_system=show_system, show_history=not known)
    if not gateway.accepting:
        raise GatewayClosed("the gateway is stopping")
    external_id = f"key:{idempotency_key}" if idempotency_key else f"req:{uuid.uuid4().hex}"
    meta = {ASKED: asked_hash(turn), RESPONSE: response_id, "model": turn.model[:80]}
    receipt = await gateway.receive(Inbound(route, external_id=external_id, text=text, meta=meta))
    exchange = Exchange(gateway, exchanges.lookup, turn, receipt.inbox_id, receipt.session_id, text, response_id)
    exchange.watch()  # before any other await: see Exchange.watch
    exchange.new = session_id is None
    exchanges.add(exchange)
    if receipt.duplicate and await _duplicate(gateway, exchange):
        exchanges.waiting.pop(exchange.inbox_id, None)
    if receipt.session_id is not None and shown is not None and show_system and not is_command(turn):
        exchanges.systems.put(receipt.session_id, shown)
    return exchange


async def _retitle(gateway: GatewayPort, session_id: str, stored: str, text: str) -> None:
    """A new conversation is titled by the client's message, not by the context shown with it."""
    store = gateway.store
    try:
        session = await asyncio.to_thread(store.get_session, session_id)
        if session.title == title_of(stored):
            await asyncio.to_thread(store.update_session, session_id, title=title_of(text))
    except (StoreError, SessionNotFound) as exc:  # a title is cosmetic
        log.warning("cannot title the API conversation %s: %s", session_id, exc)


async def _duplicate(gateway: GatewayPort, exchange: Exchange) -> bool:
    """A request sent again with the same ``Idempotency-Key``: its message is stored once;
    one answered already is answered again from the outbox (then ``True``)."""
    entry = await asyncio.to_thread(gateway.store.gateway.inbox_get, exchange.inbox_id)
    if entry is None:
        return False
    exchange.stored_text = entry.text
    if entry.status not in FINISHED_STATUSES:
        return False
    sent = await asyncio.to_thread(gateway.store.gateway.outbox_list, limit=1_000)
    reply = next((e for e in sent if e.inbox_id == entry.id and e.kind in ("reply", "command", "notice")), None)
    if reply is None:
        raise ApiError(409, "this Idempotency-Key was answered before and its answer is no longer kept; "
                       "send the request with a new key", code="idempotency_key_reused")
    exchange.replied(reply)
    return True


def new_id(prefix: str) -> str:
    """An id of OpenAI's form: ``chatcmpl-…``, ``resp_…``, ``msg_…``."""
    return prefix + secrets.token_hex(12)


def rest_of(streamed: str, final: str) -> str:
    """What a stream that sent ``streamed`` still owes of the ``final`` answer: nothing when it
    streamed it (tool-using turns stream their earlier steps' text before it), the rest when
    it streamed its beginning, else the whole answer after a blank line (a notice, a command's
    reply, a turn that was tried again)."""
    if final.startswith(streamed):
        return final[len(streamed):]
    if not streamed.strip():
        return final
    if " ".join(streamed.split()).endswith(" ".join(final.split())):
        return ""
    return "\n\n" + final
