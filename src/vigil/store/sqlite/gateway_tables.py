"""The gateway's routes, inbox and outbox in the SQLite store (``GatewayTables``).

Every write goes through the store's group commit, so it is serialised with every other write
of every process on the file (``BEGIN IMMEDIATE``) and durable when it returns; each runs as
one function inside that transaction, so a read-then-write (a duplicate check, finishing an
entry and queueing its reply) cannot be split by another writer. Rows are decoded inside the
write, so a damaged one rolls its write back.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Sequence

from vigil.store.checks import optional_limit
from vigil.store.errors import SessionNotFound
from vigil.store.gateway.gateway_rows import (
    INBOX,
    INBOX_COLUMNS,
    OUTBOX,
    OUTBOX_COLUMNS,
    ROUTE_COLUMNS,
    ROUTE_MATCH,
    OutboundParams,
    check_id,
    check_text,
    counts_of,
    finish_status,
    inbox_from_row,
    inbox_statuses,
    meta_json,
    outbound_params,
    outbox_from_row,
    outbox_statuses,
    claim_params,
    route_of,
    route_params,
    started_session,
)
from vigil.store.gateway.gateway_tables import (
    FORGOTTEN,
    INBOX_STATUSES,
    OUTBOX_STATUSES,
    InboxEntry,
    NewOutbound,
    OutboxEntry,
    RouteKey,
)
from vigil.store.sqlite.conn import Database
from vigil.store.sqlite.group import GroupCommit

_ROUTE = ROUTE_MATCH.format(p="?")
# Status values are written into the SQL (never user input) so that the partial index on
# pending outbox entries can serve the queries that need it.
_UNFINISHED = "status IN ('pending', 'running')"
_SAME_CHAT = "o.adapter = e.adapter AND o.chat = e.chat AND o.thread = e.thread AND o.user_key = e.user_key"
_CLAIM = (
    "UPDATE gateway_outbox SET claimed_by = :worker, claim_until = :until WHERE id IN ("
    " SELECT e.id FROM gateway_outbox e WHERE e.status = 'pending' AND e.next_attempt_at <= :now"
    " AND (e.claim_until IS NULL OR e.claim_until <= :now OR e.claimed_by = :worker)"
    " AND NOT EXISTS (SELECT 1 FROM gateway_outbox o WHERE o.status = 'pending' AND"
    f" {_SAME_CHAT} AND o.id < e.id AND (o.next_attempt_at > :now"
    " OR (o.claim_until > :now AND o.claimed_by <> :worker)))"
    f" ORDER BY e.id LIMIT :limit) RETURNING {OUTBOX_COLUMNS}"
)
"""Claim the due entries whose chat has no older pending entry that is not due or is held by
another worker's live claim (see ``GatewayTables.outbox_claim``)."""
_NEXT_CLAIMABLE = (
    "SELECT MIN(CASE WHEN e.claimed_by <> ? AND e.claim_until > e.next_attempt_at"
    " THEN e.claim_until ELSE e.next_attempt_at END) FROM gateway_outbox e WHERE e.status = 'pending'"
    f" AND NOT EXISTS (SELECT 1 FROM gateway_outbox o WHERE o.status = 'pending' AND {_SAME_CHAT} AND o.id < e.id)"
)
"""When each chat's oldest pending entry may be claimed by a worker; the earliest of those."""
_RELEASE_LATER = (
    "UPDATE gateway_outbox SET claimed_by = NULL, claim_until = NULL WHERE status = 'pending' AND id > ?"
    f" AND claimed_by IS NOT NULL AND ({ROUTE_COLUMNS}) = (SELECT {ROUTE_COLUMNS} FROM gateway_outbox WHERE id = ?)"
)
_INTERRUPTED = (
    "UPDATE gateway_inbox SET status = 'pending', deaths = CASE WHEN NOT ? THEN deaths"
    " WHEN EXISTS (SELECT 1 FROM gateway_inbox o WHERE o.finished_at >= gateway_inbox.started_at"
    " AND o.id <> gateway_inbox.id) THEN 0 ELSE deaths + 1 END"
    f" WHERE id = ? AND status = 'running' RETURNING {INBOX_COLUMNS}"
)
"""See ``GatewayTables.inbox_interrupted``: a death counts unless other work finished since
the entry started. Only start-up and take-overs run it, so the scan of finished entries is rare."""
_REQUEUE = (
    "UPDATE gateway_inbox SET status = 'pending', deaths = 0, finished_at = NULL, error = NULL"
    f" WHERE id = ? AND status = 'set_aside' RETURNING {INBOX_COLUMNS}"
)
_INSERT_OUTBOX = (
    f"INSERT INTO gateway_outbox ({ROUTE_COLUMNS}, kind, text, session_id, inbox_id, meta,"
    f" created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {OUTBOX_COLUMNS}"
)


class SQLiteGatewayTables:
    """``GatewayTables`` on one SQLite store's file (``SQLiteStore.gateway``)."""

    def __init__(self, db: Database, group: GroupCommit) -> None:
        self._db = db
        self._group = group

    # -- routes -----------------------------------------------------------------------------
    def route_get(self, key: RouteKey) -> str | None:
        rows = self._db.query(f"SELECT session_id FROM gateway_routes WHERE {_ROUTE}", route_params(key))
        return None if not rows else str(rows[0][0])

    def route_set(self, key: RouteKey, session_id: str, *, now: float) -> None:
        params = route_params(key)
        check_text(session_id, "session_id", empty=False)

        def write(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise SessionNotFound(session_id)
            conn.execute(
                f"INSERT INTO gateway_routes ({ROUTE_COLUMNS}, session_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (adapter, chat, thread, user_key)"
                " DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at",
                (*params, session_id, now, now),
            )

        self._group.run(write)

    def route_delete(self, key: RouteKey) -> bool:
        params = route_params(key)
        return self._group.run(
            lambda conn: conn.execute(f"DELETE FROM gateway_routes WHERE {_ROUTE}", params).rowcount > 0
        )

    def routes_of(self, session_id: str) -> list[RouteKey]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {ROUTE_COLUMNS} FROM gateway_routes WHERE session_id = ? ORDER BY created_at, rowid",
                (session_id,),
            ).fetchall()
        return [route_of(row) for row in rows]

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
        params = (
            *route_params(route),
            check_text(external_id, "external_id", empty=False),
            check_text(text, "text"),
            check_text(sender, "sender"),
            received_at,
            meta_json(meta),
        )

        def write(conn: sqlite3.Connection) -> tuple[InboxEntry, bool]:
            # Under the write lock nobody can store the same id between the insert and the read.
            inserted = conn.execute(
                f"INSERT INTO gateway_inbox ({ROUTE_COLUMNS}, external_id, text, sender, received_at, meta)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (adapter, external_id) DO NOTHING"
                f" RETURNING {INBOX_COLUMNS}",
                params,
            ).fetchall()
            if inserted:
                return inbox_from_row(inserted[0]), True
            stored = conn.execute(
                f"SELECT {INBOX_COLUMNS} FROM gateway_inbox WHERE adapter = ? AND external_id = ?",
                (params[0], external_id),
            ).fetchone()
            return inbox_from_row(stored), False

        return self._group.run(write)

    def inbox_get(self, entry_id: int) -> InboxEntry | None:
        check_id(entry_id)
        with self._db.read() as conn:
            row = conn.execute(f"SELECT {INBOX_COLUMNS} FROM gateway_inbox WHERE id = ?", (entry_id,)).fetchone()
        return None if row is None else inbox_from_row(row)

    def inbox_unfinished(self, *, limit: int | None = None) -> list[InboxEntry]:
        wanted = optional_limit(limit)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {INBOX_COLUMNS} FROM gateway_inbox WHERE {_UNFINISHED} ORDER BY id LIMIT ?",
                (-1 if wanted is None else wanted,),
            ).fetchall()
        return [inbox_from_row(row) for row in rows]

    def inbox_start(self, entry_id: int, session_id: str, *, now: float) -> InboxEntry:
        check_id(entry_id)
        started_in = started_session(session_id)

        def write(conn: sqlite3.Connection) -> InboxEntry:
            started = conn.execute(
                "UPDATE gateway_inbox SET status = 'running', session_id = ?, attempts = attempts + 1,"
                f" started_at = ? WHERE id = ? AND {_UNFINISHED} RETURNING {INBOX_COLUMNS}",
                (started_in, now, entry_id),
            ).fetchall()
            if started:
                return inbox_from_row(started[0])
            return inbox_from_row(_inbox_row(conn, entry_id))  # finished: left as it is

        return self._group.run(write)

    def inbox_finish(
        self,
        entry_id: int,
        status: str,
        *,
        now: float,
        error: str | None = None,
        reply: NewOutbound | None = None,
    ) -> OutboxEntry | None:
        check_id(entry_id)
        finish_status(status)
        if error is not None:
            check_text(error, "error")
        queued = None if reply is None else outbound_params(reply)

        def write(conn: sqlite3.Connection) -> OutboxEntry | None:
            finished = conn.execute(
                f"UPDATE gateway_inbox SET status = ?, finished_at = ?, error = ? WHERE id = ? AND {_UNFINISHED}"
                " RETURNING session_id",
                (status, now, error, entry_id),
            ).fetchall()
            if not finished:
                _inbox_row(conn, entry_id)  # KeyError for an unknown id
                return None
            if queued is None:
                return None
            return _queue(conn, queued, now, entry_id, finished[0][0])

        return self._group.run(write)

    def inbox_interrupted(self, entry_id: int, *, died: bool) -> InboxEntry:
        check_id(entry_id)

        def write(conn: sqlite3.Connection) -> InboxEntry:
            changed = conn.execute(_INTERRUPTED, (bool(died), entry_id)).fetchall()
            return inbox_from_row(changed[0] if changed else _inbox_row(conn, entry_id))

        return self._group.run(write)

    def inbox_requeue(self, entry_id: int) -> InboxEntry:
        check_id(entry_id)

        def write(conn: sqlite3.Connection) -> InboxEntry:
            changed = conn.execute(_REQUEUE, (entry_id,)).fetchall()
            return inbox_from_row(changed[0] if changed else _inbox_row(conn, entry_id))

        return self._group.run(write)

    def inbox_list(self, *, statuses: Sequence[str] = INBOX_STATUSES, limit: int = 100) -> list[InboxEntry]:
        wanted = inbox_statuses(statuses)
        count = optional_limit(limit)
        marks = ", ".join("?" * len(wanted))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {INBOX_COLUMNS} FROM gateway_inbox WHERE status IN ({marks}) ORDER BY id DESC LIMIT ?",
                (*wanted, count),
            ).fetchall()
        return [inbox_from_row(row) for row in rows]

    def inbox_counts(self) -> dict[str, int]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT status, COUNT(*) AS n, MIN(id) AS first FROM gateway_inbox GROUP BY status"
            ).fetchall()
        return counts_of(rows, INBOX, INBOX_STATUSES)

    # -- outbox -----------------------------------------------------------------------------
    def outbox_add(self, message: NewOutbound, *, now: float) -> OutboxEntry:
        queued = outbound_params(message)
        return self._group.run(lambda conn: _queue(conn, queued, now, None, None))

    def outbox_due(self, now: float, *, limit: int = 100) -> list[OutboxEntry]:
        wanted = optional_limit(limit)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {OUTBOX_COLUMNS} FROM gateway_outbox WHERE status = 'pending' AND next_attempt_at <= ?"
                " ORDER BY id LIMIT ?",
                (now, wanted),
            ).fetchall()
        return [outbox_from_row(row) for row in rows]

    def outbox_claim(self, worker: str, now: float, *, limit: int, hold: float) -> list[OutboxEntry]:
        worker, wanted, until = claim_params(worker, now, limit, hold)
        params = {"worker": worker, "until": until, "now": now, "limit": wanted}
        # One write transaction: no other claimer (thread or process) runs in between.
        entries = self._group.run(
            lambda conn: [outbox_from_row(row) for row in conn.execute(_CLAIM, params).fetchall()]
        )
        return sorted(entries, key=lambda entry: entry.id)  # RETURNING keeps no order

    def outbox_next_due(self, *, worker: str | None = None) -> float | None:
        if worker is None:
            rows = self._db.query("SELECT MIN(next_attempt_at) FROM gateway_outbox WHERE status = 'pending'")
        else:
            rows = self._db.query(_NEXT_CLAIMABLE, (check_text(worker, "worker", empty=False),))
        value = rows[0][0]
        return None if value is None else float(value)  # type: ignore[arg-type]

    def outbox_release(self, workers: Sequence[str]) -> int:
        names = [check_text(worker, "worker", empty=False) for worker in workers]
        if not names:
            return 0
        marks = ", ".join("?" * len(names))
        statement = (f"UPDATE gateway_outbox SET claimed_by = NULL, claim_until = NULL"
                     f" WHERE status = 'pending' AND claimed_by IN ({marks})")
        return int(self._group.run(lambda conn: conn.execute(statement, names).rowcount))

    def outbox_sent(self, entry_id: int, *, now: float) -> None:
        self._outbox_update(entry_id, "status = 'sent', sent_at = ?", (now,))

    def outbox_retry(self, entry_id: int, *, error: str, next_attempt_at: float) -> None:
        check_text(error, "error")
        self._outbox_update(entry_id, "last_error = ?, next_attempt_at = ?", (error, next_attempt_at), release_later=True)

    def outbox_fail(self, entry_id: int, *, error: str, now: float) -> None:
        check_text(error, "error")
        self._outbox_update(entry_id, "status = 'failed', last_error = ?, failed_at = ?", (error, now))

    def _outbox_update(
        self, entry_id: int, assignments: str, params: tuple[Any, ...], *, release_later: bool = False
    ) -> None:
        """One try's outcome for a pending entry (``assignments`` are fixed SQL, never input);
        ``release_later``: its chat's later replies, which must wait behind it, are claimable
        by whoever claims it next (see ``GatewayTables.outbox_retry``)."""
        check_id(entry_id)

        def write(conn: sqlite3.Connection) -> None:
            changed = conn.execute(
                f"UPDATE gateway_outbox SET attempts = attempts + 1, claimed_by = NULL, claim_until = NULL, {assignments}"
                " WHERE id = ? AND status = 'pending'",
                (*params, entry_id),
            ).rowcount
            if not changed and conn.execute("SELECT 1 FROM gateway_outbox WHERE id = ?", (entry_id,)).fetchone() is None:
                raise KeyError(f"no gateway outbox entry {entry_id}")
            if changed and release_later:
                conn.execute(_RELEASE_LATER, (entry_id, entry_id))

        self._group.run(write)

    def outbox_list(
        self, *, statuses: Sequence[str] = OUTBOX_STATUSES, limit: int = 100
    ) -> list[OutboxEntry]:
        wanted = outbox_statuses(statuses)
        count = optional_limit(limit)
        marks = ", ".join("?" * len(wanted))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {OUTBOX_COLUMNS} FROM gateway_outbox WHERE status IN ({marks}) ORDER BY id DESC LIMIT ?",
                (*wanted, count),
            ).fetchall()
        return [outbox_from_row(row) for row in rows]

    def outbox_counts(self) -> dict[str, int]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT status, COUNT(*) AS n, MIN(id) AS first FROM gateway_outbox GROUP BY status"
            ).fetchall()
        return counts_of(rows, OUTBOX, OUTBOX_STATUSES)

    # -- housekeeping -----------------------------------------------------------------------
    def forget_sessions(self, session_ids: Sequence[str], *, now: float) -> int:
        wanted = [check_text(sid, "session_id", empty=False) for sid in session_ids]
        if not wanted:
            return 0
        marks = ", ".join("?" * len(wanted))

        def write(conn: sqlite3.Connection) -> int:
            inbox = conn.execute(
                "UPDATE gateway_inbox SET text = '', meta = '{}',"
                " error = CASE WHEN status IN ('answered', 'failed') THEN error ELSE ? END,"
                " finished_at = COALESCE(finished_at, ?),"
                " status = CASE WHEN status IN ('answered', 'failed') THEN status ELSE 'failed' END"
                f" WHERE session_id IN ({marks})",
                (FORGOTTEN, now, *wanted),
            ).rowcount
            outbox = conn.execute(
                "UPDATE gateway_outbox SET text = '', meta = '{}',"
                " last_error = CASE WHEN status = 'pending' THEN ? ELSE last_error END,"
                " failed_at = CASE WHEN status = 'pending' THEN ? ELSE failed_at END,"
                " claimed_by = NULL, claim_until = NULL,"
                " status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END"
                f" WHERE session_id IN ({marks})",
                (FORGOTTEN, now, *wanted),
            ).rowcount
            return inbox + outbox

        return self._group.run(write)

    def prune(self, before: float) -> int:
        def write(conn: sqlite3.Connection) -> int:
            inbox = conn.execute(
                "DELETE FROM gateway_inbox WHERE status IN ('answered', 'failed') AND finished_at < ?", (before,)
            ).rowcount
            outbox = conn.execute(
                "DELETE FROM gateway_outbox WHERE status = 'sent' AND sent_at < ?", (before,)
            ).rowcount
            return inbox + outbox

        return self._group.run(write)


# -- helpers that run inside a write transaction ------------------------------------------------
def _inbox_row(conn: sqlite3.Connection, entry_id: int) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute(
        f"SELECT {INBOX_COLUMNS} FROM gateway_inbox WHERE id = ?", (entry_id,)
    ).fetchone()
    if row is None:
        raise KeyError(f"no gateway inbox entry {entry_id}")
    return row


def _queue(
    conn: sqlite3.Connection,
    queued: OutboundParams,
    now: float,
    inbox_id: int | None,
    session_id: str | None,
) -> OutboxEntry:
    """Insert a pending entry due now; ``inbox_id`` and ``session_id`` fill in what the
    message leaves out (the entry it answers)."""
    *route, kind, text, own_session, own_inbox, meta = queued
    params = (
        *route,
        kind,
        text,
        own_session if own_session is not None else session_id,
        own_inbox if own_inbox is not None else inbox_id,
        meta,
        now,
        now,
    )
    return outbox_from_row(conn.execute(_INSERT_OUTBOX, params).fetchall()[0])
