"""The adapter protocol: what a platform (the web chat, a messaging platform) does for the gateway, and
what the gateway offers it (:class:`GatewayPort`).

An adapter receives messages from its platform and hands them to :meth:`GatewayPort.receive`,
which stores them durably *before* it returns: only then may the adapter acknowledge the
platform. Replies come back through the durable outbox as :meth:`Adapter.send` calls; a
``DeliveryError`` makes the gateway retry with back-off. While a turn runs, the gateway passes
the conversation's live events (:mod:`vigil.gateway.wire`) to :meth:`Adapter.live` so that a
platform that can edit a message shows the answer as it streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Protocol, Sequence

from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from vigil.config.settings import Settings
    from vigil.profiles import Profile
    from vigil.store import SessionStore


class DeliveryError(Exception):
    """A send failed. ``retryable``: try again later (network, 5xx, rate limit; ``retry_after``
    seconds when the platform said so); otherwise the entry is marked failed at once."""

    def __init__(self, message: str, *, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class GatewayClosed(Exception):
    """The gateway is shutting down and takes no new input (answer HTTP 503)."""


class ConversationBusy(Exception):
    """A conversation to delete did not finish its stopped turn in time; nothing was deleted
    (answer HTTP 409)."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message from a platform, before it is stored."""

    route: RouteKey
    external_id: str
    """The platform's message id or a client-supplied idempotency key (unique per adapter)."""
    text: str
    sender: str = ""
    """The platform's user id of the person who wrote it: what allow-lists and pairing check
    (every adapter but the token-authenticated web chat)."""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Receipt:
    """What :meth:`GatewayPort.receive` stored: ``duplicate`` when the adapter had delivered
    this ``external_id`` before (nothing new is done)."""

    inbox_id: int
    duplicate: bool
    session_id: str | None
    """The session the message is routed to (known at once for an existing route)."""
    denied: bool = False
    """The sender is not allowed on this platform (not on its allow-list and not paired):
    nothing reaches the agent or the model; the gateway answered with a pairing code."""


@dataclass(frozen=True, slots=True)
class AdapterHealth:
    """What ``vigil gateway status`` shows for an adapter."""

    ok: bool
    detail: str = ""
    state: str = ""
    """``connected``, ``retrying``, ``misconfigured`` (e.g. its secret is missing) or
    ``stopped``; empty means ``connected`` when ``ok`` and ``stopped`` otherwise."""
    since: float | None = None
    """Wall-clock time the adapter entered ``state``."""
    last_error: str | None = None


class Subscription(Protocol):
    """Live events of one conversation, as wire dicts (:mod:`vigil.gateway.wire`)."""

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        ...

    def close(self) -> None:
        """Stop receiving (the iterator ends)."""
        ...


class GatewayPort(Protocol):
    """What the gateway offers its adapters."""

    store: "SessionStore"
    profile: "Profile"
    settings: "Settings"

    @property
    def accepting(self) -> bool:
        """``False`` once shutdown began: refuse new input (``GatewayClosed`` from receive)."""
        ...

    async def receive(self, inbound: Inbound) -> Receipt:
        """Store the message durably, then (in the background) route it to its conversation
        and answer it: a turn, or a slash command through the shared registry. Returns once
        the message is durable. Raises ``GatewayClosed`` during shutdown."""
        ...

    async def open_conversation(self, route: RouteKey, session_id: str | None = None) -> str:
        """Point ``route`` at ``session_id`` (an existing conversation, any source, resolved
        to its newest continuation) or at a new conversation; return the session id."""
        ...

    def subscribe(self, session_id: str) -> Subscription:
        """Live events of the conversation now in ``session_id`` (and of its continuations,
        which the ``session_moved`` event announces), whoever started the turn."""
        ...

    async def conversations(
        self, query: str | None = None, *, limit: int = 100, archived: bool = False
    ) -> list[dict[str, Any]]:
        """Every conversation of the profile (CLI ones included), newest activity first, as
        wire dicts (:func:`vigil.gateway.wire.conversation_summary` with ``archived``);
        ``query`` searches titles and message text. Archived conversations are left out but
        found by a search, or (``archived``) are the only ones listed."""
        ...

    def interrupt(self, session_id: str) -> bool:
        """End the turn the conversation now in ``session_id`` runs (a Stop button): the
        conversation, its queue and its heartbeat go on. Whether a turn was running here."""
        ...

    def waiting(self, session_id: str) -> list[dict[str, Any]]:
        """The messages waiting behind the turn the conversation now in ``session_id`` runs
        here, as ``/queue`` lists them: ``[{position, text, inbox_id}]`` (a ``queue`` event
        says the same whenever it changes); empty when it does not run here."""
        ...

    def withdraw(self, session_id: str, inbox_id: int) -> dict[str, Any] | None:
        """Withdraw the message ``inbox_id`` waiting there as ``/queue drop N`` does (its entry
        is recorded as withdrawn, never answered): ``{position, text, inbox_id, reply}``, or
        ``None`` when it does not wait there (its turn began, it went, or it runs elsewhere)."""
        ...

    async def rename_conversation(self, session_id: str, title: str) -> dict[str, Any]:
        """Give a conversation a new title; ``ValueError`` (nothing written) for an empty, too
        long or invisible-character title. Returns its summary. Raises ``SessionNotFound``."""
        ...

    async def archive_conversation(self, session_id: str, archived: bool = True) -> dict[str, Any]:
        """Archive a conversation (left out of the list, nothing else changes) or bring it
        back; returns its summary. Raises ``SessionNotFound``."""
        ...

    async def delete_conversation(self, session_id: str) -> dict[str, Any]:
        """Delete a conversation, every session of it, for good: its running turn is stopped
        and its heartbeat cleared first. Returns ``{id, title, sessions, messages}``. Raises
        ``SessionNotFound``, or ``ConversationBusy`` when its turn does not finish in time."""
        ...

    async def conversation(self, session_id: str) -> dict[str, Any]:
        """One conversation (resolved to its newest continuation) with its whole history, its
        heartbeat and whether a turn runs, as a wire dict (:func:`vigil.gateway.wire.conversation_view`).
        Raises ``SessionNotFound``."""
        ...

    def resolve_approval(self, approval_id: str, approved: bool) -> bool:
        """Answer a pending approval request; ``False`` if it is unknown or already decided."""
        ...

    async def may_talk(self, adapter: str, user: str) -> bool:
        """Whether platform user ``user`` may talk to the agent on ``adapter`` (allow-list or
        paired): check before doing work for a sender, such as downloading their file."""
        ...

    def workdir(self, session_id: str) -> Path:
        """The conversation's working directory (uploads go here; created 0700 if missing)."""
        ...


class Adapter(Protocol):
    """One platform behind the gateway. The contract suite (``tests/gateway/adapter_contract``)
    holds every adapter to this."""

    name: str
    """Its platform's name in the registry (:mod:`vigil.platforms`): the ``adapter`` of its routes."""

    async def start(self, gateway: GatewayPort) -> None:
        """Connect to the platform and start receiving (a webhook adapter only remembers the
        gateway: its HTTP routes are served by the gateway's server)."""
        ...

    async def stop(self) -> None:
        """Stop receiving and release the platform; idempotent."""
        ...

    def http_routes(self) -> "Sequence[BaseRoute]":
        """Routes this adapter serves on the gateway's HTTP server (may be empty)."""
        ...

    async def send(self, message: OutboxEntry) -> None:
        """Deliver one outbox entry to ``message.route``; raise ``DeliveryError`` on failure."""
        ...

    async def live(self, route: RouteKey, event: dict[str, Any]) -> None:
        """A live event of a conversation routed here (stream or edit where the platform can;
        a no-op otherwise). Must not raise for a platform error: log it."""
        ...

    def health(self) -> AdapterHealth:
        """Whether the adapter can send and receive now."""
        ...

    async def reload(self, settings: "Settings") -> None:
        """SIGHUP: take the new configuration (allow-lists, tokens) without a restart."""
        ...
