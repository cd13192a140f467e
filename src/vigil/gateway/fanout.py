"""Where a live conversation's events go: its pages (the event bus), its platform, the logs
and metrics, and — for a heartbeat turn — the outbox.

A heartbeat turn that was asked to answer ``HEARTBEAT_OK`` when nothing changed (not
``--loud``) is not shown on the platform while it runs (no typing, no preview): its answer
goes out through the outbox once it is known, and ``HEARTBEAT_OK`` not at all. Pages get every
event; a silent answer's ``turn_ended`` carries ``silent: true`` so the web chat folds it.

The gateway calls :func:`on_live_event` for every event of every live conversation; a
compression moves the conversation (and its watchers and route) to the continuation.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any

from vigil.agent.events import AssistantStep, Compressed
from vigil.gateway import moves, waiting
from vigil.gateway import background_notes
from vigil.gateway.wire import event, heartbeat_view, live_event
from vigil.runtime.conversation_events import HEARTBEAT, USER, BackgroundNote, ConversationEvent, TurnBegan, TurnEnded
from vigil.schedule.heartbeat.record import Route
from vigil.schedule.heartbeat.text import asks_for_silence, is_silent_answer
from vigil.schedule.heartbeat.upkeep import Noted
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import NewOutbound, OutboxEntry, RouteKey

if TYPE_CHECKING:
    from vigil.gateway.parts import FanoutHost
    from vigil.gateway.live import LiveConversation

log = logging.getLogger(__name__)

WEB = "web"

_QUIET_TURNS: "weakref.WeakSet[LiveConversation]" = weakref.WeakSet()
"""Live conversations running a heartbeat turn that may answer HEARTBEAT_OK."""


async def on_live_event(gateway: "FanoutHost", live: "LiveConversation", item: ConversationEvent) -> None:
    """Fan one conversation event out (see the module docstring)."""
    live.touch()
    session_id = live.session_id
    if isinstance(item, Compressed):
        await moves.moved(gateway, live, item.parent_id, item.child_id, "compression")
        return
    if isinstance(item, BackgroundNote):
        await background_notes.deliver(gateway, live, item)
        return
    wire = live_event(session_id, item)
    if isinstance(item, TurnBegan):
        if item.kind == USER:  # it left the queue
            waiting.publish_soon(gateway.bus, live)
        if item.kind == HEARTBEAT and asks_for_silence(item.text):
            _QUIET_TURNS.add(live)
        else:
            _QUIET_TURNS.discard(live)
    quiet = live in _QUIET_TURNS
    silent = quiet and isinstance(item, TurnEnded) and silent_answer(item)
    if isinstance(item, TurnEnded):
        _QUIET_TURNS.discard(live)
    if wire is not None:
        if silent:
            wire["silent"] = True
        announce(gateway, live, wire, platform=not quiet)
    if isinstance(item, AssistantStep) and gateway.metrics is not None:
        gateway.metrics.add_usage(item.usage)
    if isinstance(item, TurnBegan) and item.kind == HEARTBEAT:
        gateway.count("heartbeat_fires")
        gateway.say(f"vigil gateway: heartbeat fired in {short(session_id)}")
    if isinstance(item, TurnEnded):
        outcome = "interrupted" if item.cancelled else "failed" if item.error is not None else "answered"
        gateway.count("turns", kind=item.kind, outcome=outcome)
        tokens = item.result.usage.prompt_tokens if item.result is not None else 0
        gateway.say(f"vigil gateway: {item.kind} turn in {short(session_id)} {outcome}"
                    + (f" ({tokens} prompt tokens)" if tokens else "")
                    + (f": {item.error}" if item.error is not None else ""))
        if item.kind == HEARTBEAT and not silent:
            await deliver_heartbeat(gateway, live, item)
            if session_id is not None:
                await publish_heartbeat(gateway, session_id)
        # the conversation is still inside the ended turn's handling: it stays busy only when
        # something waits behind it
        queued = live.conversation.queued
        gateway.bus.publish(session_id, event("status", session_id, busy=queued > 0, queued=queued))


def silent_answer(ended: TurnEnded) -> bool:
    """Whether a heartbeat turn ended with ``HEARTBEAT_OK`` (nothing changed)."""
    return ended.result is not None and is_silent_answer(ended.result.answer)


def announce(gateway: "FanoutHost", live: "LiveConversation", item: dict[str, Any], *, platform: bool = True) -> None:
    """Send a live event to the conversation's pages and (``platform``) to its platform."""
    gateway.bus.publish(item.get("session_id") or live.session_id, item)
    if not platform:
        return
    route = live.route
    adapter = gateway.adapters.get(route.adapter) if route is not None else None
    if adapter is not None and route is not None:
        gateway.spawn(_quietly(adapter.live(route, item), adapter.name))


async def deliver_heartbeat(gateway: "FanoutHost", live: "LiveConversation", ended: TurnEnded) -> None:
    """A heartbeat turn's answer goes to the conversation's platform through the outbox."""
    route = live.route
    if route is None or ended.result is None or not ended.result.answer:
        return
    message = NewOutbound(route, ended.result.answer, kind="heartbeat", session_id=ended.result.session_id)
    try:
        await asyncio.to_thread(gateway.store.gateway.outbox_add, message, now=gateway.clock.now())
    except StoreError as exc:
        log.error("cannot queue the heartbeat answer of %s: %s", live.session_id, exc)
        return
    gateway.outbox.wake()


async def heartbeat_note(gateway: "FanoutHost", noted: Noted) -> None:
    """A heartbeat vigil ended or paused by itself: its note (stored in the conversation
    already) goes to the conversation's pages and, as a notice, to its platform."""
    session_id = noted.session_id
    gateway.say(f"vigil gateway: heartbeat of {short(session_id)} {noted.kind.replace('_', ' ')}")
    gateway.bus.publish(session_id, event("note", session_id, text=noted.text, reason=noted.kind))
    await publish_heartbeat(gateway, session_id)
    live = gateway.live.get(session_id)
    route = live.route if live is not None and live.route is not None else _route_key(noted.heartbeat.route)
    if route is None:
        return
    message = NewOutbound(route, noted.text, kind="notice", session_id=session_id)
    try:
        await asyncio.to_thread(gateway.store.gateway.outbox_add, message, now=gateway.clock.now())
    except StoreError as exc:
        log.error("cannot queue the heartbeat note of %s: %s", session_id, exc)
        return
    gateway.outbox.wake()


def _route_key(route: Route | None) -> RouteKey | None:
    return None if route is None else RouteKey(route.platform, route.chat, route.thread or "")


async def publish_heartbeat(gateway: "FanoutHost", session_id: str) -> None:
    """Tell the conversation's pages what its heartbeat is now."""
    try:
        heartbeat = await asyncio.to_thread(gateway.heartbeat_repo.get, session_id)
    except Exception as exc:  # a damaged record: shown as none
        log.warning("cannot read the heartbeat of %s: %s", session_id, exc)
        heartbeat = None
    gateway.bus.publish(session_id, event("heartbeat", session_id, heartbeat=heartbeat_view(heartbeat)))


def delivery_report(gateway: "FanoutHost", what: str, entry: OutboxEntry, error: str | None) -> None:
    """The outbox sender's report of one try: counted, and logged unless it is a web reply sent."""
    where = describe_route(entry.route)
    if what == "sent":
        gateway.count("outbox_sent", adapter=entry.route.adapter)
        if entry.route.adapter != WEB:
            gateway.say(f"vigil gateway: delivered {entry.kind} {entry.id} to {where}")
    elif what == "retry":
        gateway.count("outbox_retries", adapter=entry.route.adapter)
        gateway.say(f"vigil gateway: delivery of {entry.kind} {entry.id} to {where} failed, retrying: {error}")
    else:
        gateway.count("outbox_failures", adapter=entry.route.adapter)
        gateway.say(f"vigil gateway: error: {entry.kind} {entry.id} to {where} "
                    f"could not be delivered and is marked failed: {error}")


def short(session_id: str | None) -> str:
    return (session_id or "-")[:8]


ROUTE_PART = 24
"""Characters of a chat, thread or user id a log line shows: whole for every platform's ids
(a thread timestamp is 17), bounded for a web chat's or anything unexpected."""


def describe_route(route: RouteKey) -> str:
    parts = [route.adapter, route.chat[:ROUTE_PART]]
    if route.thread:
        parts.append(f"thread {route.thread[:ROUTE_PART]}")
    if route.user:
        parts.append(f"user {route.user[:ROUTE_PART]}")
    return " ".join(parts)


async def _quietly(coroutine: Any, name: str) -> None:
    try:
        await coroutine
    except Exception:
        log.exception("adapter %s failed on a live event", name)
