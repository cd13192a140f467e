"""What each part of the gateway may ask of the gateway that assembles it: narrow protocols.

A part — the hand-over, recovery, fan-out, the patience with a failing model — is given the
gateway typed as the protocol here that names only what that part uses, so it depends on those
services and not on :class:`~vigil.gateway.core.Gateway`, which satisfies every protocol
structurally and is imported by no part (``tests/gateway/test_parts.py`` holds both).

The building blocks: :class:`Services` (the store, the clock, the settings, logging and
counting, which nearly every part needs), :class:`Conversations` (the live conversations this
process runs) and :class:`Handling` (which inbox entries this process has in hand). A part's own
protocol adds the few further parts it talks to.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Protocol

if TYPE_CHECKING:
    from vigil.clock import Clock
    from vigil.config.settings import Settings
    from vigil.gateway.adapters.base import Adapter
    from vigil.gateway.approvals import Approvals
    from vigil.gateway.authorization import Authorization
    from vigil.gateway.bus import EventBus
    from vigil.gateway.cluster.claims import Claims
    from vigil.gateway.cluster.handover import Handover
    from vigil.gateway.housekeeping import Pruner
    from vigil.gateway.idle import IdleCloser
    from vigil.gateway.live import LiveConversation
    from vigil.gateway.outbox import OutboxSender
    from vigil.gateway.cluster.ownership import Elsewhere, Ownership
    from vigil.gateway.patience import Patience
    from vigil.gateway.recovery import SuspectGate
    from vigil.gateway.cluster.relay import EventRelay
    from vigil.gateway.routing import Router
    from vigil.models.base import ModelClient
    from vigil.profiles import Profile
    from vigil.runtime.conversation_events import ConversationEvent
    from vigil.schedule.heartbeat.lease import LeaseBook
    from vigil.schedule.heartbeat.repo import HeartbeatRepo
    from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
    from vigil.store import SessionStore
    from vigil.store.gateway.gateway_tables import InboxEntry, NewOutbound, RouteKey


class Services(Protocol):
    """The gateway's common services."""

    store: SessionStore
    clock: Clock
    settings: Settings
    profile: Profile
    say: Callable[[str], None]
    """Log a line for the person running the gateway."""

    @property
    def worker_id(self) -> str:
        """This process's name among the gateways sharing the store."""

    def count(self, name: str, **labels: str) -> None:
        """Add one to the counter ``name`` (a no-op without metrics)."""

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run ``coroutine`` as a task the gateway keeps and awaits at shutdown."""


class Conversations(Protocol):
    """The live conversations this process runs."""

    live: dict[str, LiveConversation]
    """By session id."""

    def all_live(self) -> list[LiveConversation]:
        """Every live conversation, once each."""

    def forget(self, live: LiveConversation) -> None:
        """Drop a closed conversation and its routes."""

    def routes_held(self, live: LiveConversation) -> AbstractAsyncContextManager[None]:
        """Hold every route lock of ``live`` (in a fixed order): nothing is handed to it meanwhile."""


class Handling(Protocol):
    """The inbox entries this process has in hand."""

    handling: set[int]
    """Inbox ids handed to a conversation by this process and not settled yet."""
    closing: bool
    """True once shutdown began: entries still stored are answered at the next start."""

    async def finish(self, entry: InboxEntry, status: str, reply: NewOutbound | None, *, error: str | None = None) -> None:
        """Settle an entry: its status, and its reply into the outbox, in one write."""


class HandoverHost(Services, Conversations, Handling, Protocol):
    ownership: Ownership


class IdleHost(Services, Conversations, Protocol):
    approvals: Approvals
    bus: EventBus
    heartbeats: HeartbeatScheduler


class MovesHost(Conversations, Protocol):
    bus: EventBus
    by_route: dict[RouteKey, LiveConversation]
    ownership: Ownership
    router: Router

    def bind(self, live: LiveConversation, route: RouteKey) -> None: ...
    def route_lock(self, route: RouteKey) -> asyncio.Lock: ...


class SettleHost(Services, Handling, Protocol):
    bus: EventBus
    patience: Patience
    suspects: SuspectGate

    def gauge_queue_depth(self) -> None: ...
    async def publish_heartbeat(self, session_id: str) -> None: ...


class WorkersHost(Services, Protocol):
    heartbeats: HeartbeatScheduler
    leases: LeaseBook
    outbox: OutboxSender


class RelayHost(Services, Protocol):
    adapters: dict[str, Adapter]
    bus: EventBus
    ownership: Ownership


class RecoveryHost(Services, Handling, Protocol):
    ownership: Ownership

    async def live_for_route(self, route: RouteKey, *, arriving: int | None = None) -> LiveConversation | Elsewhere:
        """The conversation ``route`` belongs to here, opened or adopted, or where it runs."""

    def dispatch(
        self, entry: InboxEntry, live: LiveConversation, *, client_id: str | None = None, resume: bool = False
    ) -> None: ...
    def route_lock(self, route: RouteKey) -> asyncio.Lock: ...


class LiveHost(Services, Protocol):
    approvals: Approvals
    claims: Claims
    client: ModelClient
    heartbeats: HeartbeatScheduler
    patience: Patience
    requeue: Callable[[int], Any]

    def announce(self, live: LiveConversation, item: dict[str, Any]) -> None: ...
    async def on_live_event(self, live: LiveConversation, item: ConversationEvent) -> None: ...
    async def prepare(self, live: LiveConversation) -> None: ...


class ClaimsHost(Protocol):
    authorization: Authorization
    heartbeats: HeartbeatScheduler
    ownership: Ownership
    router: Router

    async def new_conversation(self, route: RouteKey) -> LiveConversation:
        """A new conversation for ``route``, bound to it."""


class LifecycleHost(Services, Conversations, Protocol):
    adapters: dict[str, Adapter]
    bus: EventBus
    handover: Handover
    heartbeats: HeartbeatScheduler
    idle: IdleCloser
    pruner: Pruner
    outbox: OutboxSender
    ownership: Ownership
    relay: EventRelay

    def adopted(self, session_id: str) -> LiveConversation: ...
    def background_tasks(self) -> set[asyncio.Task[Any]]: ...
    def open_for_input(self) -> None: ...


class BackgroundNotesHost(Services, Conversations, Protocol):
    bus: EventBus
    outbox: OutboxSender


class FanoutHost(Services, Conversations, Protocol):
    adapters: dict[str, Adapter]
    bus: EventBus
    heartbeat_repo: HeartbeatRepo
    metrics: Any
    outbox: OutboxSender


class AuthorizationHost(Services, Protocol):
    heartbeat_repo: HeartbeatRepo
    outbox: OutboxSender


class PatienceHost(Services, Protocol):
    outbox: OutboxSender
    suspects: SuspectGate

    def announce(self, live: LiveConversation, item: dict[str, Any]) -> None: ...
    def gauge_waiting(self) -> None: ...


class ViewsHost(Protocol):
    store: SessionStore
    live: dict[str, LiveConversation]
    heartbeat_repo: HeartbeatRepo
    heartbeats: HeartbeatScheduler


class CronDeliveryHost(Protocol):
    store: SessionStore
    clock: Clock
    adapters: dict[str, Adapter]
    outbox: OutboxSender


class ManageHost(Services, Conversations, Protocol):
    bus: EventBus
    heartbeat_repo: HeartbeatRepo
    heartbeats: HeartbeatScheduler

    async def conversation_summary(self, session_id: str) -> dict[str, Any]: ...
    def newest(self, ref: str) -> str:
        """The newest session of the conversation ``ref`` names (an id or a unique prefix)."""
