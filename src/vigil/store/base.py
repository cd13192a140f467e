"""The ``SessionStore`` protocol: what every backend (SQLite, PostgreSQL) must do.

Callers depend only on this protocol. Every method is synchronous and thread-safe and every
write is its own short transaction; async code calls the store through a worker thread.
Times are Unix epoch seconds (UTC floats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence, Union, runtime_checkable

from vigil.store.deletions import Deleted
from vigil.store.records import (
    ConversationHead,
    MessageRecord,
    MetaEntry,
    MetaSwap,
    NewMessage,
    SearchHit,
    SessionRecord,
)

if TYPE_CHECKING:  # only named in annotations: a one-shot chat never loads the gateway's tables
    from vigil.store.gateway.gateway_tables import GatewayTables
    from vigil.store.notify import Notifications
    from vigil.store.gateway.pairing_tables import PairingTables

ConfigUpdate = Callable[[dict[str, Any]], dict[str, Any]]
"""A function from the stored model configuration to the new one, applied inside the write
transaction, so concurrent read-modify-write updates cannot overwrite each other."""
ModelConfigChange = Union[dict[str, Any], ConfigUpdate]

_UNSET: Any = object()
UNSET: Any = _UNSET
"""Sentinel for :meth:`SessionStore.update_session`: leave this field as it is."""


@runtime_checkable
class SessionStore(Protocol):
    """Durable storage of sessions, messages, system prompts and small state."""

    # -- schema ---------------------------------------------------------------------------
    def schema_version(self) -> int:
        """The migration number the database is at."""
        ...

    def check_writable(self) -> None:
        """Raise ``StoreUnwritable`` (its reason in words) while the store is known to refuse
        writes: a full disk, a read-only file. Cheap while writes succeed; after a write failed
        for such a reason, tries a write that leaves nothing behind to see whether it passes now."""
        ...

    def close(self) -> None:
        """Release connections. The store must not be used afterwards."""
        ...

    def notifications(self) -> Notifications | None:
        """Publish/subscribe between the processes that share this store (PostgreSQL
        ``LISTEN``/``NOTIFY``: one instance per store object, closed with the store), or
        ``None`` when the backend has none (SQLite): callers then poll the store."""
        ...

    # -- the gateway ----------------------------------------------------------------------
    @property
    def gateway(self) -> GatewayTables:
        """The gateway's durable routes, inbox and outbox in this store (same database, same
        durability and concurrency guarantees as the rest; see ``store.gateway.gateway_tables``).
        A route goes when its session is deleted; inbox and outbox entries stay."""
        ...

    @property
    def pairing(self) -> PairingTables:
        """Pairing codes and paired platform users (see ``store.gateway.pairing_tables``)."""
        ...

    # -- sessions -------------------------------------------------------------------------
    def create_session(
        self,
        *,
        source: str,
        model: str | None = None,
        model_config: dict[str, Any] | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        tool_names: Iterable[str] = (),
        system_prompt: str | None = None,
        session_id: str | None = None,
        started_at: float | None = None,
        forked_from: str | None = None,
    ) -> SessionRecord:
        """Create a session with a fresh unique id (or ``session_id``) and return it.

        ``system_prompt``, when given, is stored content-addressed in the same transaction
        and the session points at it. ``parent_id`` links a continuation to its parent;
        ``forked_from`` a side session (``/background``) to the session it started from. Either
        must exist (``SessionNotFound``).
        """
        ...

    def get_session(self, session_id: str) -> SessionRecord:
        """Return the session with exactly this id; raise ``SessionNotFound`` otherwise."""
        ...

    def resolve_session(self, ref: str) -> str:
        """Turn a full id or a unique id prefix into a session id.

        Raises ``SessionNotFound`` when nothing matches and ``AmbiguousSession`` when several
        sessions start with ``ref``. An exact id always wins over longer ids it prefixes.
        """
        ...

    def list_sessions(
        self, *, limit: int | None = None, source: str | None = None
    ) -> list[SessionRecord]:
        """Sessions, most recently active first."""
        ...

    def list_conversations(self, *, limit: int | None = None) -> list[ConversationHead]:
        """Conversations, each once (a parent chain collapsed to its newest session),
        most recently active first; forks (:meth:`forks`) are not conversations."""
        ...

    def latest_session(self, *, source: str | None = None) -> SessionRecord | None:
        """The most recently active session, optionally of one source."""
        ...

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = UNSET,
        model: str | None = UNSET,
        model_config: ModelConfigChange = UNSET,
        tool_names: Iterable[str] = UNSET,
    ) -> SessionRecord:
        """Change the given fields (others stay) and return the updated session.

        ``model_config`` is a new dict, or a :data:`ConfigUpdate` applied atomically.
        """
        ...

    def set_session_prompt(
        self, session_id: str, prompt: str, *, model_config: ModelConfigChange | None = None
    ) -> str:
        """Store ``prompt`` content-addressed and point the session at it, together with
        ``model_config`` (a dict or a :data:`ConfigUpdate`) when given, in one transaction.
        Returns the prompt hash."""
        ...

    def end_session(self, session_id: str, reason: str, *, ended_at: float | None = None) -> None:
        """Mark a session ended (``compression``, ``new``, ``user`` ...). Idempotent."""
        ...

    def reopen_session(self, session_id: str) -> None:
        """Clear a session's end so that it can take turns again (``/resume``)."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete a session and its messages. Children and forks keep existing with no parent.

        Like :meth:`delete_sessions`, the deletion is added to the totals under
        ``deletions.DELETED_KEY``."""
        ...

    def delete_sessions(self, session_ids: Sequence[str]) -> Deleted:
        """Delete these sessions and their messages in one transaction and return what went.

        Raises ``SessionNotFound`` (deleting nothing) when any of them does not exist. Sessions
        left whose parent went keep existing with no parent. What went is added, in the same
        transaction, to the running totals under ``deletions.DELETED_KEY`` in ``state_meta``,
        so that totals over the remaining sessions can say what they leave out.
        """
        ...

    def conversation_sessions(self, session_id: str) -> list[SessionRecord]:
        """Every session linked to ``session_id`` by parent links, oldest start first: its
        oldest ancestor and everything that descends from it (continuations and their
        continuations). A session without links is alone in its list."""
        ...

    def parent_chain(self, session_id: str) -> list[SessionRecord]:
        """The session and its ancestors, oldest first."""
        ...

    def newest_continuation(self, session_id: str) -> str:
        """Follow child links from ``session_id`` to the newest continuation session."""
        ...

    def forks(self, session_id: str) -> list[SessionRecord]:
        """The sessions forked from ``session_id`` (``forked_from``), oldest start first; none
        for an unknown id. A fork is no conversation of its own: :meth:`list_conversations`
        leaves it out, and deleting the session it came from leaves it with no link."""
        ...

    # -- messages -------------------------------------------------------------------------
    def append_message(
        self, session_id: str, message: NewMessage, *, created_at: float | None = None
    ) -> MessageRecord:
        """Append one message in its own transaction and update the session counters."""
        ...

    def get_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[MessageRecord]:
        """A session's messages in order (those with ``seq > after_seq``)."""
        ...

    def search(
        self, query: str, *, limit: int = 20, session_id: str | None = None
    ) -> list[SearchHit]:
        """Full-text search over message content, best matches first.

        ``query`` is read by ``search_query.parse``: words (all must match), ``"phrases"``,
        ``prefix*``, ``OR`` and ``NOT``; any other text is matched as words, never as the
        backend's query syntax, and no text is an error. A query with nothing to look for
        (no searchable word, or only ``NOT``) finds nothing. Without ``session_id``, a message
        carried into a compression continuation (``meta["copied_from"]``) is listed once,
        under the newest session holding it.
        """
        ...

    # -- system prompts -------------------------------------------------------------------
    def put_prompt(self, text: str) -> str:
        """Store a prompt under its content hash (idempotent) and return the hash."""
        ...

    def get_prompt(self, prompt_hash: str) -> str | None:
        """The stored text for ``prompt_hash``, or ``None`` if there is no such row."""
        ...

    # -- state_meta -----------------------------------------------------------------------
    def get_meta(self, key: str) -> MetaEntry | None:
        """The entry stored under ``key``, or ``None``."""
        ...

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under ``key``."""
        ...

    def delete_meta(self, key: str) -> bool:
        """Remove ``key``; return whether it existed."""
        ...

    def compare_and_set_meta(self, key: str, expected: Any, new: Any) -> bool:
        """Atomically replace the value under ``key`` if it currently equals ``expected``.

        ``expected=None`` means "the key is absent"; ``new=None`` deletes the key. Returns
        whether the swap happened. This is how concurrent processes claim work.
        """
        ...

    def get_meta_many(self, keys: Iterable[str]) -> dict[str, MetaEntry]:
        """The entries stored under ``keys``, by key (absent keys are left out), read in one
        snapshot."""
        ...

    def compare_and_set_many(self, swaps: Sequence[MetaSwap]) -> list[bool]:
        """Several compare-and-sets, and the writes that go with each, in one transaction:
        one durable commit for all of them.

        Each swap succeeds or fails on its own, exactly as ``compare_and_set_meta`` would
        (concurrent callers get exactly one winner per key), and its ``also`` writes happen
        only when it succeeds. Returns, in order, whether each swap happened. Every key in a
        batch (swapped or written along) must be distinct (``ValueError``). This is how a
        scheduler claims every occurrence due at one moment at the price of one commit.
        """
        ...

    def list_meta(self, prefix: str) -> list[MetaEntry]:
        """Every entry whose key starts with ``prefix``, ordered by key."""
        ...
