"""The gateway's tables: routes, the inbox and the outbox, and the ``GatewayTables`` protocol.

The gateway maps each platform conversation to a vigil conversation (``routes``), writes every
inbound message before the platform is acknowledged (``inbox``, unique per adapter and platform
message id, so a redelivery is answered once) and sends every reply through a durable
``outbox`` (retried with back-off, finally marked failed, never dropped; gateways sharing one
store claim the entries they send, so each is sent by one of them). Both backends
implement the protocol in their ``gateway_tables`` module; a store exposes it as
``store.gateway``. Every method is synchronous, thread-safe and its own transaction, like the
rest of the store. Times are Unix epoch seconds.

Delivery semantics of the inbox. An accepted message (an entry) is answered exactly once,
whatever happens to processes, connections and providers, unless the person cancels it or it
is proven poisonous. What may happen to it on the way:

- *interrupted*: the process died, was stopped or lost the conversation to another worker while
  the entry's turn ran. That is not an attempt: the entry goes back to ``pending``
  (:meth:`GatewayTables.inbox_interrupted`) and its turn resumes, after what was stored, the
  next time it runs, as often as it takes. An entry the process died under while nothing else
  got finished is a suspect: it runs again once the restarted process has stayed up for a few
  seconds (a crash loop is no evidence against it), the second time alone among suspects.
- *transient*: the model endpoint refused the connection, timed out, answered 5xx or 429, or
  the store was busy or unreachable. The turn waits and tries again with jittered exponential
  back-off, without a fixed number of tries, for up to ``gateway.retry_window`` seconds (the
  provider's ``Retry-After`` is honoured); meanwhile the entry is ``pending`` (waiting, not
  running) and the conversation says it waits. Only a window that runs out fails the entry.
- *no model configured*: the person is told how to set one up and the entry waits, without a
  window, until a model is configured.
- *permanent*: the provider refused the request itself (4xx that will not change, a rejected
  key) or the message cannot be answered as it is: ``failed`` at once, the reason told to the
  person in words.
- *poison*: the entry's turn was running at :data:`POISON_DEATHS` consecutive deaths of the
  process with no other entry finished in between (``deaths``), or it raised the same internal
  error again and again: ``set_aside``, with a notice to the person and a log line, so that it
  cannot take the gateway down with it. ``vigil gateway retry ID`` (or ``/retry ID`` in the
  conversation) puts it back (:meth:`GatewayTables.inbox_requeue`).

Every give-up (``failed``) and every set-aside is one line in ``gateway.log`` and a count in the
gateway's metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

PENDING = "pending"
"""Inbox: stored and not running: never started, interrupted (``attempts`` > 0: its turn
resumes), or waiting for the model. Outbox: waiting to be sent (maybe after a failed try)."""
RUNNING = "running"
"""Inbox: its turn runs; a crash leaves it here, to be answered on start-up."""
ANSWERED = "answered"
"""Inbox: the turn (or command) ended and its reply, if any, is in the outbox."""
FAILED = "failed"
"""Inbox: could not be answered (a permanent error, or a retry window that ran out); the
person was told why. Outbox: every try failed; logged and counted."""
SET_ASIDE = "set_aside"
"""Inbox: proven poisonous (see the module docstring) and not answered; the person was told,
and :meth:`GatewayTables.inbox_requeue` sends it again."""
SENT = "sent"
"""Outbox: the adapter took it."""

POISON_DEATHS = 3
"""Consecutive deaths of the process under an entry's turn, with nothing else finished in
between, that set the entry aside."""

INBOX_STATUSES = (PENDING, RUNNING, ANSWERED, FAILED, SET_ASIDE)
FORGOTTEN = "its conversation was deleted"
"""The error of an entry finished by ``GatewayTables.forget_sessions``."""
FINISHED_STATUSES = (ANSWERED, FAILED, SET_ASIDE)
"""The inbox statuses an entry ends in."""
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
    deaths: int = 0
    """Consecutive deaths of the process while its turn ran with no other entry finished in
    between (see :meth:`GatewayTables.inbox_interrupted`); :data:`POISON_DEATHS` prove it poisonous."""


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
    claimed_by: str | None = None
    """The worker that last claimed it to send (see ``GatewayTables.outbox_claim``)."""
    claim_until: float | None = None
    """Until when that claim holds; a claim in the past has lapsed (its worker died)."""


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

    def inbox_list(self, *, statuses: Sequence[str] = INBOX_STATUSES, limit: int = 100) -> list[InboxEntry]:
        """Entries with one of ``statuses``, newest first."""
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
        """Mark an entry ``answered``, ``failed`` or ``set_aside`` and, in the same
        transaction, queue ``reply`` in the outbox (so an answered message always has its
        reply queued, once). Finishing an entry that is already finished writes nothing and
        returns ``None``. Returns the queued outbox entry (``None`` without ``reply``); the
        reply's ``inbox_id`` and ``session_id`` default to the entry's. Any other ``status``
        raises ``ValueError``; an unknown id raises ``KeyError``."""
        ...

    def inbox_interrupted(self, entry_id: int, *, died: bool) -> InboxEntry:
        """A ``running`` entry whose turn was cut off goes back to ``pending`` (``attempts``
        kept: its turn resumes when it runs again) and is returned.

        ``died``: the process died under the turn. That counts in ``deaths`` when no other
        entry finished since this one was last started; when one did, the process was doing
        its work, so ``deaths`` starts again from 0. Not ``died`` (a stop, a lost lease, a
        turn that waits for the model): ``deaths`` stays as it is. An entry that is not
        ``running`` is returned as it is; an unknown id raises ``KeyError``."""
        ...

    def inbox_requeue(self, entry_id: int) -> InboxEntry:
        """A ``set_aside`` entry goes back to ``pending`` to be answered (``deaths`` 0, its
        error and finish time cleared) and is returned; any other entry is returned as it
        is (its status says it was not set aside). An unknown id raises ``KeyError``."""
        ...

    def inbox_counts(self) -> dict[str, int]:
        """Entries per status (every status present, zero when none)."""
        ...

    # -- outbox -----------------------------------------------------------------------------
    def outbox_add(self, message: NewOutbound, *, now: float) -> OutboxEntry:
        """Queue a message to send (status ``pending``, due now)."""
        ...

    def outbox_due(self, now: float, *, limit: int = 100) -> list[OutboxEntry]:
        """``pending`` entries whose next attempt is due, oldest first (claimed or not: a
        view for people and tests; a sender uses :meth:`outbox_claim`)."""
        ...

    def outbox_claim(self, worker: str, now: float, *, limit: int, hold: float) -> list[OutboxEntry]:
        """Claim entries to send for ``worker`` until ``now + hold`` and return them (their
        ``claimed_by`` and ``claim_until`` set), oldest first, at most ``limit``.

        An entry is claimable when it is ``pending``, due (``next_attempt_at <= now``), not
        held by another worker's live claim (``claim_until > now``) and every older
        ``pending`` entry of its chat (route) is claimable too: a chat's claimable entries
        are the oldest of its pending ones, so whoever sends a chat's replies sends them in
        order, and no worker sends a reply while another may still send an older one to the
        same chat. ``worker``'s own live claims are returned again, renewed.

        Claimers running at the same time (threads, processes, machines) never get the same
        entry. A claim is cleared by ``outbox_sent``, ``outbox_retry`` and ``outbox_fail``; one
        that lapses (its worker died mid-send) makes the entry claimable again, so a reply is
        sent at least once. Workers compare claims with their own clocks: their machines'
        clocks must agree to well within ``hold``. ``worker`` must be a non-empty string,
        ``limit`` not negative, ``hold`` a positive number (``TypeError``/``ValueError``,
        nothing written)."""
        ...

    def outbox_next_due(self, *, worker: str | None = None) -> float | None:
        """The earliest next attempt of a ``pending`` entry, or ``None`` (nothing pending).

        With ``worker``: when :meth:`outbox_claim` may next give ``worker`` an entry it would
        not give now (a time in the past: now), from each chat's oldest pending entry (the
        later ones wait for it): its next attempt, or, while another worker's claim holds it,
        when that claim lapses if that is later."""
        ...

    def outbox_release(self, workers: Sequence[str]) -> int:
        """Clear every claim ``workers`` hold on ``pending`` entries (they were found dead:
        their sends ended with them) and return how many were cleared, so that another
        worker sends those replies now rather than when the claims would lapse. A reply the
        dead worker had handed to its platform just before it died may go out twice, as it
        would after the lapse. Each worker must be a non-empty string (``TypeError`` or
        ``ValueError``, nothing written)."""
        ...

    # outbox_sent, outbox_retry and outbox_fail raise ``KeyError`` for an unknown id and leave
    # an entry that is no longer ``pending`` as it is (a late answer of a given-up try). Each
    # clears the entry's claim, whoever holds it.
    def outbox_sent(self, entry_id: int, *, now: float) -> None:
        """The adapter took it: status ``sent`` (attempts + 1)."""
        ...

    def outbox_retry(self, entry_id: int, *, error: str, next_attempt_at: float) -> None:
        """A try failed and will be repeated: attempts + 1, the error kept, due later (and
        claimable by any worker then). The claims on its chat's later pending replies, which
        wait behind it, are cleared too: they go with it to whoever claims it next."""
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
    def forget_sessions(self, session_ids: Sequence[str], *, now: float) -> int:
        """A deleted conversation's words go from the inbox and the outbox too: the text and
        meta of every entry of these sessions are emptied (the rows stay, for deduplication and
        the counts). Entries not finished yet are finished as ``failed`` with the error
        :data:`FORGOTTEN` (a message of a deleted conversation is not answered, nor a reply
        of one sent; one set aside cannot be retried). Returns how many rows changed."""
        ...

    def prune(self, before: float) -> int:
        """Delete finished inbox entries (answered, failed) and sent outbox entries older
        than ``before``; return how many rows went. Pending, running and set-aside ones
        (which wait for a person's retry) always stay."""
        ...
