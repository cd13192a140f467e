"""The gateway: live conversations, routing, the inbox and outbox, and what adapters may ask.

Input path: an adapter hands a message to :meth:`Gateway.receive`, which writes it to the inbox
(durable, deduplicated by the platform's message id) and only then returns, so the adapter may
acknowledge the platform. Under the route's lock — so messages of one chat enter its queue in
the order they arrived — the message is routed to its conversation and submitted to the
conversation's runtime queue, marked with its inbox id. When the turn (or slash command) ends,
the inbox entry is finished and its reply queued in the outbox in one transaction; the outbox
sender delivers it. A crash leaves unfinished entries: :mod:`vigil.gateway.recovery` answers
them once at the next start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Callable, Mapping

from vigil.agent.events import AssistantStep, Compressed
from vigil.clock import Clock, SystemClock
from vigil.config import Settings
from vigil.gateway.adapters.base import Adapter, GatewayClosed, Inbound, Receipt
from vigil.gateway.approvals import Approvals
from vigil.gateway.bus import EventBus, Watch
from vigil.gateway.live import LiveConversation
from vigil.gateway.outbox import OutboxSender
from vigil.gateway.routing import WEB, Router
from vigil.gateway import views
from vigil.models.base import ModelClient
from vigil.profiles import Profile
from vigil.runtime.conversation_events import HEARTBEAT, ConversationEvent, Outcome, TurnBegan, TurnEnded
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
from vigil.store import SessionStore, StoreError
from vigil.store.gateway_tables import ANSWERED, FAILED, InboxEntry, NewOutbound, OutboxEntry, RouteKey
from vigil.gateway.wire import event, heartbeat_view, live_event

log = logging.getLogger(__name__)

Say = Callable[[str], None]
"""Where the gateway's one-line reports go (stdout and logs/gateway.log)."""

WORKSPACES = "workspaces"


class Gateway:
    """Implements :class:`~vigil.gateway.adapters.base.GatewayPort` for the running process."""

    def __init__(
        self,
        *,
        store: SessionStore,
        profile: Profile,
        settings: Settings,
        client: ModelClient,
        adapters: Mapping[str, Adapter] = {},
        clock: Clock | None = None,
        say: Say = lambda line: None,
        metrics: Any = None,
        heartbeats: HeartbeatScheduler | None = None,
    ) -> None:
        self.store = store
        self.profile = profile
        self.settings = settings
        self.client = client
        self.clock = clock or SystemClock()
        self.adapters: dict[str, Adapter] = dict(adapters)
        self.say = say
        self.metrics = metrics
        self.heartbeats = heartbeats or HeartbeatScheduler(store, clock=self.clock)
        self.heartbeat_repo = HeartbeatRepo(store, self.clock)
        self.router = Router(store, self.clock)
        self.bus = EventBus()
        self.approvals = Approvals(self.clock, settings.gateway.approval_timeout)
        self.outbox = OutboxSender(
            store, self.adapters, self.clock, attempts=settings.gateway.outbox_attempts, report=self._delivery
        )
        self.live: dict[str, LiveConversation] = {}
        self._route_locks: dict[RouteKey, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._accepting = False
        self._closing = False
        self.answered = 0
        self.failed = 0

    # -- GatewayPort ------------------------------------------------------------------------
    @property
    def accepting(self) -> bool:
        return self._accepting

    async def receive(self, inbound: Inbound) -> Receipt:
        if not self._accepting:
            raise GatewayClosed("the gateway is shutting down; send the message again in a moment")
        lock = self._route_locks.setdefault(inbound.route, asyncio.Lock())
        async with lock:
            entry, new = await asyncio.to_thread(
                self.store.gateway.inbox_accept,
                inbound.route,
                inbound.external_id,
                inbound.text,
                sender=inbound.sender,
                received_at=self.clock.now(),
                meta=dict(inbound.meta),
            )
            self._count("inbound_messages", adapter=inbound.route.adapter, duplicate=str(not new).lower())
            if not new:
                return Receipt(entry.id, True, entry.session_id)
            live = await self._live_for_route(inbound.route)
            self.dispatch(entry, live, client_id=inbound.external_id)
            return Receipt(entry.id, False, live.session_id)

    async def open_conversation(self, route: RouteKey, session_id: str | None = None) -> str:
        lock = self._route_locks.setdefault(route, asyncio.Lock())
        async with lock:
            if session_id is not None:
                session_id = await asyncio.to_thread(self._newest, session_id)
                await asyncio.to_thread(self.router.point, route, session_id)
                return session_id
            live = await self._new_conversation(route)
            assert live.session_id is not None
            return live.session_id

    def subscribe(self, session_id: str) -> Watch:
        return self.bus.subscribe(session_id)

    async def conversations(self, query: str | None = None, *, limit: int = 100) -> list[dict[str, Any]]:
        return await asyncio.to_thread(views.conversations, self, query, limit)

    async def conversation(self, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(views.conversation, self, session_id)

    def resolve_approval(self, approval_id: str, approved: bool) -> bool:
        return self.approvals.resolve(approval_id, approved)

    def workdir(self, session_id: str) -> Path:
        session = self.store.get_session(self._newest(session_id))
        cwd = session.model_config.get("cwd")
        path = Path(cwd) if isinstance(cwd, str) and cwd else self._new_workspace()
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Re-arm heartbeats, answer what a crash left unanswered, start the outbox and the
        adapters, then take input."""
        from vigil.gateway.recovery import recover

        await self.heartbeats.start()
        await self._rearm_heartbeats()
        self._accepting = True
        await recover(self)
        self.outbox.start()
        for adapter in self.adapters.values():
            await adapter.start(self)

    async def stop(self, grace: float) -> None:
        """Stop taking input, let running turns finish within ``grace`` seconds (then they
        are interrupted), and stop. Inputs still queued stay in the inbox for the next start."""
        self._accepting = False
        self._closing = True
        for adapter in self.adapters.values():
            try:
                await adapter.stop()
            except Exception:
                log.exception("adapter %s did not stop cleanly", adapter.name)
        await self.heartbeats.stop()
        for live in self.live.values():
            live.conversation.drop_queued()
        running = [live for live in self.live.values() if live.conversation.busy]
        if running:
            self.say(f"vigil gateway: waiting up to {grace:g} s for {len(running)} running turn(s)")
            waits = [asyncio.ensure_future(live.conversation.wait_idle()) for live in running]
            done, pending = await asyncio.wait(waits, timeout=grace)
            for task in pending:
                task.cancel()
        for live in list(self.live.values()):
            await live.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await asyncio.wait_for(self.outbox.drain(), 5.0)
        except (asyncio.TimeoutError, StoreError) as exc:
            log.warning("outbox not drained at shutdown (sent at the next start): %s", exc)
        await self.outbox.stop()
        self.bus.close_all()

    # -- conversations ----------------------------------------------------------------------
    async def _live_for_route(self, route: RouteKey) -> LiveConversation:
        resolved = await asyncio.to_thread(self.router.resolve, route)
        if resolved.session_id is None:
            return await self._new_conversation(route)
        if resolved.reopen:
            await asyncio.to_thread(self.store.reopen_session, resolved.session_id)
        live = await self.live_for(resolved.session_id, route)
        return live

    async def live_for(self, session_id: str, route: RouteKey | None = None) -> LiveConversation:
        """The running conversation of ``session_id``, started on first use."""
        live = self.live.get(session_id)
        if live is None:
            record = await asyncio.to_thread(self.store.get_session, session_id)
            cwd = record.model_config.get("cwd")
            live = LiveConversation(
                self, session_id, route, Path(cwd) if isinstance(cwd, str) and cwd else self._new_workspace()
            )
            self.live[session_id] = live
            self._gauge("live_conversations", len(self.live))
        if route is not None and live.route != route:
            live.set_route(route)
        await live.ensure_started()
        return live

    async def _new_conversation(self, route: RouteKey) -> LiveConversation:
        workspace = self._new_workspace()
        await asyncio.to_thread(workspace.mkdir, 0o700, True, True)
        live = LiveConversation(self, None, route, workspace)
        session_id = await live.controller.ensure_session()
        self.live[session_id] = live
        self._gauge("live_conversations", len(self.live))
        await asyncio.to_thread(self.router.point, route, session_id)
        await live.ensure_started()
        self.say(f"vigil gateway: new conversation {session_id[:8]} for {describe_route(route)}")
        return live

    def _new_workspace(self) -> Path:
        return self.profile.home / WORKSPACES / secrets.token_hex(6)

    def _newest(self, ref: str) -> str:
        return self.store.newest_continuation(self.store.resolve_session(ref))

    async def _rearm_heartbeats(self) -> None:
        """Every active heartbeat of a gateway route is armed again, with no new message."""
        try:
            heartbeats = await asyncio.to_thread(self.heartbeat_repo.list)
        except StoreError as exc:
            log.warning("cannot list heartbeats at start-up: %s", exc)
            return
        armed = 0
        for heartbeat in heartbeats:
            route = heartbeat.route
            if not heartbeat.active or route is None or route.platform not in self.adapters:
                continue
            key = RouteKey(route.platform, route.chat, route.thread or "")
            try:
                await self.live_for(heartbeat.session_id, key)
                armed += 1
            except StoreError as exc:
                log.warning("cannot re-arm the heartbeat of %s: %s", heartbeat.session_id, exc)
        if armed:
            self.say(f"vigil gateway: {armed} heartbeat(s) re-armed from the store")

    # -- input ------------------------------------------------------------------------------
    def dispatch(self, entry: InboxEntry, live: LiveConversation, *, client_id: str | None = None) -> None:
        """Hand an inbox entry to its conversation's queue now (no await before the submit:
        the order of calls is the order of the queue) and settle it when it is answered."""
        conversation = live.conversation
        is_command = live.controller.is_command(entry.text)
        if self.settings.gateway.busy == "interrupt" and not is_command and conversation.running_turn:
            conversation.interrupt()
        session_id = live.session_id
        future = conversation.submit(entry.text, meta={"inbox": entry.id})
        self.bus.publish(session_id, event(
            "message_accepted", session_id, inbox_id=entry.id, text=entry.text, client_id=client_id
        ))
        self._gauge("queue_depth", sum(l.conversation.queued for l in self.live.values()))
        self._spawn(self._settle(entry, live, future, session_id))

    async def _settle(
        self, entry: InboxEntry, live: LiveConversation, future: asyncio.Future[Outcome], session_id: str | None
    ) -> None:
        try:
            await asyncio.to_thread(self.store.gateway.inbox_start, entry.id, session_id or "", now=self.clock.now())
        except (StoreError, KeyError) as exc:
            log.warning("cannot mark inbox entry %d started: %s", entry.id, exc)
        try:
            outcome = await asyncio.shield(future)
        except asyncio.CancelledError:
            return  # the gateway is stopping: the entry stays unfinished and is answered at the next start
        if self._closing and outcome.cancelled:
            return
        await self._after_input(live, session_id, outcome)
        status, reply = ANSWERED, None
        route = entry.route
        current = live.session_id
        if outcome.kind == "command" and outcome.reply is not None:
            if outcome.reply.text:
                reply = NewOutbound(route, outcome.reply.text, kind="command", session_id=current,
                                    inbox_id=entry.id, meta={"is_error": outcome.reply.is_error})
        elif outcome.error is not None:
            status = FAILED
            reply = NewOutbound(route, f"⚠ {outcome.error}", kind="notice", session_id=current, inbox_id=entry.id)
        elif outcome.result is not None:
            reply = NewOutbound(route, outcome.result.answer, kind="reply", session_id=outcome.result.session_id,
                                inbox_id=entry.id)
        await self.finish(entry, status, reply, error=None if outcome.error is None else str(outcome.error))

    async def finish(self, entry: InboxEntry, status: str, reply: NewOutbound | None, *, error: str | None = None) -> None:
        """Finish an inbox entry and queue its reply, in one transaction."""
        try:
            queued = await asyncio.to_thread(
                self.store.gateway.inbox_finish, entry.id, status, now=self.clock.now(), error=error, reply=reply
            )
        except StoreError as exc:
            log.error("cannot finish inbox entry %d (it is answered again at the next start): %s", entry.id, exc)
            return
        if status == ANSWERED:
            self.answered += 1
        else:
            self.failed += 1
        if queued is not None:
            self.outbox.wake()

    async def _after_input(self, live: LiveConversation, before: str | None, outcome: Outcome) -> None:
        """After a command: follow the conversation to another session (/new, /resume,
        /stop) and tell its pages what the command said and what its heartbeat is now."""
        after = live.session_id
        if after != before:
            await self._moved(live, before, after, "switch")
        if outcome.kind == "command" and outcome.reply is not None:
            self.bus.publish(after or before, event(
                "command_reply", after or before, text=outcome.reply.text, is_error=outcome.reply.is_error
            ))
            if after is not None:
                await self.publish_heartbeat(after)

    async def _moved(self, live: LiveConversation, old: str | None, new: str | None, reason: str) -> None:
        if old is not None and self.live.get(old) is live:
            del self.live[old]
        if new is None:
            if old is not None:
                self.bus.publish(old, event("session_moved", old, new_session_id=None, reason="stop"))
            await live.close()
            return
        self.live[new] = live
        if old is not None:
            self.bus.move(old, new, reason)
        route = live.route
        if route is not None:
            target = RouteKey(WEB, new) if route.adapter == WEB else route
            if target != route:
                live.set_route(target)
            await asyncio.to_thread(self.router.point, target, new)

    async def publish_heartbeat(self, session_id: str) -> None:
        try:
            heartbeat = await asyncio.to_thread(self.heartbeat_repo.get, session_id)
        except Exception as exc:  # a damaged record: shown as none
            log.warning("cannot read the heartbeat of %s: %s", session_id, exc)
            heartbeat = None
        self.bus.publish(session_id, event("heartbeat", session_id, heartbeat=heartbeat_view(heartbeat)))

    # -- live events ------------------------------------------------------------------------
    async def on_live_event(self, live: LiveConversation, item: ConversationEvent) -> None:
        session_id = live.session_id
        if isinstance(item, Compressed):
            await self._moved(live, item.parent_id, item.child_id, "compression")
            return
        wire = live_event(session_id, item)
        if wire is not None:
            self.announce(live, wire)
        if isinstance(item, AssistantStep) and self.metrics is not None:
            self.metrics.add_usage(item.usage)
        if isinstance(item, TurnBegan):
            if item.kind == HEARTBEAT:
                self._count("heartbeat_fires")
                self.say(f"vigil gateway: heartbeat fired in {short(session_id)}")
        if isinstance(item, TurnEnded):
            outcome = "interrupted" if item.cancelled else "failed" if item.error is not None else "answered"
            self._count("turns", kind=item.kind, outcome=outcome)
            tokens = item.result.usage.prompt_tokens if item.result is not None else 0
            self.say(f"vigil gateway: {item.kind} turn in {short(session_id)} {outcome}"
                     + (f" ({tokens} prompt tokens)" if tokens else "")
                     + (f": {item.error}" if item.error is not None else ""))
            if item.kind == HEARTBEAT:
                await self._deliver_heartbeat(live, item)
                if session_id is not None:
                    await self.publish_heartbeat(session_id)
            self.bus.publish(session_id, event("status", session_id, **live.status()))

    def announce(self, live: LiveConversation, item: dict[str, Any]) -> None:
        """Send a live event to the conversation's pages and to its platform."""
        self.bus.publish(item.get("session_id") or live.session_id, item)
        route = live.route
        adapter = self.adapters.get(route.adapter) if route is not None else None
        if adapter is not None and route is not None:
            self._spawn(_quietly(adapter.live(route, item), adapter.name))

    async def _deliver_heartbeat(self, live: LiveConversation, ended: TurnEnded) -> None:
        """A heartbeat turn's answer goes to the conversation's platform through the outbox."""
        route = live.route
        if route is None or ended.result is None or not ended.result.answer:
            return
        message = NewOutbound(route, ended.result.answer, kind="heartbeat", session_id=ended.result.session_id)
        try:
            await asyncio.to_thread(self.store.gateway.outbox_add, message, now=self.clock.now())
        except StoreError as exc:
            log.error("cannot queue the heartbeat answer of %s: %s", live.session_id, exc)
            return
        self.outbox.wake()

    def _delivery(self, what: str, entry: OutboxEntry, error: str | None) -> None:
        if what == "sent":
            self._count("outbox_sent", adapter=entry.route.adapter)
            if entry.route.adapter != WEB:
                self.say(f"vigil gateway: delivered {entry.kind} {entry.id} to {describe_route(entry.route)}")
        elif what == "retry":
            self._count("outbox_retries", adapter=entry.route.adapter)
            self.say(f"vigil gateway: delivery of {entry.kind} {entry.id} to {describe_route(entry.route)} "
                     f"failed, retrying: {error}")
        else:
            self._count("outbox_failures", adapter=entry.route.adapter)
            self.say(f"vigil gateway: error: {entry.kind} {entry.id} to {describe_route(entry.route)} "
                     f"could not be delivered and is marked failed: {error}")

    # -- helpers ----------------------------------------------------------------------------
    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _count(self, name: str, **labels: str) -> None:
        metric = getattr(self.metrics, name, None)
        if metric is not None:
            (metric.labels(**labels) if labels else metric).inc()

    def _gauge(self, name: str, value: float) -> None:
        metric = getattr(self.metrics, name, None)
        if metric is not None:
            metric.set(value)

    def snapshot(self) -> dict[str, Any]:
        """What the status record says about the running gateway."""
        return {
            "pid": os.getpid(),
            "adapters": [{"name": name, "ok": a.health().ok, "detail": a.health().detail} for name, a in self.adapters.items()],
            "live_conversations": len(self.live),
            "armed_heartbeats": len(self.heartbeats.engine),
            "answered": self.answered,
            "failed": self.failed,
        }


def short(session_id: str | None) -> str:
    return (session_id or "-")[:8]


def describe_route(route: RouteKey) -> str:
    parts = [route.adapter, route.chat[:16]]
    if route.thread:
        parts.append(f"thread {route.thread[:16]}")
    if route.user:
        parts.append(f"user {route.user[:16]}")
    return " ".join(parts)


async def _quietly(coroutine: Any, name: str) -> None:
    try:
        await coroutine
    except Exception:
        log.exception("adapter %s failed on a live event", name)
