"""The gateway: live conversations, routing, the inbox and outbox, and what adapters may ask.

Input path: an adapter hands a message to :meth:`Gateway.receive`, which writes it to the inbox
(durable, deduplicated by the platform's message id) and only then returns, so the adapter may
acknowledge the platform. Under the route's lock — so messages of one chat enter its queue in
the order they arrived — the message is routed to its conversation and submitted to the
conversation's runtime queue, marked with its inbox id. When the turn (or slash command) ends,
the inbox entry is finished and its reply queued in the outbox in one transaction; the outbox
sender delivers it. A crash leaves unfinished entries: :mod:`.recovery` answers them at the next start.

A route leads to its live conversation while that runs (:attr:`Gateway.by_route`), so messages
sent right after ``/new`` or ``/suspend`` follow its queue. Moves are in :mod:`.moves`, live
events' fan-out in :mod:`.fanout`, idle closing in :mod:`.idle`, old records' pruning in
:mod:`.housekeeping`, starting and stopping in :mod:`.lifecycle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Mapping

from vigil.clock import Clock, SystemClock
from vigil.config.settings import Settings
from vigil.gateway.adapters.base import Adapter, GatewayClosed, Inbound, Receipt
from vigil.gateway.approvals import Approvals
from vigil.gateway.authorization import Authorization
from vigil.gateway.bus import EventBus, Watch
from vigil.gateway.live import LiveConversation
from vigil.gateway.cluster.handover import Handover
from vigil.gateway.outbox import OutboxSender
from vigil.gateway.patience import Patience
from vigil.gateway.recovery import PendingWatch, SuspectGate, catch_up, requeue
from vigil.gateway.cluster.relay import EventRelay
from vigil.gateway.cluster.claims import Claims
from vigil.gateway.cluster.ownership import Elsewhere, Ownership
from vigil.gateway.cluster.workers import is_shared
from vigil.gateway.routing import Router
from vigil.gateway import fanout, lifecycle, manage, settle, views
from vigil.gateway.fanout import describe_route
from vigil.gateway.housekeeping import Pruner
from vigil.gateway.idle import IDLE_CLOSE, IdleCloser
from vigil.models.base import ModelClient
from vigil.profiles import Profile
from vigil.runtime.conversation_events import ConversationEvent
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.heartbeat.lease import GATEWAY, LeaseBook, default_lease_seconds
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
from vigil.store import SessionStore, StoreError
from vigil.store.gateway.gateway_tables import ANSWERED, PENDING, InboxEntry, NewOutbound, RouteKey
from vigil.gateway.wire import event

log = logging.getLogger(__name__)

Say = Callable[[str], None]
"""Where the gateway's one-line reports go (stdout and logs/gateway.log)."""

WORKSPACES = "workspaces"
SOLE_WORKER = "gateway"
"""The worker id of the one gateway a store that is not shared has."""

SUSPECT_HOLD = 5.0
"""Seconds the process must stay up before a message it died under runs again (at most
``gateway.retry_max_delay``): see :class:`~vigil.gateway.recovery.SuspectGate`."""
WAITING_SHOWN = 20
"""Waiting messages the status record lists (all are counted)."""

class Gateway(manage.ConversationManagement):
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
        idle_close: float = IDLE_CLOSE,
    ) -> None:
        self.store = store
        self.profile = profile
        self.settings = settings
        self.client = client
        self.clock = clock or SystemClock()
        self.adapters: dict[str, Adapter] = dict(adapters)
        self.say = say
        self.metrics = metrics
        self.heartbeats = heartbeats or HeartbeatScheduler(
            store, clock=self.clock, leases=LeaseBook(
                store, self.clock, kind=GATEWAY,
                seconds=min(settings.gateway.lease_seconds, default_lease_seconds()),
            ),
        )
        self.leases: LeaseBook = self.heartbeats.leases or LeaseBook(store, self.clock, kind=GATEWAY)
        """This worker's heartbeat leases; their holder token is the worker's id in the store."""
        self.ownership = Ownership(
            store, self.clock, token=self.leases.token, seconds=self.leases.seconds, shared=is_shared(store)
        )
        self.handover = Handover(self)
        self.claims = Claims(self)
        self.relay = EventRelay(self)
        self.heartbeat_repo = HeartbeatRepo(store, self.clock)
        self.router = Router(store, self.clock)
        self.bus = EventBus()
        self.approvals = Approvals(self.clock, settings.gateway.approval_timeout)
        self.authorization = Authorization(self)
        self.outbox = OutboxSender(
            store, self.adapters, self.clock, attempts=settings.gateway.outbox_attempts,
            report=lambda *args: fanout.delivery_report(self, *args),
            # One gateway per SQLite store: its claims are its own again after a restart.
            worker=self.worker_id if self.ownership.shared else SOLE_WORKER,
        )
        self.live: dict[str, LiveConversation] = {}
        """Live conversations by their current session id."""
        self.by_route: dict[RouteKey, LiveConversation] = {}
        """Live conversations by the route they answer now. A message goes to the route's live
        conversation while it runs, whatever the stored route says meanwhile: right after
        ``/new`` or ``/suspend`` the route is re-pointed only once the command has settled."""
        self.idle = IdleCloser(self, idle_close)
        self.pruner = Pruner(self)
        self.patience = Patience(self)
        """The turns that wait for the model (or the store) to try again."""
        self.suspects = SuspectGate(self.clock, min(SUSPECT_HOLD, settings.gateway.retry_max_delay))
        self.pending_watch = PendingWatch(self)
        self.requeue = lambda entry_id: requeue(self, entry_id)  # /retry: a set-aside message again
        self._route_locks: dict[RouteKey, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.handling: set[int] = set()  # inbox ids handed to a conversation by this process
        self._accepting = False
        self.closing = False
        self.answered = self.failed = 0

    @property
    def worker_id(self) -> str:
        """This gateway process's id among the workers sharing the store."""
        return self.leases.token

    # -- GatewayPort ------------------------------------------------------------------------
    @property
    def accepting(self) -> bool:
        return self._accepting

    async def receive(self, inbound: Inbound) -> Receipt:
        if not self._accepting:
            raise GatewayClosed("the gateway is shutting down; send the message again in a moment")
        lock = self.route_lock(inbound.route)
        async with lock:
            denied = await self.authorization.check(inbound)  # a stranger: a pairing code, no turn
            if denied is not None:
                return denied
            entry, new = await asyncio.to_thread(
                self.store.gateway.inbox_accept,
                inbound.route,
                inbound.external_id,
                inbound.text,
                sender=inbound.sender,
                received_at=self.clock.now(),
                meta=dict(inbound.meta),
            )
            self.count("inbound_messages", adapter=inbound.route.adapter, duplicate=str(not new).lower())
            if not new:
                if entry.status == PENDING and entry.id not in self.handling and not self.closing:
                    # stored by a delivery that failed before it reached its conversation
                    # (the platform was told so and sent it again): hand it on now
                    return await self._hand_on(entry, inbound, duplicate=True)
                return Receipt(entry.id, True, entry.session_id)
            if self.closing:  # stored: answered at the next start
                return Receipt(entry.id, False, None)
            return await self._hand_on(entry, inbound, duplicate=False)

    async def _hand_on(self, entry: InboxEntry, inbound: Inbound, *, duplicate: bool) -> Receipt:
        """Give a stored message to its conversation here, or leave it to the worker that
        runs that conversation (told at once; call under the route's lock)."""
        target = await self.live_for_route(inbound.route, arriving=entry.id)
        if isinstance(target, Elsewhere):
            self.handover.tell(entry, target.worker)
            return Receipt(entry.id, duplicate, target.session_id or None)
        if entry.id not in self.handling:  # else a take-over's catch-up handed it on already
            self.dispatch(entry, target, client_id=inbound.external_id)
        return Receipt(entry.id, duplicate, target.session_id)

    async def open_conversation(self, route: RouteKey, session_id: str | None = None) -> str:
        lock = self.route_lock(route)
        async with lock:
            if session_id is not None:
                session_id = await asyncio.to_thread(self.newest, session_id)
                await asyncio.to_thread(self.router.point, route, session_id)
                bound = self.by_route.get(route)
                if bound is not None and bound.session_id != session_id:
                    self.unbind(bound, route)
                return session_id
            live = await self.new_conversation(route)
            assert live.session_id is not None
            return live.session_id

    def subscribe(self, session_id: str) -> Watch:
        return self.bus.subscribe(session_id)

    async def conversations(self, query: str | None = None, *, limit: int = 100, archived: bool = False) -> list[dict[str, Any]]:
        return await asyncio.to_thread(views.conversations, self, query, limit, archived)

    async def conversation(self, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(views.conversation, self, session_id)

    def resolve_approval(self, approval_id: str, approved: bool) -> bool:
        return self.approvals.resolve(approval_id, approved)

    async def may_talk(self, adapter: str, user: str) -> bool:
        return await asyncio.to_thread(self.authorization.allowed, adapter, user)

    def workdir(self, session_id: str) -> Path:
        session = self.store.get_session(self.newest(session_id))
        cwd = session.model_config.get("cwd")
        path = Path(cwd) if isinstance(cwd, str) and cwd else self._new_workspace()
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Re-arm heartbeats, answer what a crash left unanswered, start the outbox and the
        adapters, then take input (see :mod:`vigil.gateway.lifecycle`)."""
        self.suspects.started()
        await lifecycle.start(self)
        self.pending_watch.start()

    async def stop(self, grace: float) -> None:
        """Stop taking input, let running turns finish within ``grace`` seconds (then they
        are interrupted), and stop. Inputs still queued stay in the inbox for the next start;
        a turn that finished is marked answered and its reply sent (or queued) first."""
        self._accepting = False
        self.closing = True
        self.patience.close()  # a turn waiting for the model is interrupted, its message kept
        await self.pending_watch.stop()
        await lifecycle.stop(self, grace)

    def open_for_input(self) -> None:
        """From now on ``receive`` takes messages (start-up, once heartbeats are armed)."""
        self._accepting = True

    def background_tasks(self) -> set[asyncio.Task[Any]]:
        """The tasks :meth:`spawn` started that are still known (finishing turns, say)."""
        return self._tasks

    def all_live(self) -> list[LiveConversation]:
        """Every live conversation once (one suspended by ``/suspend`` is known by its route only)."""
        return list(dict.fromkeys([*self.live.values(), *self.by_route.values()]))

    # -- conversations ----------------------------------------------------------------------
    async def live_for_route(self, route: RouteKey, *, arriving: int | None = None) -> LiveConversation | Elsewhere:
        """The live conversation a message of ``route`` goes to, or where another worker runs
        it (call under the route's lock). Taking it over, this worker first answers what was
        left unfinished there, except ``arriving`` (the entry being handed on now)."""
        bound = self.by_route.get(route)
        if bound is not None and not bound.closed:
            bound_id = bound.session_id
            elsewhere, taken = await self.claims.claim(bound_id)
            if elsewhere is not None:
                return elsewhere
            try:
                await bound.ensure_started()
                if taken:
                    await catch_up(self, bound, route, skip=arriving)
            finally:
                if taken and bound_id is not None:
                    self.claims.taken_over(bound_id)
            return bound
        resolved = await asyncio.to_thread(self.router.resolve, route)
        if resolved.session_id is None:
            if not self.ownership.shared:
                return await self.new_conversation(route)
            made = await self.claims.new_conversation_once(route)
            if made is not None:
                return made
            resolved = await asyncio.to_thread(self.router.resolve, route)  # another worker's, just made
        elsewhere, taken = await self.claims.claim(resolved.session_id)
        if elsewhere is not None:
            return elsewhere
        try:
            if resolved.reopen:
                await asyncio.to_thread(self.store.reopen_session, resolved.session_id)
            live = await self.live_for(resolved.session_id, route)
            if taken:
                await catch_up(self, live, route, skip=arriving)
        finally:
            if taken:
                self.claims.taken_over(resolved.session_id)
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
        if route is not None:
            self.bind(live, route)
        await live.ensure_started()
        return live

    async def new_conversation(self, route: RouteKey) -> LiveConversation:
        workspace = self._new_workspace()
        await asyncio.to_thread(workspace.mkdir, 0o700, True, True)
        live = LiveConversation(self, None, route, workspace)
        session_id = await live.controller.ensure_session()
        await asyncio.to_thread(self.ownership.claim, session_id)  # a new session: nobody else has it
        self.live[session_id] = live
        self._gauge("live_conversations", len(self.live))
        await asyncio.to_thread(self.router.point, route, session_id)
        self.bind(live, route)
        await live.ensure_started()
        self.say(f"vigil gateway: new conversation {session_id[:8]} for {describe_route(route)}")
        return live

    def bind(self, live: LiveConversation, route: RouteKey) -> None:
        """``live`` answers ``route`` from now on (its previous route no longer leads to it)."""
        if live.route is not None and live.route != route:
            self.unbind(live, live.route)
        live.set_route(route)
        self.by_route[route] = live

    def unbind(self, live: LiveConversation, route: RouteKey) -> None:
        if self.by_route.get(route) is live:
            del self.by_route[route]

    def forget(self, live: LiveConversation) -> None:
        """Drop a closed live conversation from every map (it comes back on the next message,
        here or, with several workers, wherever that message lands)."""
        released = []
        for session_id, known in list(self.live.items()):
            if known is live:
                del self.live[session_id]
                released.append(session_id)
        if released and self.ownership.shared:
            self.spawn(self._release(released))
        for route, known in list(self.by_route.items()):
            if known is live:
                del self.by_route[route]
        self._gauge("live_conversations", len(self.live))

    async def _release(self, session_ids: list[str]) -> None:
        held = [sid for sid in session_ids if sid not in self.live]  # back meanwhile: kept
        try:
            await asyncio.to_thread(self.ownership.release, held)
        except StoreError as exc:
            log.warning("cannot release conversation leases (they lapse by themselves): %s", exc)

    def route_lock(self, route: RouteKey) -> asyncio.Lock:
        """Held while a message of ``route`` is stored and handed to its conversation."""
        return self._route_locks.setdefault(route, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def routes_held(self, live: LiveConversation) -> AsyncIterator[None]:
        """Hold the lock of every route that leads to ``live`` (in one order, so two holders
        cannot deadlock): no message is handed to it meanwhile. For closing it."""
        routes = {route for route, known in self.by_route.items() if known is live}
        if live.route is not None:
            routes.add(live.route)
        async with contextlib.AsyncExitStack() as stack:
            for route in sorted(routes, key=lambda r: (r.adapter, r.chat, r.thread, r.user)):
                await stack.enter_async_context(self.route_lock(route))
            yield

    def _new_workspace(self) -> Path:
        return self.profile.home / WORKSPACES / secrets.token_hex(6)

    def newest(self, ref: str) -> str:
        return self.store.newest_continuation(self.store.resolve_session(ref))

    def adopted(self, session_id: str) -> LiveConversation:
        """The heartbeat target of a conversation this gateway adopts (its lease was free):
        a live conversation, started when its heartbeat first comes due."""
        live = self.live.get(session_id)
        if live is None:
            live = LiveConversation(self, session_id, None, self._new_workspace())
            self.live[session_id] = live
            self._gauge("live_conversations", len(self.live))
        return live

    async def prepare(self, live: LiveConversation) -> None:
        """Before a live conversation first starts: a heartbeat's conversation with no route
        yet delivers to the route stored with the heartbeat."""
        if live.route is not None or live.session_id is None:
            return
        try:
            heartbeat = await asyncio.to_thread(self.heartbeat_repo.get, live.session_id)
        except Exception as exc:  # a damaged record: no route
            log.warning("cannot read the heartbeat route of %s: %s", live.session_id, exc)
            return
        route = heartbeat.route if heartbeat is not None else None
        if route is not None and route.platform in self.adapters:
            self.bind(live, RouteKey(route.platform, route.chat, route.thread or ""))

    # -- input ------------------------------------------------------------------------------
    def dispatch(
        self, entry: InboxEntry, live: LiveConversation, *, client_id: str | None = None, resume: bool = False
    ) -> None:
        """Hand an inbox entry to its conversation's queue now (no await before the submit:
        the order of calls is the order of the queue) and settle it when it is answered;
        ``resume``: a restart may have cut its turn off (continue it, do not ask again)."""
        conversation = live.conversation
        live.touch()
        is_command = live.controller.is_command(entry.text)
        if self.settings.gateway.busy == "interrupt" and not is_command and conversation.running_turn:
            conversation.interrupt()
        session_id = live.session_id
        self.handling.add(entry.id)
        future = conversation.submit(
            entry.text, meta={"inbox": entry.id}, on_start=lambda: self._mark_started(entry, live), resume=resume
        )
        self.bus.publish(session_id, event(
            "message_accepted", session_id, inbox_id=entry.id, text=entry.text, client_id=client_id
        ))
        self.gauge_queue_depth()
        self.spawn(settle.settle(self, entry, live, future, session_id))

    async def _mark_started(self, entry: InboxEntry, live: LiveConversation) -> None:
        """The entry leaves the queue: record it started (attempts + 1) in the session it runs
        in, before its turn runs; an entry that only waited is not counted as an attempt. A
        suspect of the last deaths first waits until no other suspect runs."""
        await self.suspects.enter(entry)
        try:
            await asyncio.to_thread(
                self.store.gateway.inbox_start, entry.id, live.session_id or "", now=self.clock.now()
            )
        except (StoreError, KeyError) as exc:
            log.warning("cannot mark inbox entry %d started: %s", entry.id, exc)

    async def finish(self, entry: InboxEntry, status: str, reply: NewOutbound | None, *, error: str | None = None) -> None:
        """Finish an inbox entry and queue its reply, in one transaction (see
        :func:`vigil.gateway.settle.finish`: a store error is retried a while first)."""
        if await settle.finish(self, entry, status, reply, error=error):
            if status == ANSWERED:
                self.answered += 1
            else:
                self.failed += 1
            self.outbox.wake()

    async def publish_heartbeat(self, session_id: str) -> None:
        await fanout.publish_heartbeat(self, session_id)

    # -- live events (see vigil.gateway.fanout) ---------------------------------------------
    async def on_live_event(self, live: LiveConversation, item: ConversationEvent) -> None:
        await fanout.on_live_event(self, live, item)

    def announce(self, live: LiveConversation, item: dict[str, Any]) -> None:
        fanout.announce(self, live, item)

    # -- helpers ----------------------------------------------------------------------------
    def spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def count(self, name: str, **labels: str) -> None:
        metric = getattr(self.metrics, name, None)
        if metric is not None:
            (metric.labels(**labels) if labels else metric).inc()

    def gauge_queue_depth(self) -> None:
        """Inputs waiting behind a running one, over every live conversation."""
        if self.metrics is not None:
            self._gauge("queue_depth", sum(live.conversation.queued for live in self.all_live()))

    def gauge_waiting(self) -> None:
        """Messages whose turns wait to be tried again."""
        self._gauge("waiting_messages", len(self.patience.waiting))

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
            "waiting": [waiting.view() for waiting in list(self.patience.waiting.values())[:WAITING_SHOWN]],
            "waiting_count": len(self.patience.waiting),
        }


