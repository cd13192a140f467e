"""The gateway's tables: routes, the inbox and the outbox, and the ``GatewayTables`` protocol.

The gateway maps each platform conversation to a vigil conversation (``routes``), writes every
inbound message before the platform is acknowledged (``inbox``, unique per adapter and platform
message id, so a redelivery is answered once) and sends every reply through a durable
``outbox`` (retried with back-off, finally marked failed, never dropped). Both backends
implement the protocol in their ``gateway_tables`` module; a store exposes it as
``store.gateway``. Every method is synchronous, thread-safe and its own transaction, like the
rest of the store. Times are Unix epoch seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

PENDING = "pending"
"""Inbox: stored, not started. Outbox: waiting to be sent (maybe after a failed try)."""
RUNNING = "running"
"""Inbox: handed to the conversation; a crash leaves it here, to be answered on start-up."""
ANSWERED = "answered"
"""Inbox: the turn (or command) ended and its reply, if any, is in the outbox."""
FAILED = "failed"
"""Inbox: could not be answered. Outbox: every try failed; logged and counted."""
SENT = "sent"
"""Outbox: the adapter took it."""

INBOX_STATUSES = (PENDING, RUNNING, ANSWERED, FAILED)
OUTBOX_STATUSES = (PENDING, SENT, FAILED)
OUTBOX_KINDS = ("reply", "command", "heartbeat", "notice", "cron", "pairing", "file")
"""The kinds of outbox entry (see ``NewOutbound.kind``); any other is refused."""


@dataclass(frozen=True, slots=True)
class RouteKey:
    """One platform conversation: adapter, chat, thread (``""``: none) and, in group chats
    where each person has their own conversation, the user (``""``: the whole chat)."""

    adapter: str
    chat: str
    thread: str = ""
    user: str = ""


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """An inbound message as stored."""

    id: int
    route: RouteKey
    external_id: str
    """The platform's message id, or the client's idempotency key: unique per adapter."""
    text: str
    sender: str
    """The platform user who sent it (``""`` where the adapter has one user, as the web chat)."""
    received_at: float
    status: str
    session_id: str | None
    """The session the message went to (set when it is started)."""
    attempts: int
    """How many times it was started (a crash mid-turn makes it more than one)."""
    finished_at: float | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None
    """When it was last started (``None`` while it was never started)."""


@dataclass(frozen=True, slots=True)
class NewOutbound:
    """A reply to queue in the outbox."""

    route: RouteKey
    text: str
    kind: str = "reply"
    """``reply`` (a turn's answer), ``command`` (a slash command's reply), ``heartbeat`` (a
    heartbeat turn's answer), ``cron`` (a cron job's delivered answer), ``pairing`` (the
    pairing code sent to an unknown user), ``file`` (``meta``: ``path`` of a file in the
    conversation's working directory, ``name``; ``text`` is its caption), ``notice``
    (anything else the gateway says)."""
    session_id: str | None = None
    inbox_id: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A reply as stored in the outbox."""

    id: int
    route: RouteKey
    kind: str
    text: str
    session_id: str | None
    inbox_id: int | None
    created_at: float
    status: str
    attempts: int
    next_attempt_at: float
    last_error: str | None = None
    sent_at: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    failed_at: float | None = None
    """When it was marked ``failed`` (the last try failed)."""


class GatewayTables(Protocol):
    """Durable routing, inbox and outbox of a gateway (see the module docstring)."""

    # -- routes -----------------------------------------------------------------------------
    def route_get(self, key: RouteKey) -> str | None:
        """The session the platform conversation was last routed to, or ``None``. The caller
        follows compression continuations (``newest_continuation``) and re-points the route."""
        ...

    def route_set(self, key: RouteKey, session_id: str, *, now: float) -> None:
        """Point ``key`` at ``session_id`` (insert or replace; a replaced route keeps its
        creation time). Raises ``SessionNotFound`` if there is no such session. Deleting a
        session deletes the routes that point at it (``route_get`` then answers ``None``)."""
        ...

    def route_delete(self, key: RouteKey) -> bool:
        """Forget the route; return whether it existed."""
        ...

    def routes_of(self, session_id: str) -> list[RouteKey]:
        """Every route that points at ``session_id``, oldest (first created) first."""
        ...

    # -- inbox ------------------------------------------------------------------------------
    def inbox_accept(
        self,
        route: RouteKey,
        external_id: str,
        text: str,
        *,
        sender: str = "",
        received_at: float,
        meta: dict[str, Any] | None = None,
    ) -> tuple[InboxEntry, bool]:
        """Store an inbound message durably (status ``pending``) and return it with ``True``;
        if this adapter already stored ``external_id``, return that entry with ``False`` and
        write nothing (a redelivery)."""
        ...

    def inbox_get(self, entry_id: int) -> InboxEntry | None:
        ...

    def inbox_unfinished(self, *, limit: int | None = None) -> list[InboxEntry]:
        """Entries still ``pending`` or ``running``, oldest first: what start-up answers."""
        ...

    def inbox_start(self, entry_id: int, session_id: str, *, now: float) -> InboxEntry:
        """Mark an entry ``running`` in ``session_id`` (attempts + 1) and return it.
        Raises ``KeyError`` for an unknown id. An entry already finished is returned as it is
        (its status says so) and not started again: a message is answered once.
        ``session_id=""`` (the session is not made yet) leaves ``session_id`` ``None``."""
        ...

    def inbox_finish(
        self,
        entry_id: int,
        status: str,
        *,
        now: float,
        error: str | None = None,
        reply: NewOutbound | None = None,
    ) -> OutboxEntry | None:
        """Mark an entry ``answered`` or ``failed`` and, in the same transaction, queue
        ``reply`` in the outbox (so an answered message always has its reply queued, once).
        Finishing an entry that is already finished writes nothing and returns ``None``.
        Returns the queued outbox entry (``None`` without ``reply``); the reply's ``inbox_id``
        and ``session_id`` default to the entry's. ``status`` must be ``answered`` or
        ``failed`` (``ValueError``); an unknown id raises ``KeyError``."""
        ...

    def inbox_counts(self) -> dict[str, int]:
        """Entries per status (every status present, zero when none)."""
        ...

    # -- outbox -----------------------------------------------------------------------------
    def outbox_add(self, message: NewOutbound, *, now: float) -> OutboxEntry:
        """Queue a message to send (status ``pending``, due now)."""
        ...

    def outbox_due(self, now: float, *, limit: int = 100) -> list[OutboxEntry]:
        """``pending`` entries whose next attempt is due, oldest first."""
        ...

    def outbox_next_due(self) -> float | None:
        """The earliest next attempt of a ``pending`` entry, or ``None``."""
        ...

    # outbox_sent, outbox_retry and outbox_fail raise ``KeyError`` for an unknown id and leave
    # an entry that is no longer ``pending`` as it is (a late answer of a given-up try).
    def outbox_sent(self, entry_id: int, *, now: float) -> None:
        """The adapter took it: status ``sent`` (attempts + 1)."""
        ...

    def outbox_retry(self, entry_id: int, *, error: str, next_attempt_at: float) -> None:
        """A try failed and will be repeated: attempts + 1, the error kept, due later."""
        ...

    def outbox_fail(self, entry_id: int, *, error: str, now: float) -> None:
        """The last try failed: status ``failed`` (attempts + 1, the error kept)."""
        ...

    def outbox_list(
        self, *, statuses: Sequence[str] = OUTBOX_STATUSES, limit: int = 100
    ) -> list[OutboxEntry]:
        """Entries with one of ``statuses``, newest first."""
        ...

    def outbox_counts(self) -> dict[str, int]:
        """Entries per status (every status present, zero when none)."""
        ...

    # -- housekeeping -----------------------------------------------------------------------
    def prune(self, before: float) -> int:
        """Delete finished inbox entries (answered, failed) and sent outbox entries older
        than ``before``; return how many rows went. Pending and running ones always stay."""
        ...
